"""Clients of the store service (reference ``docs/store.md`` §4.5, §6 "Clients", §8 item 10).

Each client owns at most one slot lease. ``reset`` first releases a lease it still holds, then
waits for a slot with a connect timeout only (no read timeout), so a full service queues it; when
the service gives up waiting (503), the client waits ``Retry-After`` and asks again, for at most
``reset_retry_s`` in all. A 409 for a stale lease raises
:class:`~intraskill.shop.leases.StaleLeaseError` (the lease is dropped); a 409 for a finished episode
raises :class:`~intraskill.shop.engine.EpisodeFinishedError` (the lease is kept). Responses must carry
``observation_state`` and ``observation``; the legacy ``instruction`` field is rejected. The
lease id is kept inside the client and stripped from every returned payload, so it cannot leak
into traces or prompts. ``close()`` releases the lease; ``trust_env=False`` keeps proxies off
local calls.

:class:`AsyncShopClient` is for asyncio code; :class:`ShopClient` is the synchronous twin that
implements the agent runtime's ``Environment`` protocol (``reset/step/terminate/close``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from intraskill.shop.engine import EpisodeFinishedError
from intraskill.shop.leases import StaleLeaseError

API_PATH = "/api/shop_agent"
RESET_RETRY_S = 600.0
"""Default total time a client keeps retrying a ``reset`` the service answered with 503."""


class ShopServiceError(RuntimeError):
    """The service answered with an error status other than 409 (400 bad argument, 500 engine error)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class ShopProtocolError(ValueError):
    """A service response that breaks the observation contract."""


class _LeaseHolder:
    """Request bodies and response checks shared by the two clients (no I/O here)."""

    def __init__(self, base_url: str, timeout: float, reset_retry_s: float) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout: need a positive number of seconds, got {timeout!r}")
        if reset_retry_s < 0:
            raise ValueError(f"reset_retry_s: need seconds >= 0, got {reset_retry_s!r}")
        self.base_url = base_url.rstrip("/")
        self.timeout = float(timeout)
        self.reset_retry_s = float(reset_retry_s)
        self.env_idx: int | None = None
        self._lease: str | None = None

    @property
    def has_lease(self) -> bool:
        """Whether this client currently holds a slot lease."""
        return self._lease is not None

    def _reset_timeout(self) -> httpx.Timeout:
        return httpx.Timeout(connect=self.timeout, read=None, write=self.timeout, pool=self.timeout)

    @staticmethod
    def _reset_body(task_id: int, persona: bool) -> dict[str, Any]:
        return {"action": "reset", "idx": int(task_id), "if_persona": bool(persona)}

    def _retry_delay(self, response: httpx.Response, deadline: float) -> float | None:
        """Seconds to wait before asking again after a 503 reset; ``None``: give up (no time left)."""
        if response.status_code != 503:
            return None
        try:
            delay = max(0.0, float(response.headers.get("retry-after", "1")))
        except ValueError:
            delay = 1.0
        return delay if time.monotonic() + delay <= deadline else None

    def _leased_body(self, action: str, **fields: Any) -> dict[str, Any]:
        if self._lease is None:
            raise RuntimeError(f"{action}: this client holds no slot lease; call reset() first")
        return {"action": action, "env_idx": self.env_idx, "lease_id": self._lease, **fields}

    def _result(self, response: httpx.Response) -> dict[str, Any]:
        try:
            result = response.json().get("result")
        except ValueError:
            result = None
        if not isinstance(result, dict):
            raise ShopProtocolError(f"HTTP {response.status_code}: response has no result object")
        if response.status_code == 409:
            message = str(result.get("error", "stale lease"))
            if result.get("reason") == "episode_finished":
                raise EpisodeFinishedError(message)
            self._forget_lease()
            raise StaleLeaseError(message)
        if response.status_code >= 400:
            raise ShopServiceError(response.status_code, str(result.get("error", "")))
        return result

    def _observed(self, response: httpx.Response, take_lease: bool = False) -> dict[str, Any]:
        result = self._result(response)
        if "instruction" in result:
            raise ShopProtocolError("legacy 'instruction' field in response; expected observation_state")
        missing = [key for key in ("observation_state", "observation") if key not in result]
        if missing:
            raise ShopProtocolError(f"response lacks {', '.join(missing)}")
        if take_lease:
            self._take_lease(result)
        result.pop("lease_id", None)
        return result

    def _take_lease(self, result: dict[str, Any]) -> None:
        env_idx, lease = result.get("env_idx"), result.get("lease_id")
        if not isinstance(env_idx, int) or not isinstance(lease, str):
            raise ShopProtocolError("reset response lacks env_idx or lease_id")
        self.env_idx, self._lease = env_idx, lease

    def _forget_lease(self) -> None:
        self.env_idx, self._lease = None, None


