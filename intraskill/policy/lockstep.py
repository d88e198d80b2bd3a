"""Tensor helpers of the lockstep decoder: padded KV caches, explicit masks, seeded sampling.

Layout of one batched turn (row ``i`` = one session; ``C_i`` cached tokens, ``S_i`` new tokens)::

    keys:    [pad .. pad | cache_i (C_i) ][pad .. pad | suffix_i (S_i) ][decoded tokens ...]
             <---------- C_max ---------><----------- S_max ---------->

Pads sit between real keys, so the model gets an explicit additive 4-D mask ``(B, 1, Q, K)`` and
explicit ``position_ids`` (each token's index in its own session's stream). Every query may always
attend to its own key, so no row of the mask is empty (no NaN from pad queries). A turn prefilled in
groups (:func:`prefill_groups`) has this layout per group; the decode then runs on one slab of every
row's real keys, left-padded to the longest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from intraskill.policy.flops import TransformerShape

LayerKV = tuple["torch.Tensor", "torch.Tensor"]


class SlabCache:
    """A batch KV cache written in place into preallocated, chunk-grown buffers.

    Duck-types the ``update``/``get_seq_length`` surface transformers' attention layers call, so a
    decode step writes one column instead of re-concatenating the whole cache (as ``DynamicCache``
    does), which dominates the cost of a large-batch step on CPU. Built from per-session compact
    caches (``None`` or per layer ``(keys, values)`` of shape ``(H_kv, C_i, D)``), left-padded to
    ``C_max``; buffers are allocated lazily at each layer's first ``update``.
    """

    def __init__(self, caches: Sequence[list[LayerKV] | None], grow: int = 256) -> None:
        self.sessions = list(caches)
        self.lengths = [0 if cache is None else cache[0][0].shape[1] for cache in caches]
        self.prefix = max(self.lengths, default=0)
        self.grow = grow
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.filled: list[int] = []

    def prefix_valid(self, device: torch.device | str) -> torch.Tensor:
        """``(B, C_max)`` bool: which left-padded prefix positions hold a session's cached key."""
        # deferred: torch is heavy to import
        import torch

        positions = torch.arange(self.prefix, device=device)
        starts = torch.tensor([self.prefix - n for n in self.lengths], device=device)
        return positions[None, :] >= starts[:, None]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.filled[layer_idx] if layer_idx < len(self.filled) else self.prefix

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        """Append ``(B, H_kv, Q, D)`` states to layer ``layer_idx``; return all keys and values so far."""
        if layer_idx == len(self.keys):
            self._allocate(key_states, value_states, key_states.shape[2])
        start = self.filled[layer_idx]
        end = start + key_states.shape[2]
        if end > self.keys[layer_idx].shape[2]:
            self.keys[layer_idx] = _grown(self.keys[layer_idx], start, end + self.grow)
            self.values[layer_idx] = _grown(self.values[layer_idx], start, end + self.grow)
        self.keys[layer_idx][:, :, start:end] = key_states
        self.values[layer_idx][:, :, start:end] = value_states
        self.filled[layer_idx] = end
        return self.keys[layer_idx][:, :, :end], self.values[layer_idx][:, :, :end]

    def gather(self) -> None:
        """Allocate every layer now from the sessions' caches (each session holds one), so :meth:`layers` holds them
        even if no forward follows."""
        for layer in range(len(self.keys), len(self.sessions[0])):
            keys, values = self.sessions[0][layer]
            self._allocate(keys[None], values[None], 0)

    def _allocate(self, key_states: torch.Tensor, value_states: torch.Tensor, query: int) -> None:
        """Layer ``len(self.keys)``'s buffers, shaped like ``(·, H_kv, ·, D)`` states, with room for ``query`` new
        positions and :attr:`grow` more; the sessions' caches copied in."""
        layer = len(self.keys)
        batch, heads = len(self.sessions), key_states.shape[1]
        capacity = self.prefix + query + self.grow
        keys = key_states.new_zeros(batch, heads, capacity, key_states.shape[-1])
        values = value_states.new_zeros(batch, heads, capacity, value_states.shape[-1])
        for row, cache in enumerate(self.sessions):
            if cache is not None and self.lengths[row]:
                keys[row, :, self.prefix - self.lengths[row] : self.prefix] = cache[layer][0]
                values[row, :, self.prefix - self.lengths[row] : self.prefix] = cache[layer][1]
                cache[layer] = None  # copied: let the session's compact tensors go
        self.keys.append(keys)
        self.values.append(values)
        self.filled.append(self.prefix)

    def expand(self, index: torch.Tensor) -> None:
        """Rebuild the batch from rows ``index`` (a row may repeat: sessions that share a prefilled prompt)."""
        self.keys = [keys.index_select(0, index) for keys in self.keys]
        self.values = [values.index_select(0, index) for values in self.values]
        self.sessions = [self.sessions[i] for i in index.tolist()]
        self.lengths = [self.lengths[i] for i in index.tolist()]

    def layers(self) -> list[LayerKV]:
        """Per layer ``(keys, values)`` of shape ``(B, H_kv, K, D)`` (filled part only)."""
        return [(k[:, :, :n], v[:, :, :n]) for k, v, n in zip(self.keys, self.values, self.filled)]


