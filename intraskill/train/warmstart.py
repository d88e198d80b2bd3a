"""The organism's warm start: behaviour cloning from skill-conditioned expert demonstrations.

Pipeline (:func:`run_warmstart`, ``intraskill warmstart --params P``):

1. build (or reuse) the store; play ``warmstart.demos`` train tasks with the S₀-gated expert under
   random chunk masks (:mod:`intraskill.train.demos`), and ``warmstart.plan_examples`` first replies;
2. train a byte-level BPE tokenizer (single-digit tokens) on demonstration text plus the protocol
   corpus, and a random-init organism of ``model.organism``'s shape;
3. ``warmstart.drill_steps`` steps of copy drills (:mod:`intraskill.train.drills`), then
   ``warmstart.lm_steps`` steps of next-token prediction on the whole transcripts (the organism
   learns to copy ids and words from its pages and profile), then behaviour cloning: cross-entropy
   on assistant tokens only (:func:`bc_loss`; with ``warmstart.plan_targets`` the first reply's plan
   against the gate's exact law, :mod:`intraskill.train.plan_targets`); AdamW with linear warm-up and
   cosine decay, whole
   episodes packed into token-budget micro-batches, seeded, resumable after a kill (``bc_state.pt``);
4. save ``checkpoint/`` (``save_pretrained`` in bfloat16 + tokenizer), then evaluate the *saved*
   checkpoint with the lockstep :class:`~intraskill.policy.hf.HFPolicy` on val: bare, with S₀, and
   each chunk alone (paired with bare by task and episode seed) → ``ground_truth.json``;
5. ``manifest.json``: parameters, seeds, data and weight hashes, steps, losses, timings, metrics.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intraskill.hashing import seed32, sha256_file
from intraskill.params import Params
from intraskill.shop.build import open_engine
from intraskill.skills.bank import Skill, SkillBank, load_skillbank
from intraskill.train.demos import (
    Demonstration,
    chunk_roles,
    collect_demonstrations,
    demo_jobs,
    expert_gate,
    tokenize_demonstration,
    write_demonstrations,
)
from intraskill.train.plan_targets import SoftTarget, demonstration_targets

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from intraskill.agent.runtime import EpisodeResult
    from intraskill.policy.expert import CompetenceGate

MANIFEST_SCHEMA_VERSION = "intraskill-warmstart-v1"
GROUND_TRUTH_SCHEMA_VERSION = "intraskill-ground-truth-v1"
CHECKPOINT_DIR = "checkpoint"
CHECKPOINT_DTYPE = "bfloat16"
LOSS_LOG_EVERY = 10


@dataclass(frozen=True)
class BCExample:
    """One tokenized demonstration: ``input_ids``, the assistant-token ``loss_mask`` and optional
    ``soft`` targets: ``(position, ((token id, probability), …))`` replaces the one-hot target of the
    token at ``position`` (a supervised one) with the teacher's distribution
    (:mod:`intraskill.train.plan_targets`)."""

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
    ``soft`` positions the cross-entropy is taken against the teacher's distribution instead."""
    import torch

    logits = model(input_ids=ids).logits[:, :-1].float()
    targets = labels[:, 1:]
    if soft is None:
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                                 ignore_index=-100)
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
    import os

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
    extra: Sequence[BCExample] = (),
    state_path: Path | None = None,
    state_key: str = "",
    save_every: int = 50,
    progress: bool = True,
) -> BCResult:
    """Train ``model`` in place for ``drill_steps + lm_steps + steps`` AdamW steps, in three phases.

    The first ``drill_steps`` steps train on ``drills`` (copy drills, :mod:`intraskill.train.drills`,
    loss on their masks); the next ``lm_steps`` predict every token of the transcripts (prompts and
    pages too: the model learns to read and copy from its context); the remaining ``steps`` are
    behaviour cloning, loss on the assistant tokens only (of ``examples`` and ``extra``, e.g. first
    replies alone; soft targets where an example has them). One warm-up + cosine schedule spans all
    phases. Batches come from :func:`pack_batches` (reshuffled each epoch and at each phase change
    with ``seed``); dropout-free, so the run is
    deterministic on a given machine and thread count. With ``state_path`` the model, optimizer,
    batch queue and RNG are saved every ``save_every`` steps, and a killed run resumes from there
    (only a state saved under the same ``state_key``: a changed plan starts afresh).
    """
    import torch
    from tqdm.auto import tqdm

    if not examples:
        raise ValueError("behaviour_clone: no examples")
    if drill_steps and not drills:
        raise ValueError("behaviour_clone: drill_steps > 0 needs drills")
    total = drill_steps + lm_steps + steps
    rng = random.Random(seed32(f"{seed}:bc-batches"))
    every_token = [BCExample(e.input_ids, [1] * len(e.input_ids)) for e in examples] if lm_steps else []
    phases = {"drill": drills, "lm": every_token, "bc": [*examples, *extra]}
    lengths = {name: [len(e.input_ids) for e in source] for name, source in phases.items()}

    def phase_of(step: int) -> str:
        return "drill" if step < drill_steps else "lm" if step < drill_steps + lm_steps else "bc"

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.95))
    losses: list[tuple[int, float]] = []
    queue: list[list[int]] = []
    first, tokens, wall_before = 0, 0, 0.0
    running: list[float] = []
    state = torch.load(state_path, weights_only=False) if state_path is not None and state_path.is_file() else {}
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
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
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


