"""Useful FLOPs of a decoder-only transformer's forward: the arithmetic the model needs, pads excluded.

A multiply-add counts 2 FLOPs. Per real token: the layers' projections (q, k, v, o and the gated MLP's
three matrices); per (query, visible key) pair: the scores and the weighted sum (``4 · heads · head_dim``
per layer); per kept logit row: the LM head. Norms, rotary embeddings, softmax and activations are
left out (a few percent at these shapes). A backward pass costs twice its forward.
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

    @classmethod
    def of(cls, config: Any) -> TransformerShape:
        """From a transformers config (Qwen/Llama style attribute names)."""
        heads = int(config.num_attention_heads)
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return cls(int(config.num_hidden_layers), int(config.hidden_size), heads,
                   int(getattr(config, "num_key_value_heads", None) or heads), int(head_dim),
                   int(config.intermediate_size), int(config.vocab_size))

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

    def forward(self, spans: Iterable[tuple[int, int]], logit_rows: int) -> int:
        """FLOPs of a causal forward of ``(cached, new)`` token spans (each new token sees the cache and the new
        tokens up to itself) keeping ``logit_rows`` rows of logits."""
        tokens = pairs = 0
        for cached, new in spans:
            tokens += new
            pairs += new * cached + new * (new + 1) // 2
        return tokens * self.token_flops + pairs * self.pair_flops + logit_rows * self.logit_flops
