"""The scripted expert's Skill1 lessons: planted usefulness carried by S₀ chunk titles.

A :class:`Lesson` is one S₀ chunk written in Skill1's form: the action lesson is the chunk's title, the
navigation lesson its procedure line and the description head its "Applies when" line. A library skill
distilled from a lesson therefore has a known planted effect, and :class:`Skill1Lessons` gives the expert
(:class:`~intraskill.policy.expert_policy.ExpertPolicy` with ``lessons``) three things:

- **the strategy → chunk map**: a Skill1 strategy in an episode's system prompt whose action lesson is chunk
  C's title counts as chunk C for the competence law (:meth:`Skill1Lessons.skill_ids`), so the S₀ law plays
  a selected strategy exactly as it plays the chunk;
- **the ranking**: the most useful candidate first (helpful before neutral before harmful; a strategy naming
  no chunk counts as neutral; ties in retrieval order), the others in retrieval order
  (:meth:`Skill1Lessons.rank`). The top is the strategy the episode uses; a full sort would order the tail too,
  but a tail that depends on the head alone is a permutation the 2-layer organism writes reliably (trained on
  full sorts it repeated an ID in 55 % of its rank replies);
- **the distillation**: one lesson drawn uniformly from a seeded per-session source
  (:meth:`Skill1Lessons.draw`), so libraries hold helpful, neutral and harmful skills alike and the
  distillation reward has something to tell apart.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from intraskill.agent.skill1_replies import STRATEGY_FORMAT, parse_strategy
from intraskill.skills.render import skill_entries

USEFULNESS = {"helpful": 1.0, "neutral": 0.0, "harmful": -1.0}
"""Planted usefulness per S₀ role (a strategy that names no chunk counts as neutral)."""
@dataclass(frozen=True)
class Lesson:
    """One S₀ chunk as a Skill1 lesson: its ``chunk`` ID, the three texts and its planted ``usefulness``."""

    chunk: str
    action: str
    navigation: str
    description: str
    usefulness: float

    @property
    def strat(self) -> str:
        """The strategy a skill distilled from this lesson carries (:data:`STRATEGY_FORMAT`)."""
        return STRATEGY_FORMAT.format(action=self.action, navigation=self.navigation)


@dataclass(frozen=True)
class Skill1Lessons:
    """The expert's lessons, keyed by action lesson (a chunk title); module docstring."""

    lessons: tuple[Lesson, ...]

    def __post_init__(self) -> None:
        if not self.lessons:
            raise ValueError("lessons: at least one lesson is needed")
        actions = [lesson.action for lesson in self.lessons]
        if len(set(actions)) != len(actions):
            raise ValueError(f"lessons: action lessons (chunk titles) must be distinct, got {actions}")

    @property
    def identity(self) -> dict[str, Any]:
        return {"lessons": [[lesson.chunk, lesson.action, lesson.usefulness] for lesson in self.lessons]}

    def lesson_of(self, strat: str) -> Lesson | None:
        """The lesson whose title is ``strat``'s action lesson; ``None`` for any other text."""
        parsed = parse_strategy(strat)
        return None if parsed is None else next((x for x in self.lessons if x.action == parsed[0]), None)

    def usefulness(self, strat: str) -> float:
        """Planted usefulness of a strategy (0, neutral, when it names no chunk)."""
        lesson = self.lesson_of(strat)
        return 0.0 if lesson is None else lesson.usefulness

    def rank(self, strats: Sequence[str]) -> tuple[int, ...]:
        """0-based positions: the most useful (the first of equals), then the others in retrieval order."""
        top = min(range(len(strats)), key=lambda i: (-self.usefulness(strats[i]), i))
        return (top, *(i for i in range(len(strats)) if i != top))

    def skill_ids(self, system: str) -> tuple[str, ...]:
        """The IDs the law reads: each skill of the system message, a strategy naming chunk C as C."""
        ids = []
        for skill_id, content in skill_entries(system):
            lesson = self.lesson_of(content)
            ids.append(skill_id if lesson is None else lesson.chunk)
        return tuple(ids)

    def draw(self, rng: random.Random) -> Lesson:
        """One lesson, uniformly from ``rng`` (the distillation's per-session source)."""
        return self.lessons[rng.randrange(len(self.lessons))]