# --- evaluation -------------------------------------------------------------------------------------
def arm_metrics(results: Sequence[EpisodeResult]) -> dict[str, Any]:
    """Success and reward (unscored episodes count 0), protocol-error rate per model turn, turns."""
    scored = [r for r in results if r.scored]
    turns = sum(r.model_steps for r in results)
    return {
        "episodes": len(results),
        "scored": len(scored),
        "success": sum(r.reward["r_success"] for r in scored) / max(1, len(results)),
        "reward": sum(r.reward["reward"] for r in scored) / max(1, len(results)),
        "protocol_error_rate": sum(r.protocol_errors for r in results) / max(1, turns),
        "invalid_action_rate": sum(r.invalid_actions for r in results) / max(1, turns),
        "mean_turns": turns / max(1, len(results)),
        "terminations": {reason: sum(r.termination_reason == reason for r in results)
                         for reason in sorted({str(r.termination_reason) for r in results})},
    }


def run_arm(policy: Any, env_factory: Callable[[], Any], task_ids: Sequence[int], skills: Sequence[Skill],
            seed: int, config: Any, batch_size: int) -> list[EpisodeResult]:
    """One evaluation arm: each task once (sample 0) with ``skills`` injected, episode seeds from ``seed``."""
    from intraskill.agent.runtime import EpisodeJob, run_episodes

    jobs = [EpisodeJob.create(task, 0, seed, skills) for task in task_ids]
    results: list[EpisodeResult] = []
    for start in range(0, len(jobs), batch_size):
        results += run_episodes(policy, env_factory, jobs[start:start + batch_size], config, progress=False)
    return results


def ground_truth(bank: SkillBank, bare: Sequence[EpisodeResult], alone: dict[str, Sequence[EpisodeResult]],
                 *, samples: int, seed_base: int) -> dict[str, Any]:
    """Per-chunk paired effect on ``r_success`` (chunk alone − bare) with a paired bootstrap CI."""
    from intraskill.evaluate.bootstrap import paired_bootstrap_ci

    roles = {r.skill_id: r for r in chunk_roles(bank)}
    base = {r.task_id: r.reward["r_success"] if r.scored else 0.0 for r in bare}
    chunks = {}
    for skill_id, results in alone.items():
        treated = {r.task_id: r.reward["r_success"] if r.scored else 0.0 for r in results}
        tasks = [t for t in treated if t in base]
        ci = paired_bootstrap_ci([base[t] for t in tasks], [treated[t] for t in tasks],
                                 f"r_success:{skill_id}", samples=samples, seed_base=seed_base)
        chunks[skill_id] = {"role": roles[skill_id].role, "target": roles[skill_id].target,
                            "bare_success": ci.a_mean, "alone_success": ci.b_mean,
                            "effect": ci.mean_difference, "ci95": list(ci.ci95), "pairs": ci.pairs,
                            "protocol_error_rate": arm_metrics(results)["protocol_error_rate"]}
    return {"metric": "r_success", "method": "task_level_paired_percentile", "bootstrap_samples": samples,
            "seed_base": seed_base, "chunks": chunks}


PROTOCOL_ERROR_MAX = 0.05
"""Issue #4 (a): at most this share of model turns may be protocol errors."""
BARE_SUCCESS_RANGE = (0.30, 0.60)
"""Issue #4 (b): a moderate bare val success, room left to learn."""


