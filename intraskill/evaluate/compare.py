"""Paired comparison of two evaluation runs (``shopsimrl-paired-run-comparison-v1``, method §7).

Alignment comes first and a misaligned pair is refused (:class:`AlignmentError`):

* **plan** — the fields that must match depend on the comparison ``kind``:
  ``same-checkpoint`` (bare versus equipped on one checkpoint; the skills differ by design) checks
  pipeline, model, split, jobs, environment, runtime and prompt; ``cross-checkpoint`` (e.g. base
  versus trained) checks the same fields except the model;
* **traces** — every job has a completed record in both runs; per-trace provenance (the model for
  ``same-checkpoint``, environment version, task mode, prompt, runtime) agrees; every trace of a run
  carries the same skill list — except a deployed Skill1 library's run (plan provider
  ``skill1-library``), whose episodes each carry the skill they selected — and for ``same-checkpoint``
  run ``a`` is bare.

Then each run's full summary, and per metric the task-level paired percentile bootstrap of
``mean(b − a)`` (:func:`intraskill.evaluate.bootstrap.paired_bootstrap_ci`; per-metric seed
``u64(f"{seed}:{metric}")``, 10,000 resamples, 95 %). With ``repeats > 1`` a task's value is the mean
of its samples (``mean_of_task_level_values``); success transitions pair the episodes.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from intraskill.agent.traces import EpisodeTrace, read_traces
from intraskill.evaluate.bootstrap import TEST_SEED_BASE, paired_bootstrap_ci, success_transitions
from intraskill.evaluate.records import (
    Alignment,
    BootstrapSettings,
    PairedBlock,
    PairedComparison,
    PairedMetric,
    PlanAlignment,
    RunPair,
    TraceAlignment,
)
from intraskill.evaluate.runner import EvalPlan, read_plan
from intraskill.evaluate.summary import REWARD_COMPONENTS, episode_metrics, final_records, summarize, utc_now
from intraskill.layout import CompareDir, EvalDir
from intraskill.shop.reward import PRIMARY_REWARD

KINDS: tuple[str, ...] = ("same-checkpoint", "cross-checkpoint")
PER_EPISODE_SKILLS = "skill1-library"
"""The skills provider whose episodes select their own skill (:mod:`intraskill.evaluate.skill1_deploy`)."""
PLAN_FIELDS: dict[str, tuple[str, ...]] = {
    "same-checkpoint": ("pipeline_version", "model", "split", "jobs", "environment", "runtime", "prompt"),
    "cross-checkpoint": ("pipeline_version", "split", "jobs", "environment", "runtime", "prompt"),
}
TRACE_FIELDS: dict[str, tuple[str, ...]] = {
    "same-checkpoint": ("model", "environment", "prompt", "runtime"),
    "cross-checkpoint": ("environment", "prompt", "runtime"),
}
BEHAVIOR_METRICS = ("steps", "actions", "protocol_error_rate", "policy_failure_rate", "invalid_action_rate",
                    "prompt_tokens", "completion_tokens", "total_tokens", "duration_ms")


class AlignmentError(ValueError):
    """The two runs cannot be paired; the message names what differs."""


def _trace_view(trace: EpisodeTrace, name: str) -> Any:
    p = trace.provenance
    if name == "model":
        return {key: p.get(key) for key in ("model_id", "checkpoint_id", "backend")}
    if name == "environment":
        return {"environment_version": p.get("environment_version"), "task_mode": p.get("task_mode")}
    return p.get(name)


def _skill_ids(trace: EpisodeTrace) -> list[str]:
    return [skill["skill_id"] for skill in trace.provenance.get("selected_skills") or []]


def _unique(values: Sequence[Any]) -> list[Any]:
    seen: dict[str, Any] = {}
    for value in values:
        seen.setdefault(json.dumps(value, sort_keys=True, ensure_ascii=False), value)
    return list(seen.values())


def check_plans(a: EvalPlan, b: EvalPlan, kind: str) -> PlanAlignment:
    """The plan alignment block; raises :class:`AlignmentError` naming the differing fields."""
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
    a_dict, b_dict = a.to_dict(), b.to_dict()
    fields = PLAN_FIELDS[kind]
    differing = [name for name in fields if a_dict[name] != b_dict[name]]
    if differing:
        raise AlignmentError(f"plans differ ({kind}) on: {', '.join(differing)}")
    return PlanAlignment(kind=kind, checked_fields=list(fields), a_plan_fingerprint=a.fingerprint,
                         b_plan_fingerprint=b.fingerprint)


def completed_jobs(
    plan: EvalPlan, traces: Sequence[EpisodeTrace], label: str
) -> dict[tuple[int, int], EpisodeTrace]:
    """The scored completed trace of every job of ``plan`` (:class:`AlignmentError` names the jobs without one)."""
    completed, _ = final_records(traces)
    by_job = {(t.task_id, t.sample_id): t for t in completed.values()}
    missing = [job for job in plan.jobs if job not in by_job or by_job[job].reward is None]
    if missing:
        shown = ", ".join(f"task {t} sample {s}" for t, s in missing[:5])
        raise AlignmentError(
            f"run {label}: {len(missing)} job(s) without a scored completed trace ({shown}…)"
        )
    return {job: by_job[job] for job in plan.jobs}


def check_traces(a: Mapping[tuple[int, int], EpisodeTrace], b: Mapping[tuple[int, int], EpisodeTrace],
                 kind: str, per_episode: Mapping[str, bool] | None = None) -> TraceAlignment:
    """The trace alignment block; raises :class:`AlignmentError` on the first violated check. ``per_episode``
    marks the runs (``"a"``, ``"b"``) whose episodes select their own skills: their block lists every skill
    selected (``<label>_skill_ids``) and how many episodes ran with none (``<label>_bare_episodes``)."""
    fields = TRACE_FIELDS[kind]
    block: dict[str, Any] = {"status": "matched", "pairs": len(a), "checked_fields": list(fields)}
    for label, traces in (("a", a), ("b", b)):
        views = {name: _unique([_trace_view(t, name) for t in traces.values()]) for name in fields}
        skill_lists = _unique([_skill_ids(t) for t in traces.values()])
        if (per_episode or {}).get(label):
            block[f"{label}_skill_ids"] = sorted({skill for skills in skill_lists for skill in skills})
            block[f"{label}_bare_episodes"] = sum(not _skill_ids(t) for t in traces.values())
        elif len(skill_lists) > 1:
            raise AlignmentError(f"run {label}: traces carry {len(skill_lists)} different skill lists")
        else:
            block[f"{label}_skill_ids"] = skill_lists[0] if skill_lists else []
        block[label] = views
    for name in fields:
        if block["a"][name] != block["b"][name] or len(block["a"][name]) != 1:
            raise AlignmentError(
                f"trace provenance {name!r} differs: a {block['a'][name]} vs b {block['b'][name]}"
            )
    if kind == "same-checkpoint" and block["a_skill_ids"]:
        raise AlignmentError(
            f"same-checkpoint comparison: run a must be bare, its traces carry {block['a_skill_ids']}"
        )
    return TraceAlignment.from_dict(block)


def task_means(values: Iterable[tuple[int, float]]) -> dict[int, float]:
    """``task → mean`` of ``(task, value)`` pairs (a task's value is the mean over its samples)."""
    per_task: dict[int, list[float]] = defaultdict(list)
    for task, value in values:
        per_task[task].append(value)
    return {task: sum(items) / len(items) for task, items in per_task.items()}


def _task_values(traces: Mapping[tuple[int, int], EpisodeTrace], metric: str) -> dict[int, float]:
    return task_means((task, episode_metrics(trace)[metric]) for (task, _), trace in traces.items())


def paired_metrics(a: Mapping[tuple[int, int], EpisodeTrace], b: Mapping[tuple[int, int], EpisodeTrace],
                   samples: int, seed: int, confidence: float) -> dict[str, PairedMetric]:
    """Per metric: means, mean difference (b − a) and the paired bootstrap interval over tasks."""
    rewards = [PRIMARY_REWARD, *REWARD_COMPONENTS]
    metrics: dict[str, PairedMetric] = {}
    for metric in rewards + list(BEHAVIOR_METRICS):
        values_a, values_b = _task_values(a, metric), _task_values(b, metric)
        tasks = list(values_a)
        result = paired_bootstrap_ci([values_a[t] for t in tasks], [values_b[t] for t in tasks], metric,
                                     samples=samples, seed_base=seed, confidence=confidence)
        metrics[metric] = PairedMetric(a_mean=result.a_mean, b_mean=result.b_mean,
                                       mean_difference=result.mean_difference, confidence_interval=result.ci95,
                                       pairs=result.pairs)
    return metrics


def compare_runs(
    run_a: str | Path,
    run_b: str | Path,
    *,
    kind: str = "same-checkpoint",
    samples: int = 10_000,
    seed: int = TEST_SEED_BASE,
    confidence: float = 0.95,
) -> PairedComparison:
    """Align two run directories and compare them task by task (``b − a``).

    Parameters
    ----------
    run_a, run_b : evaluation run directories (``plan.json`` + ``traces.jsonl``); ``a`` is the reference.
    kind : ``same-checkpoint`` (a bare, b equipped) or ``cross-checkpoint`` (different models).
    samples, seed, confidence : the bootstrap's resamples, seed base and two-sided level.

    Returns
    -------
    :class:`~intraskill.evaluate.records.PairedComparison`: the ``shopsimrl-paired-run-comparison-v1`` record
    with ``a``/``b`` in place of ``bare``/``equipped``, plus ``paired.success_transitions``.
    """
    plans = {"a": read_plan(run_a), "b": read_plan(run_b)}
    plan_block = check_plans(plans["a"], plans["b"], kind)
    traces = {"a": read_traces(EvalDir(run_a).traces), "b": read_traces(EvalDir(run_b).traces)}
    by_job = {label: completed_jobs(plans[label], traces[label], label) for label in ("a", "b")}
    per_episode = {label: plan.skills.get("provider") == PER_EPISODE_SKILLS for label, plan in plans.items()}
    if kind == "same-checkpoint" and per_episode["a"]:
        raise AlignmentError("same-checkpoint comparison: run a must be bare, it deploys a Skill1 library")
    trace_block = check_traces(by_job["a"], by_job["b"], kind, per_episode)
    jobs = list(plans["a"].jobs)
    transitions = success_transitions([by_job["a"][j].reward.r_success for j in jobs],
                                      [by_job["b"][j].reward.r_success for j in jobs])
    metrics = paired_metrics(by_job["a"], by_job["b"], samples, seed, confidence)
    return PairedComparison(
        created_at=utc_now(), kind=kind, runs=RunPair(a=str(run_a), b=str(run_b)),
        alignment=Alignment(plan=plan_block, traces=trace_block),
        absolute={label: summarize(traces[label], len(plans[label].jobs)) for label in ("a", "b")},
        paired=PairedBlock(pairs=metrics[PRIMARY_REWARD].pairs, metrics=metrics, success_transitions=transitions,
                           bootstrap=BootstrapSettings(samples=samples, seed=seed, confidence_level=confidence)),
    )


def comparison_markdown(comparison: PairedComparison) -> str:
    """A Markdown report: the runs, the alignment status, the paired table and the transitions."""
    paired, bootstrap = comparison.paired, comparison.paired.bootstrap
    level = round(100 * bootstrap.confidence_level)
    lines = [
        f"# Paired comparison ({comparison.kind}, b − a)",
        "",
        f"- a: `{comparison.runs.a}`",
        f"- b: `{comparison.runs.b}`",
        f"- alignment: plan {comparison.alignment.plan.status}, traces "
        f"{comparison.alignment.traces.status} ({paired.pairs} task pairs)",
        f"- bootstrap: {bootstrap.method}, {bootstrap.samples} resamples, seed base {bootstrap.seed}",
        "",
        f"| metric | a | b | b − a | {level}% CI |",
        "|---|---:|---:|---:|---|",
    ]
    for metric, row in paired.metrics.items():
        low, high = row.confidence_interval
        lines.append(f"| {metric} | {row.a_mean:.4f} | {row.b_mean:.4f} "
                     f"| {row.mean_difference:+.4f} | [{low:+.4f}, {high:+.4f}] |")
    transitions = paired.success_transitions
    lines += ["", "Success transitions (a → b): " + ", ".join(f"{k}: {v}" for k, v in transitions.items())]
    return "\n".join(lines) + "\n"


def comparison_record(comparison: PairedComparison, a: str, b: str) -> dict[str, Any]:
    """One flat row of a comparison for tables and :func:`intraskill.plots.results.four_condition_results`.

    ``a``/``b`` name the arms; ``reward_*`` and ``success_*`` hold the mean difference and its
    interval (success as a 0–1 difference), plus the success transitions and the pair count.
    """
    row: dict[str, Any] = {"a": a, "b": b, "kind": comparison.kind, "pairs": comparison.paired.pairs}
    for name, metric in (("reward", PRIMARY_REWARD), ("success", "r_success")):
        result = comparison.metric(metric)
        low, high = result.confidence_interval
        row.update({f"{name}_a": result.a_mean, f"{name}_b": result.b_mean, f"{name}_diff": result.mean_difference,
                    f"{name}_lo": low, f"{name}_hi": high})
    return {**row, **comparison.paired.success_transitions}


def write_comparison(comparison: PairedComparison, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``comparison.json`` and ``comparison.md`` into ``out_dir``; returns both paths."""
    out = CompareDir(out_dir)
    out.root.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out.comparison, out.markdown
    comparison.write(json_path)
    md_path.write_text(comparison_markdown(comparison), encoding="utf-8")
    return json_path, md_path
