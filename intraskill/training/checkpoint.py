"""Atomic training checkpoints: model, optimizer, RNG state and step counter in one directory.

A checkpoint directory holds ``model/`` (``save_pretrained`` weights and tokenizer, loadable as a
policy checkpoint), ``optimizer.pt``, ``rng.pt`` (torch CPU/CUDA RNG states: uint8 tensors) and ``state.json``
(``step``, the per-step trainer metrics and the SHA-256 of every other file). With LoRA, ``model/`` holds merged weights and
``adapter.pt`` the adapter state the trainer resumes from. It is written to a temporary sibling
and swapped in by renames, so a kill leaves either the previous or the new checkpoint, never a
mix: :func:`recover_checkpoint` completes or undoes an interrupted swap. :func:`verify_checkpoint` refuses a
checkpoint whose ``state.json`` is missing or whose files differ from their recorded checksums
(:class:`CheckpointError`, naming the file). The ``.pt`` files are read by :func:`load_tensors`
(``weights_only=True``: tensors, numbers, strings and containers only), so an edited file cannot run code.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from intraskill.hashing import sha256_file
from intraskill.layout import CheckpointDir
from intraskill.record import Record
from intraskill.training.grpo import StepMetrics

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from intraskill.training.grpo import GRPOTrainer

CHECKPOINT_SCHEMA = "intraskill-train-checkpoint-v2"


class CheckpointState(Record):
    """``state.json``: the trained step, the trainer's metrics of every step so far (by step number) and the
    SHA-256 of every other file of the checkpoint."""

    schema_version: Literal[CHECKPOINT_SCHEMA] = CHECKPOINT_SCHEMA
    step: int
    history: dict[str, StepMetrics]
    files: dict[str, str]


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be trusted: its state is missing or unreadable, or a file's checksum differs."""


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
        if CheckpointDir(path).state.is_file():
            shutil.rmtree(old)
        else:
            if path.exists():
                shutil.rmtree(path)
            old.rename(path)
    return path if CheckpointDir(path).state.is_file() else None


def save_checkpoint(
    path: str | Path,
    trainer: GRPOTrainer,
    tokenizer: PreTrainedTokenizerBase,
    step: int,
    history: Mapping[str, StepMetrics],
) -> Path:
    """Write the trainer's model, optimizer and RNG state plus ``step`` atomically to ``path``.

    ``history`` (the trainer's metrics of every step so far) is stored in ``state.json`` (:class:`CheckpointState`).
    """
    # deferred: torch is heavy to import
    import torch

    path = Path(path)
    recover_checkpoint(path)
    tmp, old = path.with_name(path.name + ".tmp"), path.with_name(path.name + ".old")
    tmp.mkdir(parents=True)
    written = CheckpointDir(tmp)
    model = trainer.model
    if trainer.grpo.lora is not None:
        # deferred: peft is heavy to import
        from peft import get_peft_model_state_dict

        torch.save(get_peft_model_state_dict(model), written.adapter)
        model = copy.deepcopy(model).merge_and_unload()
    model.save_pretrained(str(written.model.root))
    tokenizer.save_pretrained(str(written.model.root))
    torch.save(trainer.optimizer.state_dict(), written.optimizer)
    rng = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    torch.save(rng, written.rng)
    files = {p.relative_to(tmp).as_posix(): sha256_file(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
    state = CheckpointState(step=step, history=dict(history), files=files)
    with open(written.state, "w", encoding="utf-8") as handle:
        json.dump(state.to_dict(), handle, indent=1)
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


def read_checkpoint_state(path: str | Path) -> CheckpointState:
    """``state.json`` of a checkpoint; :class:`CheckpointError` naming it when it is missing, unreadable, of
    another schema or not a :class:`CheckpointState` (naming the field)."""
    file = CheckpointDir(path).state
    try:
        state = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{file} is missing: the checkpoint cannot be resumed") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{file}: truncated or corrupt ({error})") from None
    if not isinstance(state, dict) or state.get("schema_version") != CHECKPOINT_SCHEMA:
        found = state.get("schema_version") if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(f"{file}: schema_version must be {CHECKPOINT_SCHEMA!r}, got {found!r}")
    try:
        return CheckpointState.from_dict(state, str(file))
    except ValueError as error:
        raise CheckpointError(str(error)) from None


def verify_checkpoint(path: str | Path) -> CheckpointState:
    """``state.json`` of a checkpoint whose files all match their recorded SHA-256.

    Raises :class:`CheckpointError` naming the missing ``state.json``, a missing file or the first file whose
    checksum differs.
    """
    path = Path(path)
    state = read_checkpoint_state(path)
    for name, digest in state.files.items():
        file = path / name
        if not file.is_file():
            raise CheckpointError(f"{file} is missing (listed in {CheckpointDir(path).state})")
        if sha256_file(file) != digest:
            raise CheckpointError(f"{file} differs from the checksum recorded in {CheckpointDir(path).state}")
    return state


def load_tensors(path: Path, device: Any) -> Any:
    """A ``torch.save`` file read with ``weights_only=True``: tensors, numbers, strings and containers only, so a
    crafted file cannot run code; :class:`CheckpointError` naming the file otherwise."""
    # deferred: torch is heavy to import
    import torch

    try:
        return torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError:
        raise CheckpointError(f"{path}: holds objects other than tensors, numbers and containers; "
                              "refused (loading it could run code)") from None
    except (RuntimeError, EOFError, OSError) as error:
        raise CheckpointError(f"{path}: truncated or corrupt ({' '.join(str(error).split())[:200]})") from None


def load_checkpoint(path: str | Path, trainer: GRPOTrainer, state: CheckpointState | None = None) -> CheckpointState:
    """Restore weights, optimizer and RNG state into ``trainer`` (in place); returns ``state.json``.

    ``state`` is what :func:`verify_checkpoint` returned for ``path`` (default: verify it now).
    """
    # deferred: torch is heavy to import
    import torch

    # deferred: transformers is heavy to import
    from transformers import AutoModelForCausalLM

    path = Path(path)
    saved_files = CheckpointDir(path)
    state = state if state is not None else verify_checkpoint(path)
    if trainer.grpo.lora is not None:
        # deferred: peft is heavy to import
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(trainer.model, load_tensors(saved_files.adapter, trainer.device))
    else:
        saved = AutoModelForCausalLM.from_pretrained(str(saved_files.model.root))
        target = trainer.model
        saved_state = saved.state_dict()
        missing = set(target.state_dict()) - set(saved_state)
        if missing:
            raise ValueError(f"checkpoint {path}: weights lack {sorted(missing)[:5]} (a different model shape?)")
        with torch.no_grad():
            for name, tensor in target.state_dict().items():
                tensor.copy_(saved_state[name].to(tensor.dtype))
    trainer.optimizer.load_state_dict(load_tensors(saved_files.optimizer, trainer.device))
    rng = load_tensors(saved_files.rng, "cpu")
    torch.set_rng_state(rng["cpu"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    return state
