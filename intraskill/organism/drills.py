"""Copy drills: synthetic sequences that form the organism's copying circuit before it clones.

The organism's good behaviour is mostly copying — the instruction's words and the profile's brand
and material into the query, the profile's colour into ``color=…`` — from places that move with each
episode. That needs an induction head (find the earlier occurrence of the current token, emit what
followed it), which a 3.7 M-parameter model cloned from expert transcripts did not form in 1,000
CPU steps: it wrote words that fit the category instead (``toothbrush`` for ``shaver``).
A drill makes copying the only way to lower the loss::

    [span of distinct random tokens] [random filler] [the same span again]   loss on the repeat
                                                                             (its first token excepted)

Tokens are drawn uniformly from the organism's ordinary (non-special) vocabulary, so no prior helps
and every token gets the same matching rule. Measured on the 2-core CPU: with a fixed gap the copy is
positional, learned in under 100 steps and useless for the task; with the gap drawn from ``FILLER``
(32 drills per step) a 2-layer organism forms the induction head between steps 600 and 800 (held-out
copy accuracy 0.04 → 0.81), 4 layers had not by step 400; in the warm start (4,096 tokens, ~90
drills per step) the 2-layer organism's drill loss fell from 7.1 to 0.09 by step 600. Spans cut from
the demonstrations themselves (repeated, predictable tokens) did not form the head within 1,400
steps. ``benchmarks/probe_copy_drills.py`` repeats the measurement.

Lookup drills (:func:`lookup_drills`) train the reading a skill's rule lines need (``docs/testbed.md``): find
the line that names a key and copy the word that ends it, or say that no line names it. The reader organism,
cloned with copy drills only, copied the profile's code into its note but wrote a colour about as often when
no line named the code as when one did (2026-12-07, ``docs/testbed.md``)::

    [line]* [filler] [query key] [marker] [answer]        loss on the answer
    line = [0-3 tokens] [key, 2 tokens] [0-3 tokens] [value] [newline]
    answer = the value of the line naming the query key, else "none"      (values and "none": one set for all)
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from intraskill.hashing import seed32
from intraskill.organism.cloning import BCExample

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

SPAN = (10, 20)
"""Tokens per copied span (inclusive range)."""
FILLER = (0, 30)
"""Random tokens between the span and its repeat (inclusive range): the variable gap."""
DRILL_TOKENS = sum(SPAN) + sum(FILLER) // 2
"""Mean tokens per drill, for sizing one epoch of drills (:func:`drill_count`)."""


def copy_drills(token_ids: Sequence[int], count: int, seed: int) -> list[BCExample]:
    """``count`` drills over the vocabulary ``token_ids``, seeded by ``seed``.

    >>> drills = copy_drills(range(100, 200), 3, seed=1)
    >>> all(e.input_ids[-sum(e.loss_mask) - 1:] == e.input_ids[:sum(e.loss_mask) + 1] for e in drills)
    True
    """
    vocabulary = list(token_ids)
    if len(vocabulary) < SPAN[1]:
        raise ValueError(f"copy_drills: token_ids needs at least {SPAN[1]} tokens, got {len(vocabulary)}")
    rng = random.Random(seed32(f"{seed}:copy-drills"))
    drills = []
    for _ in range(count):
        span = rng.sample(vocabulary, rng.randint(*SPAN))
        filler = [rng.choice(vocabulary) for _ in range(rng.randint(*FILLER))]
        ids = span + filler + span
        mask = [0] * (len(span) + len(filler) + 1) + [1] * (len(span) - 1)
        drills.append(BCExample(ids, mask))
    return drills


def drill_count(steps: int, batch_tokens: int, tokens_per_drill: int = DRILL_TOKENS) -> int:
    """Drills for about one epoch of ``steps`` batches of ``batch_tokens`` tokens."""
    return steps * batch_tokens // tokens_per_drill


LINES = (1, 16)
"""Rule lines per lookup drill (inclusive range; the reader's S₀ has 16)."""
AROUND = (0, 3)
"""Tokens before the key and between the key and the value of one line (inclusive range)."""
KEY_TOKENS = 2
"""Tokens per key (a house code splits into a few tokens)."""
VALUES = 15
"""Value tokens of the lookup drills (as the store has 15 colours)."""
ANSWERED = 0.5
"""Share of lookup drills whose query key is on a line (the others answer "none")."""
LOOKUP_TOKENS = 95
"""Mean tokens per lookup drill (8.5 lines of about 6 tokens, filler, query), for :func:`drill_count`."""


def lookup_drills(token_ids: Sequence[int], count: int, seed: int, queries: int = 1) -> list[BCExample]:
    """``count`` key–value lookup drills over the vocabulary ``token_ids``, seeded by ``seed``. The value tokens
    (:data:`VALUES` of them, as the store has colours) and "none" (as the reader's note writes one ``?``) are the
    same for all the drills; every drill draws its own keys, newline, marker and other tokens, so only the lookup
    lowers the loss. ``queries``: query–answer pairs after the lines (each answer a loss token).

    >>> drills = lookup_drills(range(100, 300), 50, seed=1)
    >>> all(sum(e.loss_mask) == 1 and e.loss_mask[-1] == 1 for e in drills)
    True
    >>> 10 < sum(e.input_ids[-1] in e.input_ids[:-4] for e in drills) < 40   # about half answer from a line
    True
    >>> [sum(e.loss_mask) for e in lookup_drills(range(100, 300), 3, seed=1, queries=4)]
    [4, 4, 4]
    """
    vocabulary = list(token_ids)
    needed = 3 + VALUES + KEY_TOKENS * LINES[1] + 1
    if len(vocabulary) < needed:
        raise ValueError(f"lookup_drills: token_ids needs at least {needed} tokens, got {len(vocabulary)}")
    rng = random.Random(seed32(f"{seed}:lookup-drills"))
    fixed = rng.sample(vocabulary, 1 + VALUES)
    none, values = fixed[0], fixed[1:]
    vocabulary = [token for token in vocabulary if token not in fixed]
    drills = []
    for _ in range(count):
        newline, marker = rng.sample(vocabulary, 2)
        others = [token for token in vocabulary if token not in (newline, marker)]
        lines = rng.randint(*LINES)
        keys = [rng.sample(others, KEY_TOKENS) for _ in range(lines)]
        ids: list[int] = []
        for key in keys:
            ids += [rng.choice(others) for _ in range(rng.randint(*AROUND))] + key
            ids += [rng.choice(others) for _ in range(rng.randint(*AROUND))] + [rng.choice(values), newline]
        ids += [rng.choice(others) for _ in range(rng.randint(*FILLER))]
        mask = [0] * len(ids)
        for _ in range(queries):
            if rng.random() < ANSWERED:
                line = rng.randrange(lines)
                query, answer = keys[line], _value_of(ids, newline, line)
            else:
                query, answer = _absent_key(others, keys, rng), none
            ids += [*query, marker, answer]
            mask += [0] * (len(query) + 1) + [1]
        drills.append(BCExample(ids, mask))
    return drills


def _value_of(ids: Sequence[int], newline: int, line: int) -> int:
    """The value ending line ``line`` (the token before its newline)."""
    ends = [i for i, token in enumerate(ids) if token == newline]
    return ids[ends[line] - 1]


def _absent_key(others: Sequence[int], keys: Sequence[Sequence[int]], rng: random.Random) -> list[int]:
    """A key no line carries (its token pair appears on no line)."""
    taken = {tuple(key) for key in keys}
    while True:
        key = rng.sample(list(others), KEY_TOKENS)
        if tuple(key) not in taken:
            return key


def ordinary_tokens(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """The ids of ``tokenizer``'s vocabulary without its special tokens (what drills draw from)."""
    special = set(tokenizer.all_special_ids)
    return sorted(i for i in tokenizer.get_vocab().values() if i not in special)
