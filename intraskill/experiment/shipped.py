"""A control matrix as shipped records (``data/results/``), and the matrices a page can show.

:func:`ship_matrix` writes a matrix directory's records without its training runs or episode text: the plan
(``matrix.json``), ``matrix_summary.json``, the shared warm start's, every cell's and every deployment baseline's
headline records (``shared/warmstart.json``, ``cells/<arm>/seed-<k>/cell.json``,
``baselines/seed-<k>/baseline.json``) and, in each test run's own directory, its
per-task records (``tasks.jsonl``, :mod:`intraskill.evaluate.task_records`). :func:`~intraskill.experiment.results.load_matrix`
reads the shipped directory as it reads the live one, so every figure, table and statement is the same analysis.

A matrix given a records folder (``run_matrix(..., records_dir=...)``, ``intraskill experiment --records``) keeps
its records there as it goes: :func:`ship_start`, :func:`ship_cell` and :func:`ship_baseline` write each part
once it is final, and :func:`restore_records` puts the finished parts back into a fresh matrix directory, so an
experiment longer than one machine's life resumes from the records alone (a restored cell is not re-run; its
checkpoints are gone, which is why ``grpo`` and ``coevolve`` cells are written only with their seed's baselines).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from intraskill.evaluate.task_records import run_task_records, write_task_records
from intraskill.experiment.records import CellResult, TestRun
from intraskill.experiment.results import MatrixResult, load_matrix
from intraskill.jsonl import write_json
from intraskill.layout import MatrixDir
from intraskill.params import FamilyParams

if TYPE_CHECKING:
    import pandas as pd

YOUR_RUN = "your run"
SHIPPED = "shipped records"
"""The two sources of a page's matrix: the user's own run under ``runs/`` and the records in ``data/results/``."""


def ship_matrix(matrix_dir: str | Path, target: str | Path, family: FamilyParams | None = None) -> MatrixResult:
    """Write the finished part of ``matrix_dir`` as records into ``target`` (replacing the records there) and
    return the matrix loaded back from them, its summary read with the declared ``family`` (default:
    ``matrix.family``'s defaults)."""
    source, out = Path(matrix_dir), Path(target)
    load_matrix(source)  # refuses what is not a readable matrix before anything is replaced
    if out.resolve() == source.resolve():
        raise ValueError(f"ship: target {out} is the matrix directory itself")
    shipped_dir = MatrixDir(out)
    for folder in (shipped_dir.cells, shipped_dir.shared.root, shipped_dir.baselines):
        shutil.rmtree(folder, ignore_errors=True)
    shipped_dir.plan.unlink(missing_ok=True)
    ship_start(source, out)
    copy_finished(source, out)
    shipped = load_matrix(out, family=family)
    write_json(shipped_dir.summary, shipped.to_dict(), indent=1)
    return shipped


def ship_start(matrix_dir: Path, target: Path) -> None:
    """The plan and the shared warm start's test runs (``matrix.json``, ``shared/warmstart.json`` and their
    per-task records)."""
    source, out = MatrixDir(matrix_dir), MatrixDir(target)
    runs = [TestRun.from_dict(run) for run in json.loads(source.warmstart.read_text(encoding="utf-8")).values()]
    _ship_runs(matrix_dir, target, runs)
    _copy_last(source.warmstart, out.warmstart)
    _copy_last(source.plan, out.plan)


def ship_cell(matrix_dir: Path, target: Path, name: str) -> None:
    """One finished cell (``cells/<arm>/seed-<k>``): its test runs' per-task records, final bank and final
    library, and last its ``cell.json`` (whose presence marks the cell finished)."""
    source, out = MatrixDir(matrix_dir).cell(name), MatrixDir(target).cell(name)
    result = CellResult.from_dict(json.loads(source.result.read_text(encoding="utf-8")))
    _ship_runs(matrix_dir, target, result.tests.values())
    for path in (source.final_skillbank, source.final_library):
        if path.is_file():
            _copy_last(path, out.root / path.name)
    _copy_last(source.result, out.result)


def ship_baseline(matrix_dir: Path, target: Path, seed_index: int) -> None:
    """One seed's deployment baselines: their runs' per-task records, then ``baseline.json``."""
    source, out = MatrixDir(matrix_dir).baseline(seed_index), MatrixDir(target).baseline(seed_index)
    record = json.loads(source.record.read_text(encoding="utf-8"))
    _ship_runs(matrix_dir, target, (TestRun.from_dict(run) for run in record["tests"].values()))
    _copy_last(source.record, out.record)


def copy_finished(source_dir: Path, target_dir: Path) -> list[str]:
    """Copy the finished cells and baselines of ``source_dir`` that ``target_dir`` lacks into it as records (no
    checkpoints, no traces), the source's plan first where the target has none; returns the cells copied.

    Both ways of a records folder: shipping a matrix into it, and restoring its records into a fresh matrix
    directory (whose own plan the caller then checks against the restored one). Two plans with different
    fingerprints are refused."""
    source, target = MatrixDir(source_dir), MatrixDir(target_dir)
    if not source.plan.is_file():
        return []
    if not target.plan.is_file():
        _copy_last(source.plan, target.plan)
    elif _fingerprint(target.plan) != _fingerprint(source.plan):
        raise ValueError(f"{source_dir} and {target_dir} hold different matrix plans: keep the records of one "
                         "experiment in one folder")
    copied = []
    for path in source.cell_results():
        name = path.parent.relative_to(source.cells).as_posix()
        if not target.cell(name).result.is_file():
            ship_cell(source_dir, target_dir, name)
            copied.append(name)
    for path in source.baseline_records():
        if not (target_dir / path.relative_to(source_dir)).is_file():
            ship_baseline(source_dir, target_dir, json.loads(path.read_text(encoding="utf-8"))["seed_index"])
    return copied


def _ship_runs(source: Path, target: Path, runs: Iterable[TestRun]) -> None:
    for run_dir in dict.fromkeys(run.run_dir for run in runs):
        write_task_records(run_task_records(source / run_dir), target / run_dir)


def _copy_last(path: Path, target: Path) -> None:
    """Copy ``path`` to ``target`` atomically (a record that marks a part finished is written last)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.copying")
    shutil.copyfile(path, staging)
    staging.replace(target)


def _fingerprint(plan: Path) -> str | None:
    return json.loads(plan.read_text(encoding="utf-8")).get("fingerprint")


def matrix_sources(live_dir: str | Path | None, shipped_dir: str | Path | None, arms: list[str] | None = None,
                   seeds: int | None = None, *, family: FamilyParams | None = None) -> dict[str, MatrixResult]:
    """The matrices there are to show, the user's own run first: :data:`YOUR_RUN` from ``live_dir`` and
    :data:`SHIPPED` from ``shipped_dir``, each where it holds a matrix plan (``arms`` / ``seeds`` restrict the
    live run as :func:`load_matrix` does; shipped records are shown whole); both read with ``family``."""
    sources = {}
    if live_dir and MatrixDir(live_dir).plan.is_file():
        sources[YOUR_RUN] = load_matrix(live_dir, arms, seeds, family=family)
    if shipped_dir and MatrixDir(shipped_dir).plan.is_file():
        sources[SHIPPED] = load_matrix(shipped_dir, family=family)
    return sources


def sources_table(sources: dict[str, MatrixResult]) -> pd.DataFrame:
    """One row per source and arm: cells, rounds and the deployed test success (mean over seeds), so a user's
    own run reads beside the shipped one."""
    # deferred: pandas is heavy to import and only the frame needs it
    import pandas as pd

    rows = []
    for source, result in sources.items():
        finals = result.finals()
        deployed = finals[finals.condition == "deployed"].groupby("arm", sort=False)["success"].mean()
        for arm in result.arms:
            rows.append({"source": source, "directory": str(result.out_dir), "arm": arm,
                         "seeds": sum(c.arm == arm for c in result.cells), "rounds": result.plan["rounds"],
                         "deployed_success": deployed.get(arm)})
    return pd.DataFrame(rows, columns=["source", "directory", "arm", "seeds", "rounds", "deployed_success"])