def warmstart_checks(metrics: Mapping[str, Any], truth: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The warm start's acceptance checks, each ``{"value", "target", "met"}``.

    ``protocol_errors``: the worst protocol-error rate over the evaluated arms (bare, S₀, each chunk
    alone); ``bare_success``: bare val success; ``chunk_use``: the chunks whose paired 95 % CI of
    (alone − bare) excludes 0; ``content_use``: the chunks whose effect lies outside the neutral
    chunk's CI — they act through what they say, not only through a skill block being there.
    """
    arms = [metrics["bare"], metrics["s0"], *metrics["alone"].values()]
    worst = max(arm["protocol_error_rate"] for arm in arms)
    bare = metrics["bare"]["success"]
    chunks = truth["chunks"]
    used = sorted(chunk for chunk, entry in chunks.items() if entry["ci95"][0] > 0 or entry["ci95"][1] < 0)
    neutral = [entry["ci95"] for entry in chunks.values() if entry.get("role") == "neutral"]
    content = sorted(chunk for chunk, entry in chunks.items() if neutral and entry.get("role") != "neutral"
                     and not any(low <= entry["effect"] <= high for low, high in neutral))
    low, high = BARE_SUCCESS_RANGE
    return {
        "protocol_errors": {"value": worst, "target": f"<= {PROTOCOL_ERROR_MAX}",
                            "met": worst <= PROTOCOL_ERROR_MAX},
        "bare_success": {"value": bare, "target": f"{low}-{high}", "met": low <= bare <= high},
        "chunk_use": {"value": used, "target": "a chunk's paired CI excludes 0", "met": bool(used)},
        "content_use": {"value": content, "target": "a chunk's effect outside the neutral chunk's CI",
                        "met": bool(content)},
    }


# --- the whole pipeline ------------------------------------------------------------------------------
def train_organism(params: Params, demos: Sequence[Demonstration], out: Path, gate: CompetenceGate,
                   plan_demos: Sequence[Demonstration] = (),
                   progress: bool = True) -> tuple[Path, BCResult, dict[str, Any]]:
    """Tokenizer + random-init organism + behaviour cloning on ``model.device`` (``auto``: CUDA when
    present); saves ``out/checkpoint`` (bf16). ``plan_demos`` (first replies alone) join the cloning
    phase; with ``warmstart.plan_targets`` first replies are cloned on ``gate``'s exact plan law (the
    gate that played ``demos``)."""
    import torch

    from intraskill.evaluate.runner import resolve_device
    from intraskill.policy.organism import OrganismConfig, build_organism, protocol_corpus, train_tokenizer
    from intraskill.train.drills import copy_drills, drill_count, ordinary_tokens

    ws = params.warmstart
    corpus = [d.text for d in demos[:ws.vocab_corpus_demos]] + protocol_corpus()
    tokenizer = train_tokenizer(corpus, params.model.organism.vocab_size)
    config = OrganismConfig(**params.model.organism.model_dump(), seed=seed32(f"{ws.seed}:organism-init"))
    model = build_organism(config, tokenizer).to(resolve_device(params.model.device))
    temperature = params.sampling.temperature  # the clone samples its plans at it

    def example(demo: Demonstration) -> BCExample:
        ids, mask = tokenize_demonstration(demo.segments, tokenizer)
        soft = demonstration_targets(demo.segments, demo.skill_ids, gate, tokenizer, params.store.language,
                                     temperature) if ws.plan_targets else ()
        return BCExample(ids, mask, soft)

    examples = [e for e in map(example, demos) if len(e.input_ids) <= config.max_position]
    extra = [example(demo) for demo in plan_demos]
    drills = copy_drills(ordinary_tokens(tokenizer), drill_count(ws.drill_steps, ws.batch_tokens), ws.seed)
    torch.manual_seed(seed32(f"{ws.seed}:bc"))
    state_path = out / BC_STATE_FILE
    result = behaviour_clone(model, examples, steps=ws.steps, lm_steps=ws.lm_steps, drills=drills,
                             drill_steps=ws.drill_steps, extra=extra, lr=ws.lr,
                             warmup_steps=ws.warmup_steps, lr_min_ratio=ws.lr_min_ratio,
                             weight_decay=ws.weight_decay, grad_clip=ws.grad_clip, batch_tokens=ws.batch_tokens,
                             pad_id=int(tokenizer.pad_token_id), seed=ws.seed, state_path=state_path,
                             state_key=json.dumps(bc_identity(out, params), sort_keys=True), progress=progress)
    checkpoint = out / CHECKPOINT_DIR
    checkpoint.mkdir(parents=True, exist_ok=True)
    model.to("cpu", getattr(torch, CHECKPOINT_DTYPE)).save_pretrained(str(checkpoint))
    tokenizer.save_pretrained(str(checkpoint))
    state_path.unlink(missing_ok=True)
    data = {"examples": len(examples), "dropped_too_long": len(demos) - len(examples),
            "vocab_size": len(tokenizer), "organism": config.to_dict(),
            "parameters": sum(p.numel() for p in model.parameters()),
            "supervised_tokens": sum(sum(e.loss_mask) for e in examples),
            "plan_examples": len(extra), "soft_targets": sum(len(e.soft) for e in (*examples, *extra)),
            "tokens_per_example": sum(len(e.input_ids) for e in examples) / max(1, len(examples))}
    return checkpoint, result, data


def evaluate_warmstart(params: Params, checkpoint: Path, bank: SkillBank, engine: Any, val_ids: Sequence[int],
                       progress: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(metrics, ground_truth)`` of a saved checkpoint: bare, with S₀ and each chunk alone on val."""
    from tqdm.auto import tqdm

    from intraskill.agent.env import InProcessEnvironment
    from intraskill.evaluate.runner import resolve_device, runtime_config
    from intraskill.policy.factory import load_policy

    ws = params.warmstart
    policy = load_policy("organism", checkpoint=str(checkpoint), device=resolve_device(params.model.device),
                         dtype=params.model.dtype, max_batch=ws.eval_batch_size)
    config = runtime_config(params)
    factory = lambda: InProcessEnvironment(engine)  # noqa: E731
    skills = bank.enabled_skills()
    n_eval, n_truth = min(ws.eval_episodes, len(val_ids)), min(ws.ground_truth_episodes, len(val_ids))
    arms: list[tuple[str, list[int], tuple[Skill, ...]]] = [
        ("bare", list(val_ids[:max(n_eval, n_truth)]), ()),
        ("s0", list(val_ids[:n_eval]), tuple(skills)),
    ] + [(f"alone:{s.skill_id}", list(val_ids[:n_truth]), (s,)) for s in skills]
    results: dict[str, list[EpisodeResult]] = {}
    timings: dict[str, float] = {}
    for name, tasks, injected in tqdm(arms, desc="evaluate warm start", disable=not progress):
        started = time.monotonic()
        results[name] = run_arm(policy, factory, tasks, injected, ws.seed, config, ws.eval_batch_size)
        timings[name] = round(time.monotonic() - started, 1)
    bare_eval = results["bare"][:n_eval]
    metrics = {"split": "val", "bare": arm_metrics(bare_eval), "s0": arm_metrics(results["s0"]),
               "alone": {s.skill_id: arm_metrics(results[f"alone:{s.skill_id}"]) for s in skills},
               "eval_wall_s": timings}
    truth = ground_truth(bank, results["bare"][:n_truth],
                         {s.skill_id: results[f"alone:{s.skill_id}"] for s in skills},
                         samples=params.evaluation.bootstrap_samples,
                         seed_base=params.evaluation.bootstrap_seed)
    return metrics, truth


