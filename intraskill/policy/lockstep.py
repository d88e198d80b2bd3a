"""Tensor helpers of the lockstep decoder: padded KV caches, explicit masks, seeded sampling.

Layout of one batched turn (row ``i`` = one session; ``C_i`` cached tokens, ``S_i`` new tokens)::

    keys:    [pad .. pad | cache_i (C_i) ][pad .. pad | suffix_i (S_i) ][decoded tokens ...]
             <---------- C_max ---------><----------- S_max ---------->

Pads sit between real keys, so the model gets an explicit additive 4-D mask ``(B, 1, Q, K)`` and
explicit ``position_ids`` (each token's index in its own session's stream). Every query may always
attend to its own key, so no row of the mask is empty (no NaN from pad queries).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

LayerKV = tuple["torch.Tensor", "torch.Tensor"]


def pad_caches(
    caches: Sequence[list[LayerKV] | None], num_layers: int, device: torch.device | str
) -> tuple[list[LayerKV], torch.Tensor]:
    """Left-pad per-session compact caches into one batch.

    Parameters
    ----------
    caches
        Per session, ``None`` (nothing cached) or per layer ``(keys, values)`` of shape ``(H_kv, C_i, D)``.
    num_layers
        Number of decoder layers.
    device
        Device of the returned validity mask.

    Returns
    -------
    (list of (keys, values) of shape (B, H_kv, C_max, D), key-validity mask (B, C_max) bool)
    """
    import torch

    present = [cache for cache in caches if cache is not None]
    lengths = [0 if cache is None else cache[0][0].shape[1] for cache in caches]
    c_max = max(lengths)
    if not present or c_max == 0:
        return [], torch.zeros(len(caches), 0, dtype=torch.bool, device=device)
    ref_k, ref_v = present[0][0]
    heads, _, k_dim = ref_k.shape
    v_dim = ref_v.shape[-1]
    valid = torch.zeros(len(caches), c_max, dtype=torch.bool, device=device)
    layers = []
    for layer in range(num_layers):
        keys = ref_k.new_zeros(len(caches), heads, c_max, k_dim)
        values = ref_v.new_zeros(len(caches), heads, c_max, v_dim)
        for row, cache in enumerate(caches):
            if cache is not None and lengths[row]:
                keys[row, :, c_max - lengths[row] :] = cache[layer][0]
                values[row, :, c_max - lengths[row] :] = cache[layer][1]
        layers.append((keys, values))
    for row, length in enumerate(lengths):
        valid[row, c_max - length :] = length > 0
    return layers, valid


def left_pad(rows: Sequence[Sequence[int]], pad: int) -> tuple[list[list[int]], list[list[bool]]]:
    """Left-pad integer rows to a common length; returns ``(padded, is_real)``."""
    width = max(len(row) for row in rows)
    padded = [[pad] * (width - len(row)) + list(row) for row in rows]
    real = [[False] * (width - len(row)) + [True] * len(row) for row in rows]
    return padded, real


def additive_mask(key_valid: torch.Tensor, query_count: int, dtype: torch.dtype) -> torch.Tensor:
    """The ``(B, 1, Q, K)`` additive mask for the last ``Q`` keys as queries.

    Query ``q`` (key index ``K - Q + q``) sees valid keys at or before itself, and always itself.
    """
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
