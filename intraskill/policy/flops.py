"""Useful FLOPs and bytes of a decoder-only transformer's forward: the arithmetic and memory traffic the model needs,
pads excluded.

A multiply-add counts 2 FLOPs. Per real token: the layers' projections (q, k, v, o and the gated MLP's
three matrices); per (query, visible key) pair: the scores and the weighted sum (``4 · heads · head_dim``
per layer); per kept logit row: the LM head. Norms, rotary embeddings, softmax and activations are
left out (a few percent at these shapes). A backward pass costs twice its forward.

Bytes are the least a forward must move through memory: every projection and LM-head weight read once (embedding
rows and norms left out), every visible key and value of a row read once and each new token's written once, and
each layer's projection outputs written once and read once (:attr:`TransformerShape.activation_bytes`), plus the kept
logit rows. At decode (one new token a row) the cache read dominates: ``rows · layers · 2 · kv_heads · keys ·
head_dim · dtype bytes`` per step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TransformerShape:
    """The shapes that set a forward's arithmetic."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    dtype_bytes: int = 4
    """Bytes per element of weights, activations and the KV cache (float32: 4)."""

    @classmethod
    def of(cls, config: Any, dtype_bytes: int = 4) -> TransformerShape:
        """From a transformers config (Qwen/Llama style attribute names) and the model's element size."""
        heads = int(config.num_attention_heads)
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return cls(int(config.num_hidden_layers), int(config.hidden_size), heads,
                   int(getattr(config, "num_key_value_heads", None) or heads), int(head_dim),
                   int(config.intermediate_size), int(config.vocab_size), int(dtype_bytes))

    @property
    def token_flops(self) -> int:
        """Projection FLOPs of one token through every layer."""
        d, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        per_layer = d * q + 2 * d * kv + q * d + 3 * d * self.intermediate
        return 2 * per_layer * self.layers

    @property
    def pair_flops(self) -> int:
        """Attention FLOPs of one (query, visible key) pair through every layer."""
        return 4 * self.heads * self.head_dim * self.layers

    @property
    def logit_flops(self) -> int:
        return 2 * self.hidden * self.vocab

    @property
    def weight_bytes(self) -> int:
        """Bytes of the projection and LM-head weights a forward keeping logits reads (one multiply-add each per
        token: half the FLOPs of one token and one logit row)."""
        return (self.token_flops + self.logit_flops) // 2 * self.dtype_bytes

    @property
    def key_bytes(self) -> int:
        """Bytes of one position's keys and values through every layer (one row's cache grows this much a token)."""
        return self.layers * 2 * self.kv_heads * self.head_dim * self.dtype_bytes

    @property
    def activation_bytes(self) -> int:
        """Bytes one token's layer activations move: each projection's output (q, k, v, attention, o, gate, up,
        their product, down) written once and read once."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        per_layer = 2 * q + 2 * kv + 2 * self.hidden + 3 * self.intermediate
        return 2 * per_layer * self.layers * self.dtype_bytes

    def forward(self, spans: Iterable[tuple[int, int]], logit_rows: int) -> int:
        """FLOPs of a causal forward of ``(cached, new)`` token spans (each new token sees the cache and the new
        tokens up to itself) keeping ``logit_rows`` rows of logits."""
        tokens = pairs = 0
        for cached, new in spans:
            tokens += new
            pairs += new * cached + new * (new + 1) // 2
        return tokens * self.token_flops + pairs * self.pair_flops + logit_rows * self.logit_flops

    def forward_bytes(self, spans: Iterable[tuple[int, int]], logit_rows: int) -> int:
        """Bytes the same forward must move: the weights once, each row's ``cached + new`` keys and values read once
        and its ``new`` ones written once, the new tokens' activations, and the kept logit rows written and read."""
        tokens = keys = 0
        for cached, new in spans:
            tokens += new
            keys += cached + 2 * new
        return (self.weight_bytes + keys * self.key_bytes + tokens * self.activation_bytes
                + 2 * logit_rows * self.vocab * self.dtype_bytes)
