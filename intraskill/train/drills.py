"""Copy drills: synthetic sequences that teach the organism to copy from its context.

The organism's good behaviour is mostly copying — the instruction's words and the profile's brand
and material into the query, the profile's colour into ``color=…`` — from places that move with each
episode. Measured here, a 3.7 M-parameter model cloned from expert transcripts did not learn such
copies in 1,000 steps: it wrote words that fit the category instead (``toothbrush`` for ``shaver``).
A drill makes copying the only way to lower the loss, so the model forms the circuit first
(an induction head: find the earlier occurrence of the current token, emit what followed it)::

    [span, shuffled] [filler] [the same span again]      loss on the repeat (its first token excepted)

Span and filler are cut from the demonstrations' own token streams, so drills use the organism's
vocabulary and formats; the span keeps distinct tokens only (each copied token has one possible
successor) and is shuffled, which leaves no prior to lean on.

Measured (``benchmarks/probe_copy_drills.py``, 2-core CPU): the 3.7 M-parameter organism did not
form the circuit within 1,400 steps of 1,024 tokens; a fixed gap between span and repeat is learned
in under 100 steps, a variable gap not within 400 — the copy the organism needs is the slow kind.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from intraskill.hashing import seed32
from intraskill.train.warmstart import BCExample

DRILL_TOKENS = 64
"""Planned mean tokens per drill when sizing one epoch of drills (:func:`drill_count`)."""
SPAN = (6, 24)
"""Tokens per copied span (inclusive range)."""
FILLER = (0, 48)
"""Tokens of unshuffled context between the span and its repeat (inclusive range)."""


def _window(stream: Sequence[int], length: int, rng: random.Random) -> list[int]:
    start = rng.randrange(max(1, len(stream) - length + 1))
    return list(stream[start:start + length])


def copy_drills(streams: Sequence[Sequence[int]], count: int, seed: int) -> list[BCExample]:
    """``count`` drills cut from ``streams`` (token-id lists), seeded by ``seed``.

    >>> drills = copy_drills([list(range(100))], 3, seed=1)
    >>> all(e.input_ids[-sum(e.loss_mask) - 1:] == e.input_ids[:sum(e.loss_mask) + 1] for e in drills)
    True
    """
    if not streams:
        raise ValueError("copy_drills: no token streams")
    rng = random.Random(seed32(f"{seed}:copy-drills"))
    drills = []
    for _ in range(count):
        distinct = dict.fromkeys(_window(rng.choice(streams), 4 * SPAN[1], rng))
        span = list(distinct)[:rng.randint(*SPAN)]
        rng.shuffle(span)
        filler = _window(rng.choice(streams), rng.randint(*FILLER), rng)
        ids = span + filler + span
        mask = [0] * (len(span) + len(filler) + 1) + [1] * (len(span) - 1)
        drills.append(BCExample(ids, mask))
    return drills


def drill_count(steps: int, batch_tokens: int) -> int:
    """Drills for about one epoch of ``steps`` batches of ``batch_tokens`` tokens."""
    return steps * batch_tokens // DRILL_TOKENS
