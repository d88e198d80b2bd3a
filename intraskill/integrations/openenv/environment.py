"""The store as an OpenEnv :class:`~openenv.core.env_server.interfaces.Environment` over the in-process engine.

One environment object is one OpenEnv session (one WebSocket connection): it owns an engine
:class:`~intraskill.shop.engine.Session` and, while it plays, a slot lease from the pool every session of
the server shares, with the ShopSimulator service's semantics (:mod:`intraskill.shop.leases`): ``reset``
leases a slot (keeping the one it holds), waiting at most ``reset_wait_s``; every ``step`` checks the lease;
a lease idle for ``lease_idle_s`` expires; ``close`` (the connection ending) releases it.

``reset`` picks the task by ``task_id`` (optionally checked against ``split``) or draws one from ``split``
with ``seed``; ``skill_ids`` selects chunks of the served skill bank (a mask), rendered into the reset
observation's ``skill_context``. Errors are one-line exceptions naming the field; the server maps them to
HTTP statuses (:mod:`.server`) and OpenEnv's WebSocket path sends their message.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from intraskill.hashing import u64
from intraskill.integrations.openenv.models import ShopAction, ShopObservation, ShopState
from intraskill.shop.engine import ShopEngine
from intraskill.shop.leases import LeaseError, SlotLeasePool, StaleLeaseError
from intraskill.shop.service import MAX_QUERY_TOKENS, RESET_WAIT_S, RequestError, check_search_query
from intraskill.shop.splits import Splits
from intraskill.shop.types import ENVIRONMENT_VERSION
from intraskill.skills.bank import SkillBank
from intraskill.skills.render import render_skill_block

STORE_NAME = "intraskill-store"
"""The name the server's ``/metadata`` gives (clients check it, :mod:`.agent_env`)."""
RESET_OPTIONS = ("task_id", "split", "seed", "persona", "skill_ids", "episode_id")


class EpisodeNotStartedError(RuntimeError):
    """A step before any reset in this session (the HTTP server answers 409)."""


@dataclass
class ShopHost:
    """What every session of one server shares: the engine, the splits, the slot pool, the skill bank
    and the limits."""

    engine: ShopEngine
    splits: Splits
    pool: SlotLeasePool
    bank: SkillBank | None = None
    reset_wait_s: float = RESET_WAIT_S
    max_query_tokens: int = MAX_QUERY_TOKENS
    reveal_goal: bool = False
    """Trusted mode: terminal observations carry the private goal (a client reading it could forge rewards)."""

    def task_id(self, task_id: int | None, split: str | None, seed: int | None) -> int:
        """The episode's task: ``task_id`` (in ``split`` when given), else a ``seed`` draw from ``split``."""
        if split is not None and split not in self.splits.names:
            raise RequestError(f"split: unknown split {split!r} (one of {', '.join(self.splits.names)})")
        if task_id is not None:
            if isinstance(task_id, bool) or not isinstance(task_id, int) or not self.engine.has_task(task_id):
                raise RequestError(f"task_id: unknown task id {task_id!r}")
            if split is not None and task_id not in self.splits.ids(split):
                raise RequestError(f"task_id: task {task_id} is not in split {split!r}")
            return task_id
        if seed is None:
            raise RequestError("task_id: give a task id, or a seed to draw one (from split when given)")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise RequestError(f"seed: need an integer, got {seed!r}")
        ids = self.splits.ids(split) if split is not None else tuple(
            t for t in sorted(self.engine.goals) if self.engine.has_task(t))
        if not ids:
            raise RequestError(f"split: {split!r} has no tasks to draw from")
        return ids[u64(f"openenv-task:{split or 'all'}:{seed}") % len(ids)]

    def skill_block(self, skill_ids: Sequence[str] | None) -> tuple[list[str], str]:
        """The selected skill ids in bank order and their rendered prompt block (``""`` for none)."""
        if not skill_ids:
            return [], ""
        if self.bank is None:
            raise RequestError("skill_ids: this server has no skill bank (serve it with --skillbank)")
        if isinstance(skill_ids, str) or not all(isinstance(s, str) for s in skill_ids):
            raise RequestError(f"skill_ids: need a list of skill id strings, got {skill_ids!r}")
        enabled = self.bank.enabled_skills()
        known = {skill.skill_id for skill in enabled}
        unknown = [s for s in skill_ids if s not in known]
        if unknown:
            raise RequestError(f"skill_ids: {unknown[0]!r} is not an enabled skill of bank {self.bank.bank_version}")
        chosen = [skill for skill in enabled if skill.skill_id in set(skill_ids)]
        return [s.skill_id for s in chosen], render_skill_block(chosen, self.engine.config.language)