DEMOS_FILE = "demos.jsonl"
PLAN_DEMOS_FILE = "plan_demos.jsonl"
BC_FILE = "bc.json"
BC_STATE_FILE = "bc_state.pt"
EVAL_ONLY = ("eval_episodes", "ground_truth_episodes", "eval_batch_size")
"""Warm-start settings of the evaluation alone: changing them re-evaluates, it never retrains."""
NOT_TRAINING = (*EVAL_ONLY, "out_dir")
"""Warm-start settings that do not change the trained model (the evaluation's and the location)."""
BC_RECORD_KEYS = ("steps", "drill_steps", "lm_steps", "resumed_at", "tokens", "losses", "note")
"""What the manifest's ``bc`` section copies from ``bc.json``."""


def expert_demos(params: Params, engine: Any, task_ids: Sequence[int], bank: SkillBank, gate: CompetenceGate,
                 *, count: int, seed: int, max_turns: int, slip_rate: float = 0.0,
                 progress: bool = True) -> list[Demonstration]:
    """``count`` demonstrations of the gated expert on ``task_ids`` under the warm start's chunk masks
    (the demonstrations themselves, or with ``max_turns=1`` first replies alone)."""
    from intraskill.agent.env import InProcessEnvironment

    ws = params.warmstart
    jobs = demo_jobs(list(task_ids), count, bank.enabled_skills(), ws.mask_probability, seed,
                     bare_share=ws.bare_share, alone_share=ws.alone_share)
    return collect_demonstrations(lambda: InProcessEnvironment(engine), jobs, gate, seed=seed,
                                  max_turns=max_turns, max_actions=params.store.max_actions,
                                  language=params.store.language, view=params.model.view, slip_rate=slip_rate,
                                  plan=ws.plan, progress=progress)