def _grown(buffer: torch.Tensor, filled: int, capacity: int) -> torch.Tensor:
    larger = buffer.new_zeros(*buffer.shape[:2], capacity, buffer.shape[-1])
    larger[:, :, :filled] = buffer[:, :, :filled]
    return larger


GQA_SDPA = "sdpa_gqa"
"""The attention implementation :func:`use_gqa_sdpa` registers with transformers."""


def gqa_sdpa_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Scaled dot-product attention over grouped KV heads in place (``enable_gqa``), with any mask.

    transformers' ``sdpa`` passes ``enable_gqa`` only without a mask and otherwise copies every key
    and value head ``H / H_kv`` times; the lockstep decoder always passes a mask, and on the CPU the
    copy of the whole cache costs more than the grouped kernel saves it.
    """
    # deferred: torch is heavy to import
    import torch

    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling,
        is_causal=bool(causal and attention_mask is None and query.shape[2] > 1), enable_gqa=True,
    )
    return out.transpose(1, 2).contiguous(), None


def use_gqa_sdpa(model: torch.nn.Module) -> bool:
    """Switch ``model`` from ``sdpa`` to :func:`gqa_sdpa_attention` (same masks); whether it did."""
    # deferred: transformers is heavy to import
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    config = model.config
    if config._attn_implementation != "sdpa" or config.num_key_value_heads == config.num_attention_heads:
        return False
    AttentionInterface.register(GQA_SDPA, gqa_sdpa_attention)
    AttentionMaskInterface.register(GQA_SDPA, sdpa_mask)
    model.set_attn_implementation(GQA_SDPA)
    return True


def left_pad(rows: Sequence[Sequence[int]], pad: int) -> tuple[list[list[int]], list[list[bool]]]:
    """Left-pad integer rows to a common length; returns ``(padded, is_real)``."""
    width = max(len(row) for row in rows)
    padded = [[pad] * (width - len(row)) + list(row) for row in rows]
    real = [[False] * (width - len(row)) + [True] * len(row) for row in rows]
    return padded, real


PREFILL_FORWARD_TOKENS = 64
"""A prefill forward's fixed cost (transformers' per-layer modules, kernel calls) in tokens' projection FLOPs: on the
organism ~2 ms, what 64 tokens' arithmetic takes (:func:`prefill_groups`)."""