def available_actions(page_state: Mapping[str, Any]) -> list[str]:
    """The canonical actions of a page: ``search[...]`` when search is open, then ``click[label]`` each."""
    search = ["search[...]"] if page_state.get("search_available") else []
    return search + [f"click[{label}]" for label in page_state.get("actions", ())]


def page_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The page part of an observation from an engine reset or step payload."""
    state = payload["observation_state"]
    return {"page": payload["observation"], "page_state": state, "available_actions": available_actions(state),
            "feedback": state["last_action"], "message": payload["message"]}


def observation_from(payload: Mapping[str, Any], reveal_goal: bool = False) -> ShopObservation:
    """The OpenEnv observation of an engine step payload (the terminal fields only when present; the private
    goal only with ``reveal_goal``)."""
    return ShopObservation(
        **page_fields(payload), done=bool(payload["done"]), reward=payload["reward"],
        reward_detail=payload.get("reward_detail"), termination_reason=payload.get("termination_reason"),
        purchase=payload.get("purchase"), goal=payload.get("goal") if reveal_goal else None)


class ShopOpenEnv(Environment[ShopAction, ShopObservation, ShopState]):
    """One OpenEnv session over the shared engine (see the module docstring for leases and options)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, host: ShopHost) -> None:
        super().__init__()
        self._host = host
        self._session = host.engine.new_session()
        self._lease: tuple[int, str] | None = None
        self._resets = itertools.count(1)
        self._store_config = asdict(host.engine.config)
        self._state = ShopState(max_actions=host.engine.config.max_actions, store_config=self._store_config)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **options: Any) -> ShopObservation:
        """Start an episode; options: ``task_id``, ``split``, ``persona`` (bool), ``skill_ids`` (list)."""
        unknown = sorted(set(options) - set(RESET_OPTIONS))
        if unknown:
            raise RequestError(f"{unknown[0]}: unknown reset option (known: {', '.join(RESET_OPTIONS)})")
        persona = options.get("persona")
        if persona is not None and not isinstance(persona, bool):
            raise RequestError(f"persona: need true, false or null, got {persona!r}")
        split = options.get("split")
        task_id = self._host.task_id(options.get("task_id"), split, seed)
        skill_ids, skill_context = self._host.skill_block(options.get("skill_ids"))
        self._lease_slot()
        payload = self._session.reset(task_id, persona=persona)
        self._state = ShopState(
            episode_id=episode_id or f"{self._session.session_id}-{next(self._resets)}", step_count=0,
            task_id=task_id, split=split, seed=seed, task_mode=payload["task_mode"], skill_ids=skill_ids,
            max_actions=self._host.engine.config.max_actions, store_config=self._store_config)
        return ShopObservation(
            **page_fields(payload), task_id=task_id, instruction=payload["task_instruction"],
            user_persona=payload["user_persona"], task_mode=payload["task_mode"], skill_context=skill_context)

    def step(self, action: ShopAction, timeout_s: float | None = None, **kwargs: Any) -> ShopObservation:
        """Apply the action (or the external termination) to the session's episode."""
        if self._lease is None or self._session.goal is None:
            raise EpisodeNotStartedError("step: no episode in this session; send a reset first")
        try:
            self._host.pool.validate(*self._lease)
        except StaleLeaseError:
            self._lease = None
            raise StaleLeaseError("lease: this session's slot lease expired (idle too long) or was released; "
                                  "reset to start a new episode") from None
        if action.terminate is not None:
            payload = self._session.terminate(action.terminate)
        else:
            assert action.action is not None
            check_search_query(action.action, self._host.max_query_tokens, field="action")
            payload = self._session.step(action.action)
        self._state.step_count = self._session.action_count
        self._state.done = bool(payload["done"])
        self._state.termination_reason = payload.get("termination_reason")
        return observation_from(payload, self._host.reveal_goal)

    @property
    def state(self) -> ShopState:
        """A copy of the episode bookkeeping."""
        return self._state.model_copy(deep=True)

    def get_metadata(self) -> EnvironmentMetadata:
        """Name, description and the store's environment version."""
        return EnvironmentMetadata(
            name=STORE_NAME, version=ENVIRONMENT_VERSION,
            description="IntraSkill's ShopSimulator-compatible store: search, open products, choose options, buy.")

    def close(self) -> None:
        """Release the slot lease, if any (idempotent; an already expired lease is fine)."""
        lease, self._lease = self._lease, None
        if lease is not None:
            with contextlib.suppress(LeaseError):
                self._host.pool.release(*lease)

    def _lease_slot(self) -> None:
        """Keep the slot this session holds, or lease one (``TimeoutError`` after ``reset_wait_s``)."""
        if self._lease is not None:
            try:
                self._host.pool.validate(*self._lease)
                return
            except StaleLeaseError:
                self._lease = None
        self._lease = self._host.pool.acquire(self._host.reset_wait_s)