def bc_identity(out: Path, params: Params) -> dict[str, Any]:
    """What a finished BC stage in ``out`` was trained from: demonstrations, tokenizer and parameters
    (the evaluation's own settings and the output location, :data:`NOT_TRAINING`, excepted)."""
    from intraskill.policy.organism import organism_split

    plan_file = out / PLAN_DEMOS_FILE
    plans = {"plan_demos_sha256": sha256_file(plan_file)} if params.warmstart.plan_examples else {}
    return {"demos_sha256": sha256_file(out / DEMOS_FILE), **plans, "tokenizer_split": organism_split(),
            "store": params.store.model_dump(),
            "organism": params.model.organism.model_dump(), "view": params.model.view,
            "warmstart": training_settings(params)}


def training_settings(params: Params) -> dict[str, Any]:
    """The warm-start settings that decide the trained model (:data:`NOT_TRAINING` left out), as JSON."""
    return params.warmstart.model_dump(mode="json", exclude=set(NOT_TRAINING))


def finished_bc(out: Path, params: Params) -> dict[str, Any] | None:
    """The ``bc.json`` record of a finished BC stage in ``out`` made from the same demonstrations and
    parameters (so an interrupted evaluation resumes without retraining), else ``None``."""
    path = out / BC_FILE
    needed = (path, out / DEMOS_FILE, out / CHECKPOINT_DIR / "config.json")
    if not all(file.is_file() for file in needed):
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    expected = json.loads(json.dumps(bc_identity(out, params)))
    return record if record.get("identity") == expected else None


