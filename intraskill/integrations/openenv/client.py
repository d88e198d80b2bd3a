"""The store's OpenEnv client: OpenEnv's :class:`~openenv.core.env_client.EnvClient` over ``/ws`` with the
store's typed action, observation and state (``.sync()`` gives the blocking wrapper)."""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from intraskill.integrations.openenv.models import ShopAction, ShopObservation, ShopState


class ShopEnvClient(EnvClient[ShopAction, ShopObservation, ShopState]):
    """A persistent session with an ``intraskill env serve --protocol openenv`` server.

    ``reset`` takes the store's options as keywords: ``task_id``, ``split``, ``seed``, ``persona``,
    ``skill_ids``, ``episode_id``.
    """

    def _step_payload(self, action: ShopAction) -> dict[str, Any]:
        return action.model_dump(exclude_none=True, exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ShopObservation]:
        observation = ShopObservation(**payload.get("observation", {}), done=payload.get("done", False),
                                      reward=payload.get("reward"))
        return StepResult(observation=observation, reward=observation.reward, done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> ShopState:
        return ShopState(**payload)