def prefill_groups(spans: Sequence[tuple[int, int]], shape: TransformerShape, chunk_tokens: int) -> list[list[int]]:
    """Rows of a turn (``(cached, new)`` token spans) split into groups, each prefilled in its own left-padded slab,
    so that a row is padded only to its group's longest: the partition of the rows sorted by new tokens with the
    least padded prefill FLOPs (a group computes ``rows × longest new`` tokens over its longest cache, in
    ``chunk_tokens``-column slices) plus :data:`PREFILL_FORWARD_TOKENS` per forward. Shortest group first, each in row order."""
    # deferred: numpy is heavy to import
    import numpy as np

    order = sorted(range(len(spans)), key=lambda i: (spans[i][1], spans[i][0]))
    cached = np.array([spans[i][0] for i in order], dtype=np.float64)
    new = np.array([spans[i][1] for i in order], dtype=np.float64)
    first, last = np.indices((len(order), len(order)))  # a group of the sorted rows first..last
    rows = np.maximum(last - first + 1, 1)
    widest = np.maximum.accumulate(np.where(last >= first, cached[None, :], 0.0), axis=1)
    slices = np.ceil(new[None, :] / np.maximum(1, chunk_tokens // rows))
    cost = (rows * new * (shape.token_flops + shape.pair_flops * (widest + (new + 1) / 2))
            + slices * PREFILL_FORWARD_TOKENS * shape.token_flops)
    best = np.zeros(len(order) + 1)
    cut = [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):
        total = best[:end] + cost[:end, end - 1]
        cut[end] = int(np.argmin(total))
        best[end] = total[cut[end]]
    groups, end = [], len(order)
    while end:
        groups.append(sorted(order[cut[end] : end]))
        end = cut[end]
    return groups[::-1]


def additive_mask(key_valid: torch.Tensor, query_count: int, dtype: torch.dtype) -> torch.Tensor:
    """The ``(B, 1, Q, K)`` additive mask for the last ``Q`` keys as queries.

    Query ``q`` (key index ``K - Q + q``) sees valid keys at or before itself, and always itself.
    """
    # deferred: torch is heavy to import
    import torch

    batch, total = key_valid.shape
    key_index = torch.arange(total, device=key_valid.device)
    query_index = key_index[total - query_count :]
    allowed = (key_index[None, :] <= query_index[:, None])[None] & key_valid[:, None, :]
    allowed |= (key_index[None, :] == query_index[:, None])[None]
    mask = torch.zeros(batch, 1, query_count, total, dtype=dtype, device=key_valid.device)
    return mask.masked_fill_(~allowed[:, None], torch.finfo(dtype).min)


def sample_tokens(
    logits: torch.Tensor,
    temperatures: Sequence[float],
    top_ps: Sequence[float],
    generators: Sequence[torch.Generator],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row; returns ``(token_ids (B,), logprobs (B,))``.

    The log-prob is ``log_softmax(logits / T)`` at the drawn token (``T = 1`` for greedy rows,
    ``temperature == 0``, which take the argmax). It is the log-prob of the distribution the token
    was drawn from when ``top_p == 1``; a trainer recomputing it must use the same temperature.
    Sampling rows draw by Gumbel-max with uniforms from their own generator, so a row's draws do
    not depend on which other rows share the batch. ``top_p < 1`` keeps the smallest set of
    tokens whose probability reaches ``top_p`` (nucleus), then draws within it.
    """
    # deferred: torch is heavy to import
    import torch

    logits = logits.float()
    temps = torch.tensor([t if t > 0 else 1.0 for t in temperatures], device=logits.device)
    logp = torch.log_softmax(logits / temps[:, None], dim=-1)
    chosen = logp.argmax(dim=-1)
    for row, (temperature, top_p) in enumerate(zip(temperatures, top_ps)):
        if temperature <= 0:
            continue
        scores = logp[row]
        if top_p < 1.0:
            scores = _nucleus(scores, top_p)
        uniform = torch.rand(scores.shape, generator=generators[row], device=logits.device)
        gumbel = -torch.log(-torch.log(uniform.clamp_(min=1e-20)))
        chosen[row] = torch.argmax(scores + gumbel)
    return chosen, logp.gather(-1, chosen[:, None]).squeeze(-1)


def _nucleus(logp: torch.Tensor, top_p: float) -> torch.Tensor:
    # deferred: torch is heavy to import
    import torch

    sorted_logp, order = torch.sort(logp, descending=True)
    cumulative = sorted_logp.exp().cumsum(-1)
    drop_sorted = cumulative - sorted_logp.exp() >= top_p
    drop = torch.zeros_like(drop_sorted).scatter_(-1, order, drop_sorted)
    return logp.masked_fill(drop, float("-inf"))


def compact_cache(layers: Sequence[LayerKV], row: int, key_valid: torch.Tensor) -> list[LayerKV]:
    """One session's cache with pad and dead positions dropped: per layer ``(H_kv, n, D)``."""
    keep = key_valid[row].nonzero().squeeze(-1)
    return [(keys[row].index_select(1, keep), values[row].index_select(1, keep)) for keys, values in layers]
