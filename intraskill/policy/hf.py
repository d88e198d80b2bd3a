"""In-process lockstep policy over a transformers causal LM, with per-session KV-cache reuse.

Each session keeps the exact token stream of its episode: prompt deltas are tokenized once, the
model's sampled tokens are appended verbatim (never re-tokenized), so :class:`SessionTokens` is
precisely what the model saw and produced (``docs/method.md`` §3.5, §6.1). One
:meth:`HFPolicy.generate` call runs one batched prefill of every live session's new suffix over its
cached keys (in an evaluation, one per group of similar length: :meth:`HFPolicy.evaluation`), then
decodes all sessions in lockstep, one forward per token for the whole batch.

Log-probs are ``log_softmax(logits / temperature)`` at the sampled token (``temperature == 0`` is
greedy and records ``log_softmax(logits)``); a trainer recomputing them must use the same
temperature. They are exact sampling log-probs only with ``top_p == 1`` (as the reference
requires for training, ``docs/method.md`` §6.1).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from intraskill.chat.base import ChatRequest, ContextFull, Generation, SessionTokens
from intraskill.chat.chatml import (
    IM_END,
    assistant_matches,
    drop_reasoning,
    parse_tool_calls,
    render_message,
    render_spans,
)
from intraskill.chat.tokens import ChatEncoder
from intraskill.hashing import seed32
from intraskill.phases import add_work, phase, recording
from intraskill.policy.flops import TransformerShape
from intraskill.policy.lockstep import (
    LayerKV,
    SlabCache,
    additive_mask,
    compact_cache,
    left_pad,
    prefill_groups,
    sample_tokens,
    use_gqa_sdpa,
)

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

LOGGER = logging.getLogger(__name__)


@dataclass
class _Session:
    """One episode's stream: ``history`` holds the rendered prompt messages and our replies."""

    input_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    history: list[str | Generation] = field(default_factory=list)
    cache: list[LayerKV] | None = None
    turns: int = 0

    @property
    def cached(self) -> int:
        return 0 if self.cache is None else self.cache[0][0].shape[1]

    def extend_prompt(self, ids: Sequence[int]) -> None:
        self.input_ids.extend(ids)
        self.loss_mask.extend([0] * len(ids))
        self.logprobs.extend([0.0] * len(ids))

    def matches(self, messages: list[dict[str, Any]], rendered: Sequence[str] | None = None) -> bool:
        """Whether ``messages`` continue this history (``rendered``: their precomputed renderings)."""
        if len(messages) <= len(self.history):
            return False
        for index, (entry, message) in enumerate(zip(self.history, messages)):
            if isinstance(entry, Generation):
                if not assistant_matches(message, entry):
                    return False
            elif (rendered[index] if rendered is not None else render_message(message)) != entry:
                return False
        return True


@dataclass(frozen=True)
class _Mark:
    """A session's lengths before a turn, to roll a failed turn back (:meth:`HFPolicy._roll_back`)."""

    tokens: int
    history: int
    turns: int

    @classmethod
    def of(cls, session: _Session) -> _Mark:
        return cls(len(session.input_ids), len(session.history), session.turns)

    def restore(self, session: _Session) -> None:
        del session.input_ids[self.tokens :], session.loss_mask[self.tokens :], session.logprobs[self.tokens :]
        del session.history[self.history :]
        session.turns, session.cache = self.turns, None


@dataclass(frozen=True)
class _Turn:
    """One request's next turn, prepared before any session changes (:meth:`HFPolicy._prepare`)."""

    request: ChatRequest
    session: _Session
    fresh: bool
    prompt: list[int]
    budget: int


@dataclass
class _Row:
    """Decode state of one request inside a batched turn."""

    session: _Session
    request: ChatRequest
    generator: torch.Generator
    budget: int
    prompt_tokens: int
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    done: bool = False


