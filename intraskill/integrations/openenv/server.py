"""The OpenEnv app of the store, built with OpenEnv's own server helper (``create_fastapi_app``).

OpenEnv serves ``/ws`` (one session per connection: reset, step, state, close), ``/reset``, ``/step`` and
``/state`` (stateless: each call gets a fresh environment), ``/health``, ``/schema`` and ``/metadata``.
Around it, the ShopSimulator service's limits: ``slots`` concurrent episodes under slot leases (a reset
waits at most ``reset_wait_s``, a lease idle for ``lease_idle_s`` expires, and OpenEnv's reaper closes a
session idle that long), ``max_query_tokens`` per search and ``max_body_bytes`` per HTTP body (counted on the
bytes read, :class:`~intraskill.http_limits.BodyLimit`, with its body timeout) or WebSocket message
(:func:`uvicorn_options` sets the latter and the header timeout for the server). Terminal observations carry
the private goal only with ``reveal_goal`` (trusted mode). The engine's one-line errors become 400 (bad
argument), 409 (stale lease, finished or unstarted episode) and 503 (no slot in time) over HTTP instead of
500, and OpenEnv's own refusals keep their status with a one-line ``detail``; over ``/ws`` OpenEnv sends
their message as an error frame.
"""

from __future__ import annotations

import functools
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.types import ConcurrencyConfig
from starlette.exceptions import HTTPException

from intraskill.http_limits import BODY_TIMEOUT_S, BodyLimit, uvicorn_limits
from intraskill.integrations.openenv.environment import EpisodeNotStartedError, ShopHost, ShopOpenEnv
from intraskill.integrations.openenv.models import ShopAction, ShopObservation
from intraskill.shop.engine import EpisodeFinishedError, ShopEngine
from intraskill.shop.leases import PoolClosedError, SlotLeasePool, StaleLeaseError
from intraskill.shop.service import (
    LEASE_IDLE_S,
    MAX_BODY_BYTES,
    MAX_QUERY_TOKENS,
    MAX_WAITING_RESETS,
    RESET_WAIT_S,
    RETRY_AFTER_S,
    RequestError,
)
from intraskill.shop.splits import Splits
from intraskill.skills.bank import SkillBank

_STATUS: tuple[tuple[type[Exception], int, str], ...] = (
    (RequestError, 400, "bad_argument"),
    (StaleLeaseError, 409, "stale_lease"),
    (EpisodeFinishedError, 409, "episode_finished"),
    (EpisodeNotStartedError, 409, "episode_not_started"),
    (TimeoutError, 503, "no_free_slot"),
    (PoolClosedError, 503, "shutting_down"),
)


def uvicorn_options(max_body_bytes: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """uvicorn settings of the OpenEnv server: the WebSocket message cap, the header and keep-alive timeouts."""
    return {"ws_max_size": max_body_bytes, **uvicorn_limits()}


def create_openenv_app(engine: ShopEngine, splits: Splits, *, slots: int = 8, bank: SkillBank | None = None,
                       lease_idle_s: float | None = LEASE_IDLE_S, reset_wait_s: float = RESET_WAIT_S,
                       max_query_tokens: int = MAX_QUERY_TOKENS, max_body_bytes: int = MAX_BODY_BYTES,
                       body_timeout_s: float = BODY_TIMEOUT_S, reveal_goal: bool = False) -> FastAPI:
    """The OpenEnv FastAPI app over ``engine``; ``app.state.pool`` is its slot pool.

    Parameters
    ----------
    engine, splits:
        The shared store engine and its task splits (``reset`` by split and id).
    slots:
        Concurrent episodes; OpenEnv admits ``slots + MAX_WAITING_RESETS`` sessions, the rest wait for a slot.
    bank:
        The skill bank ``reset(skill_ids=…)`` selects from (``None``: no skill context).
    lease_idle_s, reset_wait_s, max_query_tokens, max_body_bytes, body_timeout_s:
        The ShopSimulator service's limits (``lease_idle_s=None`` never expires a lease).
    reveal_goal:
        Trusted mode: terminal observations carry the private goal (off by default: a client that reads it can
        replay it on a fresh reset of the same task and forge the reward).
    """
    if reset_wait_s <= 0 or max_body_bytes < 1 or max_query_tokens < 1:
        raise ValueError("reset_wait_s, max_body_bytes and max_query_tokens must be positive")
    pool = SlotLeasePool(slots, idle_timeout=lease_idle_s)
    host = ShopHost(engine, splits, pool, bank, reset_wait_s, max_query_tokens, reveal_goal)
    concurrency = ConcurrencyConfig(max_concurrent_envs=slots + MAX_WAITING_RESETS, session_timeout=lease_idle_s)
    app = create_fastapi_app(functools.partial(ShopOpenEnv, host), ShopAction, ShopObservation,
                             concurrency_config=concurrency)
    app.title = "intraskill store (OpenEnv)"
    app.state.pool = pool
    app.router.on_shutdown.append(pool.close)  # parked resets fail with PoolClosedError (503)

    for error, status, reason in _STATUS:
        app.add_exception_handler(error, functools.partial(_refusal, status=status, reason=reason))

    app.add_exception_handler(HTTPException, _one_line)
    app.add_exception_handler(RequestValidationError, _one_line)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes, timeout_s=body_timeout_s,
                       error_body=lambda message: {"detail": message})
    return app


def _error_line(errors: list[Any]) -> str:
    """``loc: msg`` of the first entry of a pydantic error list (its ``body`` prefix dropped)."""
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    loc = [str(part) for part in first.get("loc", ()) if part != "body"]
    message = str(first.get("msg", "body: invalid request"))
    return f"{'.'.join(loc)}: {message}" if loc else message  # a model-level message names its fields


async def _one_line(_: Request, exc: Exception) -> JSONResponse:
    """OpenEnv's and FastAPI's refusals (422 validation lists, 404, 405, ...) as one line naming the field."""
    if isinstance(exc, RequestValidationError):
        return JSONResponse({"detail": _error_line(list(exc.errors()))}, 422)
    assert isinstance(exc, HTTPException)
    detail = _error_line(exc.detail) if isinstance(exc.detail, list) else str(exc.detail)
    return JSONResponse({"detail": detail}, exc.status_code, headers=exc.headers)


async def _refusal(_: Request, exc: Exception, *, status: int, reason: str) -> JSONResponse:
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else None
    return JSONResponse({"detail": str(exc), "reason": reason}, status, headers=headers)
