"""An OpenAI-compatible chat-completions server over an in-process :class:`HFPolicy`.

``/v1/models`` and non-streaming ``/v1/chat/completions`` (tools in, ``tool_calls`` out, usage,
finish_reason). Requests that arrive within ``batch_window_s`` of each other are micro-batched
into one lockstep ``generate`` call. A request is mapped to an existing session when its message
list continues that session's history (the longest such session wins), so the KV cache of earlier
turns is reused across stateless HTTP calls; the least recently used sessions are evicted.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import OrderedDict
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from intraskill.chat.base import CONTEXT_LENGTH_EXCEEDED, ChatRequest, ContextFull, Generation
from intraskill.chat.chatml import render_message

if TYPE_CHECKING:
    from intraskill.policy.hf import HFPolicy

LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerConfig:
    """Serving knobs.

    Parameters
    ----------
    model_name
        The id listed by ``/v1/models`` and echoed in replies.
    max_sessions
        Live sessions (KV caches) kept; the least recently used beyond this are ended.
    batch_window_s
        How long the batcher waits for more requests after the first one of a batch.
    max_batch
        At most this many requests per lockstep ``generate`` call.
    default_max_tokens
        Completion budget when a request names none.
    """

    model_name: str = "intraskill-policy"
    max_sessions: int = 256
    batch_window_s: float = 0.005
    max_batch: int = 64
    default_max_tokens: int = 512

    def __post_init__(self) -> None:
        if self.max_sessions < 1 or self.max_batch < 1:
            raise ValueError("ServerConfig.max_sessions and max_batch must be >= 1")
        if self.batch_window_s < 0:
            raise ValueError(f"ServerConfig.batch_window_s must be >= 0, got {self.batch_window_s}")


@dataclass
class _Pending:
    body: dict[str, Any]
    future: asyncio.Future[tuple[Generation, str]]


class SessionRouter:
    """Maps stateless message lists onto the policy's live sessions; LRU eviction."""

    def __init__(self, policy: HFPolicy, max_sessions: int) -> None:
        self.policy = policy
        self.max_sessions = max_sessions
        self._lru: OrderedDict[str, None] = OrderedDict()
        self._ids = itertools.count()

    def assign(self, message_lists: list[list[dict[str, Any]]]) -> list[str]:
        """One distinct session id per message list: a continued session where possible, else a new one."""
        claimed: set[str] = set()
        assigned = []
        for messages in message_lists:
            session_id = self.policy.find_session(messages, exclude=claimed) or f"srv-{next(self._ids):08d}"
            claimed.add(session_id)
            assigned.append(session_id)
        return assigned

    def touch(self, session_ids: list[str]) -> None:
        """Mark sessions used and end the least recently used beyond ``max_sessions``."""
        for session_id in session_ids:
            self._lru[session_id] = None
            self._lru.move_to_end(session_id)
        while len(self._lru) > self.max_sessions:
            stale, _ = self._lru.popitem(last=False)
            self.policy.end_session(stale)


def chat_request(body: dict[str, Any], session_id: str, default_max_tokens: int) -> ChatRequest:
    """A :class:`ChatRequest` from a chat-completions body (errors name the field)."""
    if body.get("stream"):
        raise ValueError("stream: streaming is not supported by serve-policy")
    if body.get("n", 1) != 1:
        raise ValueError("n: only n=1 is supported")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages: a non-empty list is required")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ValueError(f"messages[{index}]: an object with a string 'role' is required")
        render_message(message)
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise ValueError("tools: must be a list of function tools")
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or default_max_tokens
    temperature = body.get("temperature")
    top_p = body.get("top_p")
    return ChatRequest(
        session_id=session_id, messages=messages, tools=tools, max_tokens=int(max_tokens),
        temperature=1.0 if temperature is None else float(temperature),
        top_p=1.0 if top_p is None else float(top_p), seed=body.get("seed"),
    )


def completion_payload(generation: Generation, model_name: str, completion_id: str) -> dict[str, Any]:
    """The OpenAI ``chat.completion`` object for one generation."""
    message: dict[str, Any] = {"role": "assistant", "content": generation.content or None}
    finish = generation.finish_reason
    if generation.tool_calls and generation.parse_error is None:
        message["tool_calls"] = [
            call.to_openai(f"call_{completion_id}_{i}") for i, call in enumerate(generation.tool_calls)
        ]
        finish = "tool_calls" if finish == "stop" else finish
    else:
        message["content"] = generation.text
    return {
        "id": f"chatcmpl-{completion_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_name,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": generation.prompt_tokens,
            "completion_tokens": generation.completion_tokens,
            "total_tokens": generation.prompt_tokens + generation.completion_tokens,
        },
    }


