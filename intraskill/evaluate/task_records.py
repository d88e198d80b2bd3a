"""Per-task outcome records of an evaluation run: the compact form results ship in (``data/results/``).

A run directory holds either its plan and traces (a live run) or ``tasks.jsonl`` (shipped records: one line per
task and sample with the outcome, every reward part, steps and tokens, no episode text).
:func:`run_task_values` reads either, so the analysis of shipped records is the analysis of a live run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from intraskill.agent.traces import read_traces
from intraskill.evaluate.compare import completed_jobs, task_means
from intraskill.evaluate.runner import read_plan
from intraskill.evaluate.summary import REWARD_COMPONENTS, episode_metrics
from intraskill.jsonl import JsonlWriter, iter_jsonl
from intraskill.layout import EvalDir
from intraskill.shop.reward import PRIMARY_REWARD

RECORD_METRICS: tuple[str, ...] = (PRIMARY_REWARD, *REWARD_COMPONENTS, "steps", "actions", "protocol_error_rate",
                                   "prompt_tokens", "completion_tokens")
"""What a task record keeps of an episode (:func:`~intraskill.evaluate.summary.episode_metrics` names)."""
RECORD_KEYS = frozenset({"task_id", "sample_id", *RECORD_METRICS})


def run_task_records(run_dir: str | Path) -> list[dict[str, Any]]:
    """One record per job of the run (``task_id``, ``sample_id`` and :data:`RECORD_METRICS`): read from its
    ``tasks.jsonl`` when it holds one (shipped records), else derived from its plan and traces."""
    files = EvalDir(run_dir)
    path = files.tasks
    if path.is_file():
        records = list(iter_jsonl(path, torn_tail=False))
        for line, record in enumerate(records, 1):
            missing = sorted(RECORD_KEYS - set(record))
            if missing:
                raise ValueError(f"{path}: line {line} lacks {missing}")
        return records
    by_job = completed_jobs(read_plan(run_dir), read_traces(files.traces), str(run_dir))
    records = []
    for (task, sample), trace in by_job.items():
        values = episode_metrics(trace)
        records.append({"task_id": task, "sample_id": sample, **{m: values[m] for m in RECORD_METRICS}})
    return records


def run_task_values(run_dir: str | Path, metrics: Sequence[str]) -> dict[str, dict[int, float]]:
    """``metric → task → value`` of one run (the mean over a task's samples), from its records
    (:func:`run_task_records`; a live run needs a scored completed trace for every job of its plan)."""
    records = run_task_records(run_dir)
    return {metric: task_means((r["task_id"], r[metric]) for r in records) for metric in metrics}


def write_task_records(records: Iterable[Mapping[str, Any]], target_dir: str | Path) -> Path:
    """Write ``records`` as ``<target_dir>/tasks.jsonl`` (replacing it; each line fsynced)."""
    path = EvalDir(target_dir).tasks
    partial = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    partial.unlink(missing_ok=True)
    with JsonlWriter(partial) as writer:
        for record in records:
            writer.append(dict(record))
    os.replace(partial, path)
    return path
