"""Every ``.pt`` file the project reads back is loaded tensors-only: a crafted pickle is refused, its code never runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from intraskill.hashing import sha256_file
from intraskill.organism.cloning import BCExample, behaviour_clone
from intraskill.params import GRPOParams
from intraskill.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from intraskill.training.grpo import GRPOTrainer


class Payload:
    """Unpickling this object would create the directory ``marker`` (stands for arbitrary code)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return os.mkdir, (str(self.marker),)


def tiny_model() -> Qwen3ForCausalLM:
    config = Qwen3Config(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1, intermediate_size=32, head_dim=8)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return Qwen3ForCausalLM(config)


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"<unk>": 0}, unk_token="<unk>")),
                                   unk_token="<unk>", pad_token="<unk>")


def _forge(path: Path, content: object, checkpoint: Path | None = None) -> None:
    """Replace ``path`` with a crafted ``torch.save`` file; with ``checkpoint``, recompute its recorded SHA-256 as
    whoever edits the file would."""
    torch.save(content, path)
    if checkpoint is not None:
        state_file = checkpoint / "state.json"
        state = json.loads(state_file.read_text(encoding="utf-8"))
        state["files"][path.relative_to(checkpoint).as_posix()] = sha256_file(path)
        state_file.write_text(json.dumps(state), encoding="utf-8")


@pytest.mark.parametrize("name", ["rng.pt", "optimizer.pt"])
def test_a_crafted_checkpoint_file_is_refused_without_running_its_code(tmp_path: Path, name: str) -> None:
    trainer = GRPOTrainer(tiny_model(), GRPOParams(lr=1e-3))
    checkpoint = save_checkpoint(tmp_path / "checkpoint", trainer, tiny_tokenizer(), 1, {})
    expected = torch.get_rng_state()
    torch.manual_seed(99)
    load_checkpoint(checkpoint, trainer)  # an intact checkpoint loads tensors-only, RNG state included
    assert torch.equal(torch.get_rng_state(), expected)
    marker = tmp_path / "code-ran"
    _forge(checkpoint / name, {"cpu": Payload(marker)}, checkpoint)
    with pytest.raises(CheckpointError, match=f"{checkpoint / name}: holds objects other than tensors"):
        load_checkpoint(checkpoint, trainer)
    assert not marker.exists()


def test_a_truncated_checkpoint_file_is_one_error_naming_it(tmp_path: Path) -> None:
    trainer = GRPOTrainer(tiny_model(), GRPOParams(lr=1e-3))
    checkpoint = save_checkpoint(tmp_path / "checkpoint", trainer, tiny_tokenizer(), 1, {})
    rng = checkpoint / "rng.pt"
    rng.write_bytes(rng.read_bytes()[:40])
    with pytest.raises(CheckpointError, match=f"{rng}: truncated or corrupt"):
        load_checkpoint(checkpoint, trainer, state={"files": {}})


def test_a_crafted_behaviour_cloning_state_is_refused_without_running_its_code(tmp_path: Path) -> None:
    marker, state = tmp_path / "code-ran", tmp_path / "bc_state.pt"
    _forge(state, {"key": "plan", "rng": Payload(marker)})
    examples = [BCExample([1, 2, 3, 4, 5], [0, 0, 1, 1, 1]), BCExample([6, 7, 8, 9], [0, 1, 1, 1])]
    with pytest.raises(CheckpointError, match=f"{state}: holds objects other than tensors"):
        behaviour_clone(tiny_model(), examples, steps=2, lr=1e-3, warmup_steps=1, lr_min_ratio=0.1,
                        weight_decay=0.0, grad_clip=1.0, batch_tokens=64, pad_id=0, seed=1, state_path=state,
                        state_key="plan", progress=False)
    assert not marker.exists()
