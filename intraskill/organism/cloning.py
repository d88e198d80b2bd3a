"""Behaviour cloning of the organism: examples, token-budget batches, the (soft) cross-entropy on
assistant tokens, the learning-rate schedule and the resumable training loop."""

from __future__ import annotations

import itertools
import math
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from intraskill.hashing import seed32
from intraskill.organism.plan_targets import SoftTarget
from intraskill.training.checkpoint import load_tensors
from intraskill.training.grpo import NonFiniteUpdateError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel


CHECKPOINT_DTYPE = "bfloat16"
LOSS_LOG_EVERY = 10

@dataclass(frozen=True)
class BCExample:
    """One tokenized demonstration: ``input_ids``, the assistant-token ``loss_mask`` and optional
    ``soft`` targets: ``(position, ((token id, probability), …))`` replaces the one-hot target of the
    token at ``position`` (a supervised one) with the teacher's distribution
    (:mod:`intraskill.organism.plan_targets`)."""

    input_ids: list[int]
    loss_mask: list[int]
    soft: tuple[SoftTarget, ...] = ()

    def __post_init__(self) -> None:
        if len(self.input_ids) != len(self.loss_mask):
            raise ValueError("BCExample: input_ids and loss_mask differ in length")
        if any(not 0 < position < len(self.loss_mask) or not self.loss_mask[position]
               for position, _ in self.soft):
            raise ValueError("BCExample: a soft target lies outside the supervised tokens")


def pack_batches(lengths: Sequence[int], batch_tokens: int, rng: random.Random) -> list[list[int]]:
    """Shuffle example indices, then group them so each batch's padded size ``len × max_len`` stays
    within ``batch_tokens`` (an example longer than the budget forms its own batch).

    Examples are sorted by length inside windows of 64 shuffled indices to reduce padding.
    """
    order = list(range(len(lengths)))
    rng.shuffle(order)
    windows = [sorted(order[i:i + 64], key=lambda k: lengths[k]) for i in range(0, len(order), 64)]
    batches: list[list[int]] = []
    current: list[int] = []
    for index in (k for window in windows for k in window):
        longest = max([lengths[index]] + [lengths[k] for k in current])
        if current and longest * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


def learning_rate(step: int, total: int, peak: float, warmup: int, min_ratio: float) -> float:
    """Linear warm-up to ``peak`` over ``warmup`` steps, then cosine decay to ``min_ratio·peak``.

    >>> [round(learning_rate(step, 100, 1.0, 10, 0.1), 6) for step in (0, 9, 99)]
    [0.1, 1.0, 0.1]
    """
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup - 1)
    return peak * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress))))


