"""The warm start's evaluation and ground truth: bare and with-S₀ metrics, each chunk alone against bare
(paired by task and episode seed), and the checks a warm start must pass."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from intraskill.agent.env import InProcessEnvironment
from intraskill.agent.runtime import EpisodeJob, EpisodeResult, RuntimeConfig, run_episodes
from intraskill.agent.traces import EpisodeTrace
from intraskill.chat.base import Policy
from intraskill.evaluate.bootstrap import paired_bootstrap_ci
from intraskill.hashing import sha256_json
from intraskill.jsonl import JsonlWriter, iter_jsonl
from intraskill.layout import WarmstartDir
from intraskill.organism.demos import chunk_roles
from intraskill.organism.manifest import ArmMetrics, WarmstartMetrics
from intraskill.params import Params
from intraskill.policy.factory import load_policy, resolve_device, weights_digest
from intraskill.policy.warmstarts import ChunkTruth, GroundTruth
from intraskill.record import Record
from intraskill.skills.bank import Skill, SkillBank

if TYPE_CHECKING:
    from intraskill.agent.env import Environment



def arm_metrics(results: Sequence[EpisodeResult]) -> ArmMetrics:
    """Success and reward (unscored episodes count 0), protocol-error rate per model turn, turns."""
    scored = [r for r in results if r.scored]
    turns = sum(r.model_steps for r in results)
    return ArmMetrics(
        episodes=len(results),
        scored=len(scored),
        success=sum(r.reward.r_success for r in scored) / max(1, len(results)),
        reward=sum(r.reward.reward for r in scored) / max(1, len(results)),
        protocol_error_rate=sum(r.protocol_errors for r in results) / max(1, turns),
        invalid_action_rate=sum(r.invalid_actions for r in results) / max(1, turns),
        mean_turns=turns / max(1, len(results)),
        terminations={reason: sum(r.termination_reason == reason for r in results)
                      for reason in sorted({str(r.termination_reason) for r in results})},
    )


def run_arm(policy: Policy, env_factory: Callable[[], Environment], task_ids: Sequence[int],
            skills: Sequence[Skill], seed: int, config: RuntimeConfig, batch_size: int,
            record: Path | None = None, key: str = "") -> list[EpisodeResult]:
    """One evaluation arm: each task once (sample 0) with ``skills`` injected, episode seeds from ``seed``.

    With ``record`` (a JSONL file), every finished episode's trace is appended there under ``key`` with fsync, and
    the tasks already recorded under ``key`` are read back instead of played again: a killed arm resumes with no
    episode lost or repeated.
    """
    done: dict[int, EpisodeResult] = {}
    if record is not None:
        for line in iter_jsonl(record):
            if line["key"] == key:
                trace = EpisodeTrace.from_dict(line["trace"])
                done[trace.task_id] = EpisodeResult.from_trace(trace)
    jobs = [EpisodeJob.create(task, 0, seed, skills) for task in task_ids if task not in done]
    writer = JsonlWriter(record) if record is not None and jobs else None
    try:
        for start in range(0, len(jobs), batch_size):
            for result in run_episodes(policy, env_factory, jobs[start:start + batch_size], config, progress=False):
                done[result.task_id] = result
                if writer is not None:
                    writer.append({"key": key, "trace": result.trace.to_dict()})
    finally:
        if writer is not None:
            writer.close()
    return [done[task] for task in task_ids]


def ground_truth(bank: SkillBank, bare: Sequence[EpisodeResult], alone: dict[str, Sequence[EpisodeResult]],
                 *, samples: int, seed_base: int, catalog_sha256: str, seed: int,
                 checkpoint_sha256: str | None) -> GroundTruth:
    """Per-chunk paired effect on ``r_success`` (chunk alone − bare, val) with a paired bootstrap CI; the arms ran
    on the catalogue ``catalog_sha256`` with episode seeds from ``seed`` (``checkpoint_sha256``: the weights,
    ``None`` for the scripted teacher)."""
    roles = {r.skill_id: r for r in chunk_roles(bank)}
    base = {r.task_id: r.reward.r_success if r.scored else 0.0 for r in bare}
    chunks = {}
    for skill_id, results in alone.items():
        treated = {r.task_id: r.reward.r_success if r.scored else 0.0 for r in results}
        tasks = [t for t in treated if t in base]
        ci = paired_bootstrap_ci([base[t] for t in tasks], [treated[t] for t in tasks],
                                 f"r_success:{skill_id}", samples=samples, seed_base=seed_base)
        chunks[skill_id] = ChunkTruth(role=roles[skill_id].role, target=roles[skill_id].target,
                                      bare_success=ci.a_mean, alone_success=ci.b_mean, effect=ci.mean_difference,
                                      ci95=ci.ci95, pairs=ci.pairs,
                                      protocol_error_rate=arm_metrics(results).protocol_error_rate)
    return GroundTruth(checkpoint_sha256=checkpoint_sha256, bank_sha256=bank.sha256, catalog_sha256=catalog_sha256,
                       split="val", episodes_per_arm=len(bare), seed=seed, metric="r_success",
                       method="task_level_paired_percentile", bootstrap_samples=samples, seed_base=seed_base,
                       chunks=chunks)


PROTOCOL_ERROR_MAX = 0.05
"""Issue #4 (a): at most this share of model turns may be protocol errors."""
BARE_SUCCESS_RANGE = (0.30, 0.60)
"""Issue #4 (b): a moderate bare val success, room left to learn."""


class Check(Record):
    """One acceptance check: the measured value, the target as text and whether it is met."""

    value: float | list[str]
    target: str
    met: bool


