"""Append-only episode files of a rollout step: token streams first, then traces, re-used on resume.

Each finished episode's :class:`~intraskill.chat.base.SessionTokens` (``tokens.jsonl``) and then
its trace (``traces.jsonl``) are appended with fsync as it finishes, so a trace on disk implies its
tokens. :class:`EpisodeLog` reads both back and runs only the jobs without a trace: a step re-run
after a kill neither loses nor duplicates an episode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intraskill.agent.env import Environment
from intraskill.agent.runtime import EpisodeJob, RuntimeConfig, run_episodes
from intraskill.agent.traces import EpisodeStatus
from intraskill.chat.base import ChatRequest, Generation, Policy, SessionTokens
from intraskill.jsonl import JsonlWriter, iter_jsonl
from intraskill.shop.reward import Reward, parse_reward

EpisodeCallback = Callable[[str, Mapping[str, Any]], None]
"""``on_event(name, info)``; the log calls it as ``("episode", {"episode_id": …})``."""


@dataclass(frozen=True)
class EpisodeRecord:
    """A finished episode as persisted: its trace record and (in-process policies) its token stream."""

    trace: dict[str, Any]
    tokens: SessionTokens | None

    @property
    def episode_id(self) -> str:
        return self.trace["episode_id"]

    @property
    def reward(self) -> Reward | None:
        """The validated reward, or ``None`` for an unscored (failed) episode."""
        if self.trace.get("status") != EpisodeStatus.COMPLETED.value:
            return None
        return parse_reward(self.trace.get("reward"))

    @property
    def assignment(self) -> dict[str, Any] | None:
        return ((self.trace.get("provenance") or {}).get("skills") or {}).get("assignment")

    @property
    def injected_skill_ids(self) -> tuple[str, ...]:
        selected = (self.trace.get("provenance") or {}).get("selected_skills") or []
        return tuple(skill["skill_id"] for skill in selected)


def _tokens_record(episode_id: str, tokens: SessionTokens) -> dict[str, Any]:
    return {"episode_id": episode_id, "input_ids": list(tokens.input_ids),
            "loss_mask": list(tokens.loss_mask), "logprobs": list(tokens.logprobs)}


class EpisodeLog:
    """Append-only episode files of one step (or of the round's retries) and the episodes they hold.

    ``tokens.jsonl`` is written before ``traces.jsonl``, so an episode with a trace always has its
    tokens (when the policy records any); an episode is *finished* once its trace is written.
    """

    def __init__(self, traces_path: str | Path, tokens_path: str | Path | None = None) -> None:
        self.traces_path = Path(traces_path)
        self.tokens_path = Path(tokens_path) if tokens_path is not None else None
        tokens: dict[str, SessionTokens] = {}
        if self.tokens_path is not None:
            for record in iter_jsonl(self.tokens_path):
                tokens[record["episode_id"]] = SessionTokens(record["input_ids"], record["loss_mask"],
                                                             record["logprobs"])
        self.records: dict[str, EpisodeRecord] = {}
        for trace in iter_jsonl(self.traces_path):
            if trace["episode_id"] in self.records:
                raise RuntimeError(f"{self.traces_path}: episode {trace['episode_id']} is recorded twice")
            self.records[trace["episode_id"]] = EpisodeRecord(trace, tokens.get(trace["episode_id"]))

    def run(
        self,
        policy: Policy,
        env_factory: Callable[[], Environment],
        jobs: Sequence[EpisodeJob],
        config: RuntimeConfig,
        provenance: Mapping[str, Any],
        on_event: EpisodeCallback | None = None,
    ) -> None:
        """Run the ``jobs`` not yet finished in one lockstep batch, persisting each as it finishes.

        ``provenance`` is stored as each trace's ``provenance.training``; token streams are kept
        only when the log has a tokens file (retries have none: they are never trained on).
        """
        pending = [job for job in jobs if job.episode_id not in self.records]
        if not pending:
            return
        recorder = _TokenRecorder(policy)
        traces = JsonlWriter(self.traces_path)
        tokens = JsonlWriter(self.tokens_path) if self.tokens_path is not None else None
        log = self

        class _Writer:
            def append(self, trace: dict[str, Any]) -> None:
                episode_id = trace["episode_id"]
                session = recorder.tokens.pop(episode_id, None)
                if trace["status"] != EpisodeStatus.COMPLETED.value:
                    session = None
                trace["provenance"]["training"] = dict(provenance)
                if tokens is not None and session is not None:
                    tokens.append(_tokens_record(episode_id, session))
                traces.append(trace)
                log.records[episode_id] = EpisodeRecord(trace, session if tokens is not None else None)
                if on_event is not None:
                    on_event("episode", {"episode_id": episode_id})

        try:
            run_episodes(recorder, env_factory, pending, config, trace_writer=_Writer(), progress=False)
        finally:
            traces.close()
            if tokens is not None:
                tokens.close()


class _TokenRecorder:
    """Passes calls through to a policy and keeps each ended session's :class:`SessionTokens`."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.tokens: dict[str, SessionTokens] = {}

    @property
    def identity(self) -> dict[str, Any]:
        return self.policy.identity

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        return self.policy.generate(requests)

    def end_session(self, session_id: str) -> SessionTokens | None:
        tokens = self.policy.end_session(session_id)
        if tokens is not None:
            self.tokens[session_id] = tokens
        return tokens
