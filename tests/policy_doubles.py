"""Policy wrappers shared by tests: a simulated kill in the middle of a run."""

from __future__ import annotations

from typing import Any

from intraskill.chat.base import ChatRequest, Generation, Policy, SessionTokens


class KilledAfter:
    """Delegates to a policy and raises KeyboardInterrupt on the ``calls``-th generate (a simulated kill)."""

    def __init__(self, policy: Policy, calls: int) -> None:
        self.policy, self.calls_left = policy, calls

    @property
    def identity(self) -> dict[str, Any]:
        return self.policy.identity

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        self.calls_left -= 1
        if self.calls_left <= 0:
            raise KeyboardInterrupt
        return self.policy.generate(requests)

    def end_session(self, session_id: str) -> SessionTokens | None:
        return self.policy.end_session(session_id)
