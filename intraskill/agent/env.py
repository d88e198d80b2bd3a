"""The environment protocol the agent runtime drives, and its in-process adapter.

One environment object serves one episode: ``reset(task_id)`` → ``step(action)``… →
(``terminate(reason)``) and always ``close()`` (in a ``finally``). Payload dicts follow the reference
reset/interact/terminate responses (docs/store.md §4.5). The HTTP client
(``intraskill.shop.client.AsyncShopClient``) exposes the same shape over the service.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Environment(Protocol):
    """A single-episode shopping environment."""

    def reset(self, task_id: int) -> dict[str, Any]:
        """Start the episode: ``task_instruction``, ``observation``, ``observation_state``, ..."""
        ...

    def step(self, action: str) -> dict[str, Any]:
        """Apply one canonical action (``search[…]``/``click[…]``); terminal payloads add the reward."""
        ...

    def terminate(self, reason: str) -> dict[str, Any]:
        """End the episode with zero reward (``action_limit`` | ``generation_length``)."""
        ...

    def close(self) -> None:
        """Release the episode's resources (idempotent)."""
        ...


class InProcessEnvironment:
    """:class:`Environment` over an in-process ``ShopEngine`` session.

    ``persona=None`` uses the engine's ``StoreConfig.persona`` (persona mode by default).
    """

    def __init__(self, engine: Any, persona: bool | None = None) -> None:
        self._session = engine.new_session()
        self._persona = persona

    def reset(self, task_id: int) -> dict[str, Any]:
        return self._session.reset(task_id, persona=self._persona)

    def step(self, action: str) -> dict[str, Any]:
        return self._session.step(action)

    def terminate(self, reason: str) -> dict[str, Any]:
        return self._session.terminate(reason)

    def close(self) -> None:
        """Nothing to release: an in-process session holds no slot, lease or connection."""
