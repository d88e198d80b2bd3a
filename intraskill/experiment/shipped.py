"""A control matrix as shipped records (``data/results/``), and the matrices a page can show.

:func:`ship_matrix` writes a matrix directory's records without its training runs or episode text: the plan
(``matrix.json``), ``matrix_summary.json``, the shared warm start's, every cell's and every deployment baseline's
headline records (``shared/warmstart.json``, ``cells/<arm>/seed-<k>/cell.json``,
``baselines/seed-<k>/baseline.json``) and, in each test run's own directory, its
per-task records (``tasks.jsonl``, :mod:`intraskill.evaluate.task_records`). :func:`~intraskill.experiment.results.load_matrix`
reads the shipped directory as it reads the live one, so every figure, table and statement is the same analysis.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from intraskill.evaluate.task_records import run_task_records, write_task_records
from intraskill.experiment.results import MatrixResult, load_matrix
from intraskill.jsonl import write_json
from intraskill.layout import MatrixDir
from intraskill.params import FamilyParams

if TYPE_CHECKING:
    import pandas as pd

YOUR_RUN = "your run"
SHIPPED = "shipped records"
"""The two sources of a page's matrix: the user's own run under ``runs/`` and the records in ``data/results/``."""


def ship_matrix(matrix_dir: str | Path, target: str | Path) -> MatrixResult:
    """Write the finished part of ``matrix_dir`` as records into ``target`` (replacing the records there) and
    return the matrix loaded back from them."""
    source, out = Path(matrix_dir), Path(target)
    result = load_matrix(source)
    if out.resolve() == source.resolve():
        raise ValueError(f"ship: target {out} is the matrix directory itself")
    shipped_dir = MatrixDir(out)
    for folder in (shipped_dir.cells, shipped_dir.shared.root, shipped_dir.baselines):
        shutil.rmtree(folder, ignore_errors=True)
    for path in (path for pattern in MatrixDir.RECORDS for path in sorted(source.glob(pattern))):
        (out / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, out / path.relative_to(source))
    runs = [*result.warmstart.values(), *(run for cell in (*result.cells, *result.baselines)
                                          for run in cell.tests.values())]
    for run_dir in dict.fromkeys(run.run_dir for run in runs):
        write_task_records(run_task_records(source / run_dir), out / run_dir)
    shipped = load_matrix(out)
    write_json(shipped_dir.summary, shipped.to_dict(), indent=1)
    return shipped


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
                         "deployed success": deployed.get(arm)})
    return pd.DataFrame(rows, columns=["source", "directory", "arm", "seeds", "rounds", "deployed success"])


def sources_sentence(sources: dict[str, MatrixResult]) -> str:
    """Which matrix the figures and tables come from, in one Markdown sentence (the first of ``sources``)."""
    (source, result), *others = sources.items()
    sentence = (f"The figures and tables below come from **{source}** (`{result.out_dir}`: {len(result.cells)} "
                f"cells, {result.plan['rounds']} round(s) each)")
    beside = [f"the {name} (`{other.out_dir}`)" for name, other in others]
    return sentence + (f"; {' and '.join(beside)} are shown beside them in this table." if beside else ".")
