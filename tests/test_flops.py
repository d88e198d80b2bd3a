"""The FLOP and byte model against a real Qwen3 decoder: its parameters, its KV cache and torch's FLOP counter (eager
attention, whose score and weighted-sum matmuls the counter sees)."""

from __future__ import annotations

import pytest

from intraskill.policy.flops import TransformerShape

torch = pytest.importorskip("torch")
flop_counter = pytest.importorskip("torch.utils.flop_counter")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def model() -> transformers.Qwen3ForCausalLM:
    config = transformers.Qwen3Config(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=16, intermediate_size=48,
                                      tie_word_embeddings=True, attn_implementation="eager")
    torch.manual_seed(0)
    return transformers.Qwen3ForCausalLM(config).eval()


def test_weight_bytes_are_the_projections_and_the_lm_head(model: transformers.Qwen3ForCausalLM) -> None:
    shape = TransformerShape.of(model.config, model.dtype.itemsize)
    linear = sum(m.weight.nbytes for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert shape.weight_bytes == linear


def test_key_bytes_are_what_the_cache_holds_per_position(model: transformers.Qwen3ForCausalLM) -> None:
    shape = TransformerShape.of(model.config, model.dtype.itemsize)
    with torch.inference_mode():
        cache = model(torch.arange(7)[None], use_cache=True).past_key_values
    held = sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)
    assert held == 7 * shape.key_bytes


def test_a_decode_step_counts_the_flops_torch_counts_and_reads_its_cache(model: transformers.Qwen3ForCausalLM) -> None:
    shape = TransformerShape.of(model.config, model.dtype.itemsize)
    with torch.inference_mode():
        cache = model(torch.arange(9)[None], use_cache=True).past_key_values
        with flop_counter.FlopCounterMode(display=False) as counter:
            model(torch.tensor([[3]]), cache=cache, use_cache=True, logits_to_keep=1)
    assert shape.forward([(9, 1)], 1) == counter.get_total_flops()
    moved = shape.forward_bytes([(9, 1)], 1)
    assert moved - shape.forward_bytes([(8, 1)], 1) == shape.key_bytes  # one more cached position, read once
    assert moved > shape.weight_bytes + 10 * shape.key_bytes  # weights, 9 cached + 1 new read, 1 written