class WarmstartChecks(Record):
    """The warm start's acceptance checks (:func:`warmstart_checks`)."""

    protocol_errors: Check
    bare_success: Check
    chunk_use: Check
    content_use: Check


def warmstart_checks(metrics: WarmstartMetrics, truth: GroundTruth) -> WarmstartChecks:
    """The warm start's acceptance checks.

    ``protocol_errors``: the worst protocol-error rate over the evaluated arms (bare, S₀, each chunk
    alone); ``bare_success``: bare val success; ``chunk_use``: the chunks whose paired 95 % CI of
    (alone − bare) excludes 0; ``content_use``: the chunks whose effect lies outside the neutral
    chunk's CI — they act through what they say, not only through a skill block being there.
    """
    arms = [metrics.bare, metrics.s0, *metrics.alone.values()]
    worst = max(arm.protocol_error_rate for arm in arms)
    bare = metrics.bare.success
    chunks = truth.chunks
    used = sorted(chunk for chunk, entry in chunks.items() if entry.ci95[0] > 0 or entry.ci95[1] < 0)
    neutral = [entry.ci95 for entry in chunks.values() if entry.role == "neutral"]
    content = sorted(chunk for chunk, entry in chunks.items() if neutral and entry.role != "neutral"
                     and not any(low <= entry.effect <= high for low, high in neutral))
    low, high = BARE_SUCCESS_RANGE
    return WarmstartChecks(
        protocol_errors=Check(value=worst, target=f"<= {PROTOCOL_ERROR_MAX}", met=worst <= PROTOCOL_ERROR_MAX),
        bare_success=Check(value=bare, target=f"{low}-{high}", met=low <= bare <= high),
        chunk_use=Check(value=used, target="a chunk's paired CI excludes 0", met=bool(used)),
        content_use=Check(value=content, target="a chunk's effect outside the neutral chunk's CI",
                          met=bool(content)),
    )


# --- the whole pipeline ------------------------------------------------------------------------------
def evaluate_warmstart(params: Params, checkpoint: Path, bank: SkillBank, store: Any, progress: bool = True,
                       record: Path | None = None) -> tuple[WarmstartMetrics, GroundTruth]:
    """``(metrics, ground_truth)`` of a saved checkpoint: bare, with S₀ and each chunk alone on ``store``'s val
    tasks (no chunk-alone arms with ``warmstart.ground_truth_episodes: 0``). With ``record`` every episode is kept
    there (:func:`run_arm`), keyed by the checkpoint's weights, the arm's chunks, the seed, the runtime and the
    store, so a killed evaluation resumes."""

    ws, engine = params.warmstart, store.engine
    val_ids = list(store.catalog.task_ids("val"))
    policy = load_policy(params.model.spec, checkpoint=str(checkpoint), device=resolve_device(params.model.device),
                         dtype=params.model.dtype, max_batch=ws.eval_batch_size)
    config = RuntimeConfig.from_params(params.sampling, params.store, params.model)
    factory = lambda: InProcessEnvironment(engine)  # noqa: E731
    n_eval, n_truth = min(ws.eval_episodes, len(val_ids)), min(ws.ground_truth_episodes, len(val_ids))
    skills = bank.enabled_skills()
    alone_skills = skills if n_truth else ()
    arms: list[tuple[str, list[int], tuple[Skill, ...]]] = [
        ("bare", list(val_ids[:max(n_eval, n_truth)]), ()),
        ("s0", list(val_ids[:n_eval]), tuple(skills)),
    ] + [(f"alone:{s.skill_id}", list(val_ids[:n_truth]), (s,)) for s in alone_skills]
    digest = weights_digest(checkpoint)
    identity = {"checkpoint": digest, "spec": params.model.spec, "dtype": params.model.dtype,
                "seed": ws.seed, "runtime": config.to_dict(), "store": engine.versions(),
                "products_sha256": engine.index.manifest["products_sha256"]}
    results: dict[str, list[EpisodeResult]] = {}
    timings: dict[str, float] = {}
    for name, tasks, injected in tqdm(arms, desc="evaluate warm start", disable=not progress):
        started = time.monotonic()
        key = sha256_json({**identity, "skills": [[s.skill_id, s.content_sha256] for s in injected]})
        results[name] = run_arm(policy, factory, tasks, injected, ws.seed, config, ws.eval_batch_size, record, key)
        timings[name] = round(time.monotonic() - started, 1)
    bare_eval = results["bare"][:n_eval]
    metrics = WarmstartMetrics(
        split="val", bare=arm_metrics(bare_eval), s0=arm_metrics(results["s0"]),
        alone={s.skill_id: arm_metrics(results[f"alone:{s.skill_id}"]) for s in alone_skills}, eval_wall_s=timings)
    truth = ground_truth(bank, results["bare"][:n_truth],
                         {s.skill_id: results[f"alone:{s.skill_id}"] for s in alone_skills},
                         samples=params.evaluation.bootstrap_samples, seed_base=params.evaluation.bootstrap_seed,
                         catalog_sha256=store.catalog.sha256, seed=ws.seed, checkpoint_sha256=digest)
    return metrics, truth


def measure_ground_truth(params: Params, checkpoint: Path, out: Path, bank: SkillBank, store: Any,
                         progress: bool = True) -> tuple[WarmstartMetrics, GroundTruth]:
    """Evaluate ``checkpoint`` on val (:func:`evaluate_warmstart`; ``store``: the opened train store, its engine
    and catalogue) and write ``out/ground_truth.json``; returns the evaluation's metrics and the ground truth."""
    metrics, truth = evaluate_warmstart(params, checkpoint, bank, store, progress=progress,
                                        record=WarmstartDir(out).evaluation)
    truth.write(WarmstartDir(out).ground_truth, indent=1)
    return metrics, truth