def run_warmstart(params: Params, out_dir: str | Path | None = None, progress: bool = True) -> dict[str, Any]:
    """The whole warm start (demos → BC → checkpoint → evaluation); returns the manifest."""
    ws = params.warmstart
    out = Path(out_dir or ws.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bank = load_skillbank(ws.skills)
    gate = expert_gate(bank, ws)
    timings: dict[str, float] = {}
    started = time.monotonic()
    store = open_engine(params.store, "train", run_root=params.experiment.run_root)
    engine = store.engine
    bc_record = finished_bc(out, params)
    if bc_record is None:
        demos = expert_demos(params, engine, store.task_ids, bank, gate, count=ws.demos, seed=ws.seed,
                             max_turns=params.sampling.max_turns, slip_rate=ws.slip_rate, progress=progress)
        write_demonstrations(demos, out / DEMOS_FILE)
        plan_demos = expert_demos(params, engine, store.task_ids, bank, gate, count=ws.plan_examples,
                                  seed=seed32(f"{ws.seed}:plan-examples"), max_turns=1, progress=progress)
        if plan_demos:
            write_demonstrations(plan_demos, out / PLAN_DEMOS_FILE)
        demos_s = round(time.monotonic() - started, 1)
        _, bc, data = train_organism(params, demos, out, gate, plan_demos, progress=progress)
        bc_record = {"identity": bc_identity(out, params), "demos_s": demos_s, "episodes": len(demos),
                     "expert_success": sum(d.reward["r_success"] for d in demos) / max(1, len(demos)),
                     "steps": bc.steps, "drill_steps": params.warmstart.drill_steps,
                     "lm_steps": params.warmstart.lm_steps, "resumed_at": bc.resumed_at,
                     "tokens": bc.tokens, "losses": bc.losses,
                     "wall_s": round(bc.wall_s, 1), "data": data}
        (out / BC_FILE).write_text(json.dumps(bc_record, indent=1) + "\n", encoding="utf-8")
    checkpoint = out / CHECKPOINT_DIR
    timings.update({"demos_s": bc_record["demos_s"], "bc_s": bc_record["wall_s"]})
    started = time.monotonic()
    try:
        metrics, identity = measure_ground_truth(params, checkpoint, out, bank, store, progress=progress)
    finally:
        engine.index.close()
    timings["eval_s"] = round(time.monotonic() - started, 1)
    manifest = {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        **identity,
        "params": {"experiment": params.experiment.model_dump(), "store": params.store.model_dump(),
                   "model": params.model.model_dump(), "sampling": params.sampling.model_dump(),
                   "warmstart": ws.model_dump()},
        "seeds": {"warmstart": ws.seed, "organism_init": seed32(f"{ws.seed}:organism-init"),
                  "bc_batches": seed32(f"{ws.seed}:bc-batches")},
        "demos": {"episodes": bc_record["episodes"], "requested": ws.demos,
                  "sha256": bc_record["identity"]["demos_sha256"],
                  "expert_success": bc_record["expert_success"], **bc_record["data"]},
        "bc": {**{key: bc_record[key] for key in BC_RECORD_KEYS if key in bc_record},
               "checkpoint_dtype": CHECKPOINT_DTYPE},
        "files": {p.name: sha256_file(p) for p in sorted(checkpoint.iterdir()) if p.is_file()},
        "timings": timings,
        "metrics": metrics,
        "ground_truth_file": "ground_truth.json",
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def measure_ground_truth(params: Params, checkpoint: Path, out: Path, bank: SkillBank, store: Any,
                         progress: bool = True) -> tuple[dict[str, Any], dict[str, str]]:
    """Evaluate ``checkpoint`` on val (:func:`evaluate_warmstart`) and write ``out/ground_truth.json``.

    ``store`` is the opened train store (its engine and catalogue). Returns ``(metrics, identity)``:
    the evaluation's metrics and the checkpoint, bank and catalogue digests the truth records.
    """
    from intraskill.policy.factory import weights_digest

    ws = params.warmstart
    val_ids = list(store.catalog.task_ids("val"))
    metrics, truth = evaluate_warmstart(params, checkpoint, bank, store.engine, val_ids, progress=progress)
    identity = {"checkpoint_sha256": weights_digest(checkpoint), "bank_sha256": bank.sha256,
                "catalog_sha256": store.catalog.sha256}
    truth = {"schema_version": GROUND_TRUTH_SCHEMA_VERSION, **identity, "split": "val",
             "episodes_per_arm": min(ws.ground_truth_episodes, len(val_ids)), "seed": ws.seed, **truth}
    (out / "ground_truth.json").write_text(json.dumps(truth, indent=1) + "\n", encoding="utf-8")
    return metrics, identity


SHIPPED_FILES = ("manifest.json", "ground_truth.json")


def ship_warmstart(out_dir: str | Path, dest: str | Path) -> Path:
    """Copy a finished warm start's checkpoint, ``manifest.json`` and ``ground_truth.json`` to ``dest``
    (the demonstrations stay behind; the manifest records their SHA-256). Returns ``dest``."""
    import shutil

    out, dest = Path(out_dir), Path(dest)
    for name in SHIPPED_FILES:
        if not (out / name).is_file():
            raise FileNotFoundError(f"{out / name}: not a finished warm start (run `intraskill warmstart`)")
    if (dest / CHECKPOINT_DIR).exists():
        shutil.rmtree(dest / CHECKPOINT_DIR)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(out / CHECKPOINT_DIR, dest / CHECKPOINT_DIR)
    for name in SHIPPED_FILES:
        shutil.copy2(out / name, dest / name)
    return dest


def verify_shipped(directory: str | Path) -> list[str]:
    """Problems of a shipped warm start: checkpoint files whose SHA-256 differs from the manifest,
    and a ground truth or weights digest that does not match (empty list = intact)."""
    from intraskill.policy.factory import weights_digest

    directory = Path(directory)
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    truth = json.loads((directory / "ground_truth.json").read_text(encoding="utf-8"))
    checkpoint = directory / CHECKPOINT_DIR
    problems = [f"{name}: sha256 differs from the manifest" for name, digest in manifest["files"].items()
                if not (checkpoint / name).is_file() or sha256_file(checkpoint / name) != digest]
    if weights_digest(checkpoint) != manifest["checkpoint_sha256"]:
        problems.append("checkpoint_sha256: the weights differ from the manifest")
    if truth.get("checkpoint_sha256") != manifest["checkpoint_sha256"]:
        problems.append("ground_truth.json: measured on another checkpoint")
    return problems