class HFPolicy:
    """Lockstep multi-session policy over an in-process transformers model.

    Parameters
    ----------
    model, tokenizer
        A causal LM and its tokenizer (ChatML-compatible: ``<|im_start|>``/``<|im_end|>`` tokens).
    device, dtype
        Where and in which precision the model runs (``"cpu"``/``"cuda"``; ``"float32"``, ``"bfloat16"``...).
        On the CPU a grouped-query ``sdpa`` model is switched to
        :func:`~intraskill.policy.lockstep.gqa_sdpa_attention` (same results, no copied KV heads).
    max_batch
        At most this many sessions per batched forward; larger turns run in chunks.
    prefill_chunk_tokens
        A turn's prefill runs in column slices of about this many (padded) tokens across the batch,
        so the activations of one forward stay in cache (on the 2-core CPU, 64 sessions x 240 new
        tokens prefill ~20 % faster in slices of 8,192 tokens than in one forward).
    stop_token_ids
        Tokens that end a completion; default ``<|im_end|>`` and ``<|endoftext|>``.
    model_id, checkpoint_id
        Recorded in :attr:`identity`.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        device: str = "cpu",
        dtype: str | torch.dtype = "float32",
        max_batch: int = 64,
        prefill_chunk_tokens: int = 8192,
        stop_token_ids: Sequence[int] | None = None,
        model_id: str | None = None,
        checkpoint_id: str | None = None,
    ) -> None:
        # deferred: torch is heavy to import
        import torch

        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if prefill_chunk_tokens < 1:
            raise ValueError(f"prefill_chunk_tokens must be >= 1, got {prefill_chunk_tokens}")
        torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        self.model = model.to(device=device, dtype=torch_dtype).eval()
        self.device = torch.device(device)
        if self.device.type == "cpu":
            use_gqa_sdpa(self.model)  # on CUDA, SDPA with a mask and grouped heads falls back to its math kernel
        self.tokenizer = tokenizer
        self.encoder = ChatEncoder(tokenizer)
        self.max_batch = max_batch
        self.prefill_chunk_tokens = prefill_chunk_tokens
        self.bucket_prefill = False
        self.im_end_id = _token_id(tokenizer, IM_END)
        default_stops = [self.im_end_id] + [i for i in [tokenizer.eos_token_id] if i is not None]
        self.stop_ids = frozenset(stop_token_ids if stop_token_ids is not None else default_stops)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.im_end_id
        self.max_position = int(getattr(model.config, "max_position_embeddings", 1 << 30))
        self._model_id = model_id or str(getattr(model.config, "name_or_path", "") or type(model).__name__)
        self._checkpoint_id = checkpoint_id
        self._cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self.shape = TransformerShape.of(model.config, self.model.dtype.itemsize)
        self._sessions: dict[str, _Session] = {}

    @property
    def identity(self) -> dict[str, Any]:
        return {"model_id": self._model_id, "checkpoint_id": self._checkpoint_id, "backend": "hf"}

    @contextmanager
    def evaluation(self, batch_size: int) -> Iterator[None]:
        """An evaluation's lockstep batches: up to ``batch_size`` sessions a forward, each turn prefilled in groups of
        similar length (:func:`~intraskill.policy.lockstep.prefill_groups`: no row padded to a far longer one).
        Restored after, so a round's rollout keeps its batch and its one padded slab, and with them the exact
        log-probs its token streams record (grouping rounds a row's numbers differently, not its tokens)."""
        previous = self.max_batch, self.bucket_prefill
        self.max_batch, self.bucket_prefill = max(self.max_batch, batch_size), True
        try:
            yield
        finally:
            self.max_batch, self.bucket_prefill = previous

    @property
    def session_ids(self) -> list[str]:
        return list(self._sessions)

    def find_session(self, messages: list[dict[str, Any]], exclude: Sequence[str] = ()) -> str | None:
        """The live session (not in ``exclude``) whose history ``messages`` continue; longest wins."""
        rendered = [render_message(message) for message in messages]
        best, best_length = None, -1
        for session_id, session in self._sessions.items():
            if session_id in exclude or len(session.history) <= best_length:
                continue
            if session.matches(messages, rendered):
                best, best_length = session_id, len(session.history)
        return best

    def end_session(self, session_id: str) -> SessionTokens | None:
        """Free the session's cache and return its exact token stream (``None`` if unknown)."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return None
        return SessionTokens(session.input_ids, session.loss_mask, session.logprobs)

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        """One turn for every request (distinct sessions), decoded together in lockstep."""
        ids = [r.session_id for r in requests]
        if len(set(ids)) != len(ids):
            raise ValueError("generate() got two requests for the same session_id in one turn")
        with phase("generate"):
            return self._generate(requests)

    def _generate(self, requests: list[ChatRequest]) -> list[Generation]:
        # deferred: torch is heavy to import
        import torch

        with phase("tokenize"):
            turns = [self._prepare(request) for request in requests]
        full = [t for t in turns if t.budget < 1]
        if full:  # before any session changes, so the runtime can retry the others alone
            raise ContextFull("; ".join(
                f"session {t.request.session_id}: {len(t.session.input_ids) + len(t.prompt)} tokens leave no room "
                f"below max_position_embeddings={self.max_position}" for t in full))
        marks = [(turn, self._sessions.get(turn.request.session_id), _Mark.of(turn.session)) for turn in turns]
        try:
            rows = [self._open_row(turn) for turn in turns]
            with torch.inference_mode():
                for start in range(0, len(rows), self.max_batch):
                    self._run_turn(rows[start : start + self.max_batch])
            return [self._finish_row(row) for row in rows]
        except BaseException:
            self._roll_back(marks)
            raise

    def _roll_back(self, marks: list[tuple[_Turn, _Session | None, _Mark]]) -> None:
        """Undo a failed turn: every session ends at its last reply again (its cache dropped, so the next turn
        prefills the stream anew) and a session the turn opened or replaced is as it was, so a retry continues
        the exact training stream instead of restarting it."""
        for turn, previous, mark in marks:
            mark.restore(turn.session)
            if previous is None:
                self._sessions.pop(turn.request.session_id, None)
            else:
                self._sessions[turn.request.session_id] = previous

    def _prepare(self, request: ChatRequest) -> _Turn:
        """The request's session (a fresh one when its messages do not continue the stream), the prompt tokens
        to append and the reply budget left below the context window; changes nothing yet."""
        session = self._sessions.get(request.session_id)
        if session is not None and session.matches(request.messages):
            last = session.input_ids[-1]
            closing = [("\n", False)] if last == self.im_end_id else [(IM_END, True), ("\n", False)]
            delta = closing + render_spans(request.messages, request.tools, start=len(session.history))
            fresh = False
        else:
            if session is not None:
                LOGGER.warning("session %s: messages diverge from its stream; restarting it", request.session_id)
            session, fresh = _Session(), True
            delta = render_spans(request.messages, request.tools)
        prompt = self.encoder.encode(delta)  # message text never becomes a special token
        budget = min(request.max_tokens, self.max_position - len(session.input_ids) - len(prompt))
        return _Turn(request, session, fresh, prompt, budget)

    def _open_row(self, turn: _Turn) -> _Row:
        # deferred: torch is heavy to import
        import torch

        request, session = turn.request, turn.session
        if turn.fresh:
            self._sessions[request.session_id] = session
        session.extend_prompt(turn.prompt)
        session.history.extend(render_message(m) for m in request.messages[len(session.history) :])
        seed = request.seed if request.seed is not None else seed32(f"{request.session_id}/turn-{session.turns}")
        generator = torch.Generator(device=self.device).manual_seed(int(seed))
        return _Row(session, request, generator, turn.budget, prompt_tokens=len(session.input_ids))

    def _forward(self, input_ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, cache: Any) -> Any:
        kwargs = {self._cache_kw: cache}
        out = self.model(
            input_ids=input_ids, position_ids=positions, attention_mask=mask, use_cache=True,
            logits_to_keep=1, **kwargs,
        )
        return out.logits[:, -1, :]

    def _prefill(self, rows: list[_Row], suffixes: list[list[int]], members: list[int],
                 batch: int) -> tuple[SlabCache, torch.Tensor, torch.Tensor]:
        """Prefill rows ``members`` in one left-padded slab, in column slices sized for ``batch`` rows; the slab's
        cache (the rows' own caches moved into it), which key positions hold real tokens, and each row's last logits."""
        # deferred: torch is heavy to import
        import torch

        cache = SlabCache([rows[i].session.cache for i in members])
        padded, real = left_pad([suffixes[i] for i in members], self.pad_id)
        positions, _ = left_pad([range(rows[i].session.cached, len(rows[i].session.input_ids)) for i in members], 0)
        for i in members:
            rows[i].session.cache = None  # the slab now owns these tensors
        key_valid = torch.cat([cache.prefix_valid(self.device), torch.tensor(real, device=self.device)], dim=1)
        ids, pos = torch.tensor(padded, device=self.device), torch.tensor(positions, device=self.device)
        width = max(1, self.prefill_chunk_tokens // batch)
        for start in range(0, ids.shape[1], width):
            end = min(start + width, ids.shape[1])
            mask = additive_mask(key_valid[:, : cache.prefix + end], end - start, self.model.dtype)
            logits = self._forward(ids[:, start:end], pos[:, start:end], mask, cache)
        return cache, key_valid, logits

    def _prefill_in_groups(self, rows: list[_Row], suffixes: list[list[int]], distinct: list[int], copies: list[int],
                           groups: list[list[int]]) -> tuple[SlabCache, torch.Tensor, torch.Tensor]:
        """Prefill each group of similar lengths in its own slab (no row padded to another group's length), then
        gather every row's real keys into one slab for the lockstep decode (each copy its own reference's)."""
        # deferred: torch is heavy to import
        import torch

        compact: dict[int, list[LayerKV]] = {}
        last: dict[int, torch.Tensor] = {}
        for group in groups:
            members = [distinct[g] for g in group]
            slab, key_valid, logits = self._prefill(rows, suffixes, members, len(members))
            layers = slab.layers()
            for offset, g in enumerate(group):
                compact[g], last[g] = compact_cache(layers, offset, key_valid), logits[offset]
        cache = SlabCache([list(compact[c]) for c in copies])  # a list per row: the slab releases it layer by layer
        cache.gather()  # now: a turn whose every row stops at its first token runs no forward to allocate it
        return cache, cache.prefix_valid(self.device), torch.stack([last[c] for c in copies])

    def _run_turn(self, rows: list[_Row]) -> None:
        # deferred: torch is heavy to import
        import torch

        suffixes = [r.session.input_ids[r.session.cached :] for r in rows]
        distinct, copies = _distinct_prefills(rows, suffixes)
        spans = [(rows[i].session.cached, len(suffixes[i])) for i in distinct]
        groups = prefill_groups(spans, self.shape, self.prefill_chunk_tokens) if self.bucket_prefill else [distinct]
        with phase("prefill"):
            if recording():
                add_work(self.shape.forward(spans, len(distinct)), self.shape.forward_bytes(spans, len(distinct)))
            if len(groups) == 1:  # the whole batch in one padded slab, decoded in place
                # the whole batch's slices, copies or not, so each computed row has a full batch's arithmetic
                cache, key_valid, logits = self._prefill(rows, suffixes, distinct, len(rows))
                if len(distinct) < len(rows):
                    index = torch.tensor(copies, device=self.device)
                    cache.expand(index)
                    key_valid, logits = key_valid[index], logits[index]
            else:
                cache, key_valid, logits = self._prefill_in_groups(rows, suffixes, distinct, copies, groups)
        temps = [r.request.temperature for r in rows]
        top_ps = [r.request.top_p for r in rows]
        generators = [r.generator for r in rows]
        while True:
            with phase("sample"):
                tokens, logprobs = sample_tokens(logits, temps, top_ps, generators)
            feed, feed_pos, alive = [], [], []
            for row, token, logprob in zip(rows, tokens.tolist(), logprobs.tolist()):
                if not row.done:
                    row.token_ids.append(token)
                    row.logprobs.append(logprob)
                    row.done = token in self.stop_ids or len(row.token_ids) >= row.budget
                alive.append(not row.done)
                feed.append(self.pad_id if row.done else token)
                feed_pos.append(row.prompt_tokens + len(row.token_ids) - 1)
            if not any(alive):
                break
            key_valid = torch.cat([key_valid, torch.tensor(alive, device=self.device)[:, None]], dim=1)
            inputs = (torch.tensor(feed, device=self.device)[:, None],
                      torch.tensor(feed_pos, device=self.device)[:, None])
            mask = additive_mask(key_valid, 1, self.model.dtype)
            with phase("decode"):
                if recording():
                    live = [(position, 1) for position, keep in zip(feed_pos, alive) if keep]
                    add_work(self.shape.forward(live, len(live)), self.shape.forward_bytes(live, len(live)))
                logits = self._forward(*inputs, mask, cache)
        final = cache.layers()
        for index, row in enumerate(rows):
            row.session.cache = compact_cache(final, index, key_valid)

    def _finish_row(self, row: _Row) -> Generation:
        session = row.session
        session.input_ids.extend(row.token_ids)
        session.loss_mask.extend([1] * len(row.token_ids))
        session.logprobs.extend(row.logprobs)
        session.turns += 1
        stopped = bool(row.token_ids) and row.token_ids[-1] in self.stop_ids
        visible = row.token_ids[:-1] if stopped else row.token_ids
        text = self.tokenizer.decode(visible, skip_special_tokens=False)
        content, calls, error = parse_tool_calls(drop_reasoning(text))
        generation = Generation(
            text=text, content=content, tool_calls=calls, finish_reason="stop" if stopped else "length",
            prompt_tokens=row.prompt_tokens, completion_tokens=len(row.token_ids),
            token_ids=list(row.token_ids), logprobs=list(row.logprobs), parse_error=error,
        )
        session.history.append(generation)
        if session.cached != len(session.input_ids) - 1:
            raise RuntimeError(f"session {row.request.session_id}: cache/stream misalignment")
        return generation


def _distinct_prefills(rows: Sequence[_Row], suffixes: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """The rows whose prefill runs, and for every row the position among them of the one it copies.

    Fresh sessions (no cache) with the same prompt — the siblings of a GRPO group — have the same keys, values
    and last logits: one of them is prefilled and the others copy it. Every row keeps its own generator, so
    their replies still differ. The prefill keeps the batch's padded layout and slices, so each computed row
    goes through the same arithmetic as in the full batch.
    """
    distinct: list[int] = []
    copies: list[int] = []
    first: dict[tuple[int, ...], int] = {}
    for index, (row, suffix) in enumerate(zip(rows, suffixes)):
        key = tuple(suffix) if row.session.cache is None else None
        if key is not None and key in first:
            copies.append(first[key])
            continue
        if key is not None:
            first[key] = len(distinct)
        copies.append(len(distinct))
        distinct.append(index)
    return distinct, copies


def _token_id(tokenizer: PreTrainedTokenizerBase, token: str) -> int:
    token_id = tokenizer.convert_tokens_to_ids(token)
    if token_id is None or token_id == tokenizer.unk_token_id:
        raise ValueError(f"tokenizer has no {token!r} token; HFPolicy needs a ChatML tokenizer")
    return int(token_id)