def collate(examples: Sequence[BCExample], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``(input_ids, labels)``; labels are ``-100`` where the loss mask is 0."""
    # deferred: torch is heavy to import
    import torch

    width = max(len(e.input_ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    for row, example in enumerate(examples):
        n = len(example.input_ids)
        ids[row, :n] = torch.tensor(example.input_ids)
        labels[row, :n] = torch.where(torch.tensor(example.loss_mask) == 1, ids[row, :n], -100)
    return ids, labels


@dataclass(frozen=True)
class SoftBatch:
    """A batch's soft targets: ``rows``/``positions`` of the predicted tokens (n), and per target the
    candidate ``tokens`` and their ``probabilities`` (n × k, padded with probability 0)."""

    rows: torch.Tensor
    positions: torch.Tensor
    tokens: torch.Tensor
    probabilities: torch.Tensor

    def to(self, device: Any) -> "SoftBatch":
        fields = (self.rows, self.positions, self.tokens, self.probabilities)
        return SoftBatch(*(t.to(device) for t in fields))


def collate_soft(examples: Sequence[BCExample]) -> SoftBatch | None:
    """The soft targets of a :func:`collate` batch (``None`` when no example has any)."""
    # deferred: torch is heavy to import
    import torch

    entries = [(row, position, target) for row, e in enumerate(examples) for position, target in e.soft]
    if not entries:
        return None
    width = max(len(target) for _, _, target in entries)
    tokens = torch.zeros((len(entries), width), dtype=torch.long)
    probabilities = torch.zeros((len(entries), width))
    for index, (_, _, target) in enumerate(entries):
        tokens[index, :len(target)] = torch.tensor([t for t, _ in target])
        probabilities[index, :len(target)] = torch.tensor([p for _, p in target])
    return SoftBatch(torch.tensor([r for r, _, _ in entries]), torch.tensor([p for _, p, _ in entries]),
                     tokens, probabilities)


def bc_loss(model: PreTrainedModel, ids: torch.Tensor, labels: torch.Tensor,
            soft: SoftBatch | None = None) -> torch.Tensor:
    """Mean next-token cross-entropy over the assistant tokens (labels ≠ −100) of the batch; at the
    ``soft`` positions the cross-entropy is taken against the teacher's distribution instead.

    Without soft targets only the positions that predict a supervised token are projected onto the vocabulary
    (``logits_to_keep``): the same loss, without the (positions × vocabulary) logits of prompts and pages.
    """
    # deferred: torch is heavy to import
    import torch

    targets = labels[:, 1:]
    if soft is None:
        kept = (targets != -100).any(dim=0).nonzero().flatten()
        logits = model(input_ids=ids, logits_to_keep=kept).logits.float()
        picked = targets[:, kept]
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), picked.reshape(-1),
                                                 ignore_index=-100)
    logits = model(input_ids=ids).logits[:, :-1].float()
    losses = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                               ignore_index=-100, reduction="none").view(targets.shape)
    columns = soft.positions - 1
    log_probs = torch.log_softmax(logits[soft.rows, columns], dim=-1).gather(-1, soft.tokens)
    losses = losses.index_put((soft.rows, columns), -(soft.probabilities * log_probs).sum(-1))
    return losses.sum() / (targets != -100).sum()


@dataclass
class BCResult:
    """What :func:`behaviour_clone` reports (``resumed_at``: the step a killed run continued from)."""

    steps: int
    losses: list[tuple[int, float]]
    tokens: int
    wall_s: float
    resumed_at: int = 0


def _save_state(path: Path, key: str, model: PreTrainedModel, optimizer: Any, step: int,
                queue: list[list[int]], rng: random.Random, losses: list[tuple[int, float]],
                running: list[float], tokens: int, wall_s: float) -> None:
    """Write the resumable training state atomically (temp file, fsync, rename)."""
    # deferred: torch is heavy to import
    import torch

    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as handle:
        torch.save({"key": key, "model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                    "queue": queue, "rng": rng.getstate(), "losses": losses, "running": running, "tokens": tokens,
                    "wall_s": wall_s}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def behaviour_clone(
    model: PreTrainedModel,
    examples: Sequence[BCExample],
    *,
    steps: int,
    lr: float,
    warmup_steps: int,
    lr_min_ratio: float,
    weight_decay: float,
    grad_clip: float,
    batch_tokens: int,
    pad_id: int,
    seed: int,
    lm_steps: int = 0,
    drills: Sequence[BCExample] = (),
    drill_steps: int = 0,
    lookups: Sequence[BCExample] = (),
    lookup_steps: int = 0,
    extra: Sequence[BCExample] = (),
    state_path: Path | None = None,
    state_key: str = "",
    save_every: int = 50,
    progress: bool = True,
) -> BCResult:
    """Train ``model`` in place for ``drill_steps + lookup_steps + lm_steps + steps`` AdamW steps, in four phases.

    The first ``drill_steps`` steps train on ``drills`` (copy drills, :mod:`intraskill.organism.drills`,
    loss on their masks), the next ``lookup_steps`` on ``lookups`` (lookup drills); the next ``lm_steps`` predict every token of the transcripts (prompts and
    pages too: the model learns to read and copy from its context); the remaining ``steps`` are
    behaviour cloning, loss on the assistant tokens only (of ``examples`` and ``extra``, e.g. first
    replies alone; soft targets where an example has them). One warm-up + cosine schedule spans all
    phases. Batches come from :func:`pack_batches` (reshuffled each epoch and at each phase change
    with ``seed``); dropout-free, so the run is
    deterministic on a given machine and thread count. With ``state_path`` the model, optimizer,
    batch queue and RNG are saved every ``save_every`` steps, and a killed run resumes from there
    (only a state saved under the same ``state_key``: a changed plan starts afresh).
    """
    # deferred: torch is heavy to import
    import torch

    if not examples:
        raise ValueError("behaviour_clone: no examples")
    if drill_steps and not drills:
        raise ValueError("behaviour_clone: drill_steps > 0 needs drills")
    if lookup_steps and not lookups:
        raise ValueError("behaviour_clone: lookup_steps > 0 needs lookups")
    total = drill_steps + lookup_steps + lm_steps + steps
    rng = random.Random(seed32(f"{seed}:bc-batches"))
    every_token = [BCExample(e.input_ids, [1] * len(e.input_ids)) for e in examples] if lm_steps else []
    phases = {"drill": drills, "lookup": lookups, "lm": every_token, "bc": [*examples, *extra]}
    lengths = {name: [len(e.input_ids) for e in source] for name, source in phases.items()}
    ends = list(itertools.accumulate((drill_steps, lookup_steps, lm_steps)))

    def phase_of(step: int) -> str:
        return next((name for name, end in zip(("drill", "lookup", "lm"), ends) if step < end), "bc")

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.95))
    losses: list[tuple[int, float]] = []
    queue: list[list[int]] = []
    first, tokens, wall_before = 0, 0, 0.0
    running: list[float] = []
    state = load_tensors(state_path, None) if state_path is not None and state_path.is_file() else {}
    if state.get("key") == state_key:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        first, queue, losses, tokens = state["step"], state["queue"], state["losses"], state["tokens"]
        running = state["running"]
        rng.setstate(state["rng"])
        wall_before = state["wall_s"]
    model.train()
    device = next(model.parameters()).device
    started = time.monotonic()
    bar = tqdm(range(first, total), desc="behaviour cloning", disable=not progress, initial=first, total=total)
    for step in bar:
        phase = phase_of(step)
        if not queue or (step > 0 and phase != phase_of(step - 1)):
            queue = pack_batches(lengths[phase], batch_tokens, rng)
        batch = [phases[phase][k] for k in queue.pop()]
        ids, labels = collate(batch, pad_id)
        soft = collate_soft(batch)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, total, lr, warmup_steps, lr_min_ratio)
        loss = bc_loss(model, ids.to(device), labels.to(device), soft and soft.to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip))
        if not (math.isfinite(loss.item()) and math.isfinite(norm)):
            raise NonFiniteUpdateError(f"behaviour cloning step {step + 1}: loss {loss.item()}, gradient norm "
                                       f"{norm}; stopped before the optimizer step (no state file holds it)")
        optimizer.step()
        tokens += int(ids.numel())
        running.append(loss.item())
        if (step + 1) % LOSS_LOG_EVERY == 0 or step + 1 == total:
            losses.append((step + 1, sum(running) / len(running)))
            bar.set_postfix(loss=f"{losses[-1][1]:.3f}", phase=phase)
            running = []
        if state_path is not None and ((step + 1) % save_every == 0 or step + 1 == total):
            _save_state(state_path, state_key, model, optimizer, step + 1, queue, rng, losses, running, tokens,
                        wall_before + time.monotonic() - started)
    model.eval()
    return BCResult(total, losses, tokens, wall_before + time.monotonic() - started, resumed_at=first)
