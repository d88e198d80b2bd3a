"""Atomic training checkpoints: model, optimizer, RNG state and step counter in one directory.

A checkpoint directory holds ``model/`` (``save_pretrained`` weights and tokenizer, loadable as a
policy checkpoint), ``optimizer.pt``, ``rng.pt`` (torch CPU/CUDA RNG states) and ``state.json``
(``step`` and the per-step trainer metrics). With LoRA, ``model/`` holds merged weights and
``adapter.pt`` the adapter state the trainer resumes from. It is written to a temporary sibling
and swapped in by renames, so a kill leaves either the previous or the new checkpoint, never a
mix: :func:`recover_checkpoint` completes or undoes an interrupted swap.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from intraskill.training.grpo import GRPOTrainer

CHECKPOINT_SCHEMA = "intraskill-train-checkpoint-v1"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def recover_checkpoint(path: str | Path) -> Path | None:
    """Finish or undo an interrupted swap at ``path``; returns the valid checkpoint or ``None``.

    ``<path>.tmp`` (a partial write) is removed; ``<path>.old`` becomes ``path`` again when the swap
    stopped between its two renames, and is removed otherwise.
    """
    path = Path(path)
    tmp, old = path.with_name(path.name + ".tmp"), path.with_name(path.name + ".old")
    if tmp.exists():
        shutil.rmtree(tmp)
    if old.exists():
        if (path / "state.json").is_file():
            shutil.rmtree(old)
        else:
            if path.exists():
                shutil.rmtree(path)
            old.rename(path)
    return path if (path / "state.json").is_file() else None


def save_checkpoint(
    path: str | Path,
    trainer: GRPOTrainer,
    tokenizer: PreTrainedTokenizerBase,
    step: int,
    history: Mapping[str, Any],
) -> Path:
    """Write the trainer's model, optimizer and RNG state plus ``step`` atomically to ``path``.

    ``history`` is stored in ``state.json`` (e.g. the train metrics of every step so far).
    """
    # deferred: torch is heavy to import
    import torch

    path = Path(path)
    recover_checkpoint(path)
    tmp, old = path.with_name(path.name + ".tmp"), path.with_name(path.name + ".old")
    tmp.mkdir(parents=True)
    model = trainer.model
    if trainer.config.lora is not None:
        # deferred: peft is heavy to import
        from peft import get_peft_model_state_dict

        torch.save(get_peft_model_state_dict(model), tmp / "adapter.pt")
        model = copy.deepcopy(model).merge_and_unload()
    model.save_pretrained(str(tmp / "model"))
    tokenizer.save_pretrained(str(tmp / "model"))
    torch.save(trainer.optimizer.state_dict(), tmp / "optimizer.pt")
    rng = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    torch.save(rng, tmp / "rng.pt")
    state = {"schema_version": CHECKPOINT_SCHEMA, "step": step, "history": dict(history)}
    with open(tmp / "state.json", "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    _fsync_dir(tmp)
    if path.exists():
        path.rename(old)
    tmp.rename(path)
    _fsync_dir(path.parent)
    if old.exists():
        shutil.rmtree(old)
    return path


def read_checkpoint_state(path: str | Path) -> dict[str, Any]:
    """``state.json`` of a checkpoint (``step``, ``history``)."""
    state = json.loads((Path(path) / "state.json").read_text(encoding="utf-8"))
    if state.get("schema_version") != CHECKPOINT_SCHEMA:
        raise ValueError(f"{path}/state.json: schema_version must be {CHECKPOINT_SCHEMA!r}")
    return state


def load_checkpoint(path: str | Path, trainer: GRPOTrainer) -> dict[str, Any]:
    """Restore weights, optimizer and RNG state into ``trainer`` (in place); returns ``state.json``."""
    # deferred: torch is heavy to import
    import torch

    # deferred: transformers is heavy to import
    from transformers import AutoModelForCausalLM

    path = Path(path)
    state = read_checkpoint_state(path)
    if trainer.config.lora is not None:
        # deferred: peft is heavy to import
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(trainer.model, torch.load(path / "adapter.pt", map_location=trainer.device))
    else:
        saved = AutoModelForCausalLM.from_pretrained(str(path / "model"))
        target = trainer.model
        saved_state = saved.state_dict()
        missing = set(target.state_dict()) - set(saved_state)
        if missing:
            raise ValueError(f"checkpoint {path}: weights lack {sorted(missing)[:5]} (a different model shape?)")
        with torch.no_grad():
            for name, tensor in target.state_dict().items():
                tensor.copy_(saved_state[name].to(tensor.dtype))
    trainer.optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location=trainer.device))
    rng = torch.load(path / "rng.pt", weights_only=False)
    torch.set_rng_state(rng["cpu"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    return state
