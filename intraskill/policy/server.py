"""An OpenAI-compatible chat-completions server over an in-process :class:`HFPolicy`.

``/v1/models`` and non-streaming ``/v1/chat/completions`` (tools in, ``tool_calls`` out, usage,
finish_reason). Requests that arrive within ``batch_window_s`` of each other are micro-batched
into one lockstep ``generate`` call. A request is mapped to an existing session when its message
list continues that session's history (the longest such session wins), so the KV cache of earlier
turns is reused across stateless HTTP calls; the least recently used sessions are evicted.

A body is read under ``max_body_bytes`` and ``body_timeout_s`` (:class:`~intraskill.http_limits.BodyLimit`;
413, 408) and validated as :class:`CompletionBody` before it reaches the batcher: malformed JSON or a
wrong field gets 400 naming the field. The batcher answers every request it takes, whatever fails in a
batch (500 for a fault of the server's own), and keeps serving; ``/healthz`` answers 503 if it ever stops.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import OrderedDict
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from intraskill.chat.base import CONTEXT_LENGTH_EXCEEDED, ChatRequest, ContextFull, Generation
from intraskill.http_limits import BODY_TIMEOUT_S, BodyLimit

if TYPE_CHECKING:
    from intraskill.policy.hf import HFPolicy

LOGGER = logging.getLogger(__name__)
MAX_BODY_BYTES = 1 << 20
"""Largest accepted request body (bytes): a 32k-token conversation is about 130 KB of text."""


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
    max_body_bytes, body_timeout_s
        Largest request body (413) and longest time it may take to arrive (408).
    """

    model_name: str = "intraskill-policy"
    max_sessions: int = 256
    batch_window_s: float = 0.005
    max_batch: int = 64
    default_max_tokens: int = 512
    max_body_bytes: int = MAX_BODY_BYTES
    body_timeout_s: float = BODY_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.max_sessions < 1 or self.max_batch < 1 or self.default_max_tokens < 1 or self.max_body_bytes < 1:
            raise ValueError("ServerConfig.max_sessions, max_batch, default_max_tokens and max_body_bytes must be >= 1")
        if self.batch_window_s < 0:
            raise ValueError(f"ServerConfig.batch_window_s must be >= 0, got {self.batch_window_s}")
        if not self.body_timeout_s > 0:
            raise ValueError(f"ServerConfig.body_timeout_s must be > 0, got {self.body_timeout_s}")


# ---- request bodies (OpenAI's shapes; unknown fields are kept and ignored) ---------------------------


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class FunctionCall(_Open):
    name: str
    arguments: str | dict[str, Any] = "{}"


class MessageToolCall(_Open):
    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class ContentPart(_Open):
    type: str = "text"
    text: str = ""


class Message(_Open):
    role: str = Field(pattern=r"^[A-Za-z_]{1,32}$", description="system, user, assistant, tool, ...")
    content: str | list[ContentPart] | None = None
    tool_calls: list[MessageToolCall] | None = None


class PropertySchema(_Open):
    type: str | list[str] = "string"
    enum: list[Any] = Field(default_factory=list)


class FunctionParameters(_Open):
    type: str = "object"
    properties: dict[str, PropertySchema] = Field(default_factory=dict)
    required: list[str] = Field(default_factory=list)


class FunctionTool(_Open):
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: FunctionParameters | None = None


class Tool(_Open):
    type: Literal["function"] = "function"
    function: FunctionTool


class CompletionBody(_Open):
    """A chat-completions request body as serve-policy accepts it."""

    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    tools: list[Tool] | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = Field(None, ge=0, lt=1 << 64)
    n: Literal[1] = 1
    stream: Literal[False] | None = None

    def chat_request(self, session_id: str, default_max_tokens: int) -> ChatRequest:
        """The policy's :class:`ChatRequest` of this body for ``session_id``."""
        return ChatRequest(
            session_id=session_id, messages=self.message_dicts(),
            tools=[tool.model_dump(exclude_unset=True) for tool in self.tools or []],
            max_tokens=self.max_completion_tokens or self.max_tokens or default_max_tokens,
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p, seed=self.seed)

    def message_dicts(self) -> list[dict[str, Any]]:
        return [message.model_dump(exclude_unset=True) for message in self.messages]


class RequestError(ValueError):
    """A malformed request body (HTTP 400); the message names the field."""


def _field(loc: tuple[Any, ...]) -> str:
    """``messages[1].tool_calls[0].function`` from a pydantic error location (union-branch tags dropped)."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif not any(mark in str(part) for mark in "[(") and part not in ("str", "dict", "list", "function-after"):
            text += f".{part}" if text else str(part)
    return text or "body"


def parse_body(raw: bytes) -> CompletionBody:
    """The validated body of a chat-completions request; :class:`RequestError` naming the field."""
    try:
        body = CompletionBody.model_validate_json(raw)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_context=False)[0]
        if error["type"] == "json_invalid":
            raise RequestError(f"body: need a JSON object ({error['msg']})") from None
        if error["type"] == "model_type" and not error["loc"]:
            raise RequestError("body: need a JSON object") from None
        field = _field(tuple(error["loc"]))
        if field == "stream":
            raise RequestError("stream: streaming is not supported by serve-policy") from None
        raise RequestError(f"{field}: {error['msg']}") from None
    return body


@dataclass
class _Pending:
    body: CompletionBody
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

    async def submit(self, body: CompletionBody) -> tuple[Generation, str]:
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
                except TimeoutError:
                    break
            try:
                await asyncio.to_thread(self._serve, batch)
            except Exception as error:  # the batcher outlives any batch; every waiter is answered
                LOGGER.exception("serving a batch failed")
                for pending in batch:
                    _resolve(pending, error=error)

    def _serve(self, batch: list[_Pending]) -> None:
        session_ids = self.router.assign([pending.body.message_dicts() for pending in batch])
        accepted = [(pending, pending.body.chat_request(session_id, self.config.default_max_tokens))
                    for pending, session_id in zip(batch, session_ids)]
        groups = [accepted]
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
            except Exception as error:  # every waiter must be answered
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
        state["batcher"], state["worker"] = batcher, worker
        try:
            yield
        finally:
            worker.cancel()

    app = FastAPI(title="intraskill serve-policy", lifespan=lifespan)
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes, timeout_s=config.body_timeout_s,
                       error_body=lambda message: _error_body(message, None))

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        serving = not state["worker"].done()
        return JSONResponse({"ok": serving, **policy.identity}, status_code=200 if serving else 503)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": config.model_name, "object": "model", "owned_by": "intraskill"}]}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> JSONResponse:
        try:
            body = parse_body(await request.body())
            generation, _ = await state["batcher"].submit(body)
        except ContextFull as error:
            return _error(400, str(error), CONTEXT_LENGTH_EXCEEDED)
        except ValueError as error:  # RequestError, or a request the policy refused
            return _error(400, str(error))
        except Exception as error:  # a fault of the server's own: reported, never a hang
            return _error(500, f"internal error: {type(error).__name__}: {error}", error_type="server_error")
        payload = completion_payload(generation, config.model_name, f"{next(completion_ids):08d}")
        return JSONResponse(payload)

    return app


def _error_body(message: str, code: str | None, error_type: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "code": code}}


def _error(status: int, message: str, code: str | None = None,
           error_type: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse(_error_body(message, code, error_type), status_code=status)
