"""The agent runtime's :class:`~intraskill.agent.env.Environment` over an OpenEnv session of the store.

:class:`OpenEnvEnvironment` plays one episode through :class:`~.client.ShopEnvClient` (one WebSocket session
with an ``intraskill env serve --protocol openenv`` server) and hands the runtime the payloads the in-process
engine hands it (:mod:`intraskill.shop.engine`): the same page text and state, feedback, rewards and terminal
fields. Anything that plays episodes with :func:`~intraskill.agent.runtime.run_episodes` (the package's rollouts,
TRL's ``rollout_func`` in :mod:`intraskill.integrations.trl`) can therefore train against a served store instead of
an engine in its own process. :func:`openenv_environments` checks the server once and returns the factory the
runtime calls per episode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx

from intraskill.integrations.openenv.client import ShopEnvClient
from intraskill.integrations.openenv.environment import STORE_NAME
from intraskill.integrations.openenv.models import ShopAction, ShopObservation
from intraskill.shop.types import ENVIRONMENT_VERSION


def reset_payload(observation: ShopObservation, environment_version: str) -> dict[str, Any]:
    """The engine's reset payload rebuilt from an OpenEnv reset observation."""
    return {
        "task_instruction": observation.instruction,
        "observation": observation.page,
        "observation_state": observation.page_state,
        "user_persona": observation.user_persona or {},
        "idx": observation.task_id,
        "task_mode": observation.task_mode,
        "environment_version": environment_version,
        "message": observation.message,
    }


def step_payload(observation: ShopObservation) -> dict[str, Any]:
    """The engine's step (or terminal) payload rebuilt from an OpenEnv step observation."""
    payload: dict[str, Any] = {
        "done": observation.done,
        "reward": observation.reward,
        "observation": observation.page,
        "observation_state": observation.page_state,
        "action_feedback": dict(observation.feedback),
        "message": observation.message,
    }
    if observation.done:
        payload.update(reward_detail=observation.reward_detail, termination_reason=observation.termination_reason,
                       purchase=observation.purchase, goal=observation.goal)
    return payload


class OpenEnvEnvironment:
    """One episode over its own OpenEnv session (connected at ``reset``, closed by ``close``).

    ``persona=None`` leaves the task mode to the server's store (persona mode by default), as
    :class:`~intraskill.agent.env.InProcessEnvironment` does with its engine.
    """

    def __init__(self, base_url: str, environment_version: str, persona: bool | None = None,
                 message_timeout_s: float = 60.0) -> None:
        self._client = ShopEnvClient(base_url=base_url, message_timeout_s=message_timeout_s).sync()
        self._version = environment_version
        self._persona = persona
        self._open = False

    def reset(self, task_id: int) -> dict[str, Any]:
        if not self._open:
            self._client.connect()
            self._open = True
        options: dict[str, Any] = {"task_id": task_id}
        if self._persona is not None:
            options["persona"] = self._persona
        return reset_payload(self._client.reset(**options).observation, self._version)

    def step(self, action: str) -> dict[str, Any]:
        return step_payload(self._client.step(ShopAction(action=action)).observation)

    def terminate(self, reason: str) -> dict[str, Any]:
        return step_payload(self._client.step(ShopAction(terminate=reason)).observation)

    def close(self) -> None:
        """Close the session (its slot lease is released); idempotent."""
        if self._open:
            self._open = False
            self._client.close()


def openenv_environments(base_url: str, store_config: Mapping[str, Any] | None = None, persona: bool | None = None,
                         timeout_s: float = 10.0) -> Callable[[], OpenEnvEnvironment]:
    """A factory of :class:`OpenEnvEnvironment` on the store served at ``base_url``, checked once.

    Raises ``ValueError`` naming the URL when nothing answers there, when it is not this package's store, when the
    store's environment version differs from this package's, or when a setting named in ``store_config`` (e.g.
    :func:`~intraskill.shop.build.store_config` of a parameter set, as a dict) differs from the served store's:
    its pages and rewards would not be the ones the parameter set plays in process.
    """
    url = base_url.rstrip("/")
    try:
        response = httpx.get(f"{url}/metadata", timeout=timeout_s)
        response.raise_for_status()
        metadata = response.json()
    except (httpx.HTTPError, ValueError) as error:
        raise ValueError(f"env_url: no OpenEnv store answers at {url}/metadata ({error})") from None
    if not isinstance(metadata, dict) or metadata.get("name") != STORE_NAME:
        raise ValueError(f"env_url: {url} serves {metadata.get('name') if isinstance(metadata, dict) else metadata!r}"
                         f", not {STORE_NAME} (intraskill env serve --protocol openenv)")
    version = metadata.get("version")
    if version != ENVIRONMENT_VERSION:
        raise ValueError(f"env_url: {url} serves store version {version!r}, this package plays {ENVIRONMENT_VERSION!r}")
    if store_config:
        with ShopEnvClient(base_url=url, connect_timeout_s=timeout_s).sync() as client:
            served = client.state().store_config
        for name, expected in store_config.items():
            if served.get(name) != expected:
                raise ValueError(f"env_url: {url} serves a store with {name}={served.get(name)!r}, the parameter set "
                                 f"plays {expected!r} (serve it with intraskill env serve --protocol openenv "
                                 f"--params <the parameter set>)")
    return lambda: OpenEnvEnvironment(url, version, persona=persona)
