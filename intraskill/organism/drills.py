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


def drill_count(steps: int, batch_tokens: int) -> int:
    """Drills for about one epoch of ``steps`` batches of ``batch_tokens`` tokens."""
    return steps * batch_tokens // DRILL_TOKENS


def ordinary_tokens(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """The ids of ``tokenizer``'s vocabulary without its special tokens (what drills draw from)."""
    special = set(tokenizer.all_special_ids)
    return sorted(i for i in tokenizer.get_vocab().values() if i not in special)