class MicroBatcher:
    """Collects concurrent requests for a few ms and runs them as one lockstep turn in a worker thread."""

    def __init__(self, policy: HFPolicy, config: ServerConfig) -> None:
        self.policy = policy
        self.config = config
        self.router = SessionRouter(policy, config.max_sessions)
        self.queue: asyncio.Queue[_Pending] = asyncio.Queue()

    async def submit(self, body: dict[str, Any]) -> tuple[Generation, str]:
        future: asyncio.Future[tuple[Generation, str]] = asyncio.get_running_loop().create_future()
        await self.queue.put(_Pending(body, future))
        return await future

    async def run(self) -> None:
        while True:
            batch = [await self.queue.get()]
            deadline = asyncio.get_running_loop().time() + self.config.batch_window_s
            while len(batch) < self.config.max_batch:
                remaining = deadline - asyncio.get_running_loop().time()
                try:
                    batch.append(await asyncio.wait_for(self.queue.get(), timeout=max(remaining, 0)))
                except asyncio.TimeoutError:
                    break
            await asyncio.to_thread(self._serve, batch)

    def _serve(self, batch: list[_Pending]) -> None:
        valid = []
        for pending in batch:
            try:
                chat_request(pending.body, "unassigned", self.config.default_max_tokens)
                valid.append(pending)
            except (ValueError, TypeError) as error:
                _resolve(pending, error=error)
        session_ids = self.router.assign([pending.body["messages"] for pending in valid])
        accepted = [
            (pending, chat_request(pending.body, session_id, self.config.default_max_tokens))
            for pending, session_id in zip(valid, session_ids)
        ]
        groups = [accepted] if accepted else []
        while groups:
            group = groups.pop()
            try:
                generations = self.policy.generate([request for _, request in group])
            except ValueError as error:
                if len(group) == 1:
                    _resolve(group[0][0], error=error)
                else:  # isolate the bad request(s): run each alone
                    groups.extend([item] for item in group)
                continue
            except Exception as error:  # noqa: BLE001 - every waiter must be answered
                LOGGER.exception("generate failed")
                for pending, _ in group:
                    _resolve(pending, error=error)
                continue
            self.router.touch([request.session_id for _, request in group])
            for (pending, request), generation in zip(group, generations):
                _resolve(pending, result=(generation, request.session_id))


def _resolve(pending: _Pending, result: Any = None, error: BaseException | None = None) -> None:
    loop = pending.future.get_loop()

    def settle() -> None:
        if pending.future.done():
            return
        if error is not None:
            pending.future.set_exception(error)
        else:
            pending.future.set_result(result)

    loop.call_soon_threadsafe(settle)


def create_app(policy: HFPolicy, config: ServerConfig | None = None) -> FastAPI:
    """The FastAPI app serving ``policy`` over the OpenAI chat-completions protocol."""
    config = config or ServerConfig()
    state: dict[str, Any] = {}
    completion_ids = itertools.count()

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        batcher = MicroBatcher(policy, config)
        worker = asyncio.create_task(batcher.run())
        state["batcher"] = batcher
        try:
            yield
        finally:
            worker.cancel()

    app = FastAPI(title="intraskill serve-policy", lifespan=lifespan)

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"ok": True, **policy.identity}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": config.model_name, "object": "model", "owned_by": "intraskill"}]}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> JSONResponse:
        body = await request.json()
        if not isinstance(body, dict):
            return _error(400, "the request body must be a JSON object")
        try:
            generation, _ = await state["batcher"].submit(body)
        except ContextFull as error:
            return _error(400, str(error), CONTEXT_LENGTH_EXCEEDED)
        except (ValueError, TypeError) as error:
            return _error(400, str(error))
        payload = completion_payload(generation, config.model_name, f"{next(completion_ids):08d}")
        return JSONResponse(payload)

    def _error(status: int, message: str, code: str | None = None) -> JSONResponse:
        return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "code": code}},
                            status_code=status)

    return app
