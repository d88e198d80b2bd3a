"""Skill1 deployed: the policy writes a query, the frozen library answers with K candidates, the policy ranks
them and acts with the top one (docs/method.md §10.1 without steps 5–6: no distillation, no U update, no
admission).

:class:`LibraryDeployment` is what :func:`~intraskill.evaluate.runner.run_eval` runs instead of plain episodes
when given one: the same jobs, episode IDs and episode seeds as every other evaluation (so its runs pair with
them by task and seed), each episode's trace appended to ``traces.jsonl`` with the selected skill as its
injected skill (``skill1-<id>``; none when nothing was retrieved). Its :attr:`~LibraryDeployment.identity` is
the plan's ``skills`` field: the library's content digest, retrieval, encoder and reply budgets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intraskill.agent.env import Environment
from intraskill.agent.runtime import EpisodeJob, EpisodeResult, RuntimeConfig
from intraskill.agent.skill1_episode import library_skill_chunk, run_skill1_episodes
from intraskill.chat.base import Policy
from intraskill.hashing import sha256_json
from intraskill.params import Skill1Params
from intraskill.skills.library import SkillLibrary, library_from_snapshot
from intraskill.skills.retrieval import Encoder, SentenceEncoder, encoder_identity, retrieval_identity


@dataclass(frozen=True)
class LibraryDeployment:
    """A frozen Skill1 library with its encoder, retrieval and reply budgets (``skill1``; the library is only
    read)."""

    library: SkillLibrary
    encoder: Encoder
    skill1: Skill1Params

    @classmethod
    def from_snapshot(cls, path: str | Path, params: Skill1Params) -> LibraryDeployment:
        """The library of a ``snapshot.json`` deployed with ``params``' retrieval and reply budgets."""
        library = library_from_snapshot(path, params.capacity, params.ema_rate, params.initial_utility)
        return cls(library, SentenceEncoder(), params)

    @property
    def skill_ids(self) -> list[str]:
        """The library's skills as episodes name them (``skill1-<id>``)."""
        return [library_skill_chunk(skill).skill_id for skill in self.library.skills]

    @property
    def identity(self) -> dict[str, Any]:
        """The evaluation plan's ``skills`` field."""
        return {"provider": "skill1-library", "library_sha256": sha256_json(self.library.state_dict()),
                "skill_ids": self.skill_ids, "retrieval": retrieval_identity(self.skill1),
                "encoder": encoder_identity(), "replies": {"query_max_tokens": self.skill1.query_max_tokens,
                                                           "rank_max_tokens": self.skill1.rank_max_tokens}}

    def run(self, policy: Policy, env_factory: Callable[[], Environment], jobs: Sequence[EpisodeJob],
            config: RuntimeConfig, trace_writer: Any) -> list[EpisodeResult]:
        """One batch of deployed rollouts (their traces to ``trace_writer``), in job order."""
        episodes = run_skill1_episodes(policy, env_factory, jobs, self.library, self.encoder, config,
                                       self.skill1, trace_writer, distill=False)
        return [episode.result for episode in episodes]