class AsyncShopClient(_LeaseHolder):
    """Async client of one episode slot at a time.

    Parameters
    ----------
    base_url:
        Service root, e.g. ``"http://127.0.0.1:5700"``.
    timeout:
        Seconds for every request; ``reset`` uses it as connect timeout only and waits as long
        as the service holds it for a free slot.
    trust_env:
        Whether httpx honours proxy environment variables (off: local service).
    reset_retry_s:
        Total seconds ``reset`` keeps retrying after 503 (no free slot in time), waiting
        ``Retry-After`` between tries.

    Examples
    --------
    Against a running ``intraskill env serve`` (so not a doctest)::

        async with AsyncShopClient("http://127.0.0.1:5700") as env:
            first = await env.reset(3)
            state = await env.step("search[white floor washer]")
    """

    def __init__(self, base_url: str, timeout: float = 30.0, trust_env: bool = False,
                 reset_retry_s: float = RESET_RETRY_S) -> None:
        super().__init__(base_url, timeout, reset_retry_s)
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout, trust_env=trust_env)

    async def _post(self, body: dict[str, Any], timeout: httpx.Timeout | None = None) -> httpx.Response:
        if timeout is None:
            return await self._http.post(API_PATH, json=body)
        return await self._http.post(API_PATH, json=body, timeout=timeout)

    async def reset(self, task_id: int, persona: bool = True) -> dict[str, Any]:
        """Release any held lease, lease a slot (waiting, and retrying after 503) and start ``task_id``."""
        if self.has_lease:
            await self._release_quietly()
        deadline = time.monotonic() + self.reset_retry_s
        while True:
            response = await self._post(self._reset_body(task_id, persona), self._reset_timeout())
            delay = self._retry_delay(response, deadline)
            if delay is None:
                return self._observed(response, take_lease=True)
            await asyncio.sleep(delay)

    async def step(self, action: str) -> dict[str, Any]:
        """Send one canonical action (``search[...]`` / ``click[...]``); returns the step payload."""
        return self._observed(await self._post(self._leased_body("interact", response=action)))

    async def terminate(self, reason: str) -> dict[str, Any]:
        """End the episode with a zero-reward terminal (``action_limit`` | ``generation_length``)."""
        return self._observed(await self._post(self._leased_body("terminate", termination_reason=reason)))

    async def release(self) -> None:
        """Release the held lease (no-op without one); raises StaleLeaseError if it was stale."""
        if not self.has_lease:
            return
        body = self._leased_body("release_one")
        self._forget_lease()
        self._result(await self._post(body))

    async def healthz(self) -> dict[str, Any]:
        """The service's ``/healthz`` body."""
        response = await self._http.get("/healthz")
        response.raise_for_status()
        return response.json()

    async def close(self) -> None:
        """Release the held lease (a stale one is dropped) and close the HTTP connection pool."""
        try:
            await self._release_quietly()
        finally:
            await self._http.aclose()

    async def _release_quietly(self) -> None:
        try:
            await self.release()
        except StaleLeaseError:
            pass

    async def __aenter__(self) -> AsyncShopClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class ShopClient(_LeaseHolder):
    """Synchronous client; implements the agent runtime's ``Environment`` protocol over HTTP.

    Same parameters and lease rules as :class:`AsyncShopClient`; safe to use from notebooks
    (no event loop involved).
    """

    def __init__(self, base_url: str, timeout: float = 30.0, trust_env: bool = False,
                 reset_retry_s: float = RESET_RETRY_S) -> None:
        super().__init__(base_url, timeout, reset_retry_s)
        self._http = httpx.Client(base_url=self.base_url, timeout=self.timeout, trust_env=trust_env)

    def _post(self, body: dict[str, Any], timeout: httpx.Timeout | None = None) -> httpx.Response:
        if timeout is None:
            return self._http.post(API_PATH, json=body)
        return self._http.post(API_PATH, json=body, timeout=timeout)

    def reset(self, task_id: int, persona: bool = True) -> dict[str, Any]:
        """Release any held lease, lease a slot (waiting, and retrying after 503) and start ``task_id``."""
        if self.has_lease:
            self._release_quietly()
        deadline = time.monotonic() + self.reset_retry_s
        while True:
            response = self._post(self._reset_body(task_id, persona), self._reset_timeout())
            delay = self._retry_delay(response, deadline)
            if delay is None:
                return self._observed(response, take_lease=True)
            time.sleep(delay)

    def step(self, action: str) -> dict[str, Any]:
        """Send one canonical action; returns the step payload."""
        return self._observed(self._post(self._leased_body("interact", response=action)))

    def terminate(self, reason: str) -> dict[str, Any]:
        """End the episode with a zero-reward terminal (``action_limit`` | ``generation_length``)."""
        return self._observed(self._post(self._leased_body("terminate", termination_reason=reason)))

    def release(self) -> None:
        """Release the held lease (no-op without one); raises StaleLeaseError if it was stale."""
        if not self.has_lease:
            return
        body = self._leased_body("release_one")
        self._forget_lease()
        self._result(self._post(body))

    def close(self) -> None:
        """Release the held lease (a stale one is dropped) and close the HTTP connection pool."""
        try:
            self._release_quietly()
        finally:
            self._http.close()

    def _release_quietly(self) -> None:
        try:
            self.release()
        except StaleLeaseError:
            pass

    def __enter__(self) -> ShopClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
