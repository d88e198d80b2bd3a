"""The pipeline notebooks: stored clean, parameterised, and executable with small parameters."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from intraskill.report.build import MANIFEST_PATH, load_manifest, strip_progress
from intraskill.report.figures import figure_outputs
from intraskill.report.pagecheck import page_problems
from intraskill.report.site import cell_labels, export_notebooks, render_outputs

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
REPORT = {spec.name: spec for spec in load_manifest(NOTEBOOKS.parent / MANIFEST_PATH).notebooks}
ALL = sorted(NOTEBOOKS.glob("*.ipynb"))


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_stored_without_outputs_with_one_parameters_cell(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), f"{path.name} stored with outputs"
    tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and tagged[0] is code[0], f"{path.name}: the first code cell must be the parameters cell"
    for line in tagged[0].source.splitlines():
        assert ":" in line.split("=")[0] and "#" in line, f"{path.name}: parameters are type-hinted and commented: {line}"


QUICK_SKILL1 = REPORT["09_skill1"].overrides(quick=True)
EXECUTIONS = {
    "00_env_setup": {"scale": "small", "seed": 11, "expert_tasks": 10, "recall_tasks": 20},
    "01_cold_start": {"params_name": "ci"},
    "02_train_round": {"params_name": "ci"},  # a 2-step round of the random-init ci organism with the ci S₀
    # Gate A over S0 played by the teacher on the small store's 40 val tasks (the organism's validation reads records)
    "03_gate": {"params_name": "ci", "policy": "teacher", "seeds": "7", "samples": "1", "task_limit": 40,
                "truth_tasks": 8},
    "04_evaluate": {"limit": 6, "max_turns": 12},
    "05_behaviour": {"limit": 8, "samples": 500},
    "06_release_reanalysis": {"samples": 500},
    "07_co_evolve": REPORT["07_co_evolve"].overrides(quick=True),  # the report's quick build: one tiny ci round
    "08_controls": REPORT["08_controls"].overrides(quick=True),  # the report's quick build: a tiny ci matrix
    # the report's quick build (a Skill1 round on ci over the ci seed library), one step of it
    "09_skill1": {**QUICK_SKILL1, "overrides": f"{QUICK_SKILL1['overrides']}; round.rollout_steps=1"},
    "10_trl": {"steps": 1},  # the organism's warm start, one TRL GRPOTrainer step (needs the trl extra)
    # a complete matrix: the reader pilot's shipped records (the confirmatory one stays sealed until it finishes)
    "11_preregistered": {"records_dir": "data/results/reader/pilot", "arms": "coevolve,grpo", "seeds": 3},
}


def _page_problems(executed_dir: Path, name: str) -> list[str]:
    """What the page of ``executed_dir/<name>.ipynb`` shows, exported as the report build exports it (progress
    output stripped), that a reader must not see: a dict repr, a JSON dump, a bare value or path, an unformatted
    DataFrame, raw TeX or a traceback (:func:`~intraskill.report.pagecheck.page_problems`)."""
    notebook = json.loads((executed_dir / f"{name}.ipynb").read_text(encoding="utf-8"))
    strip_progress(notebook)
    (executed_dir / "page").mkdir()
    (executed_dir / "page" / f"{name}.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    export_notebooks(executed_dir / "page", executed_dir / "_site")
    return page_problems((executed_dir / "_site" / "notebooks" / f"{name}.html").read_text(encoding="utf-8"))


def _chinese_problems(executed: nbformat.NotebookNode) -> list[str]:
    """What the Chinese report pages would show wrong of the notebook's Chinese cells (``…-zh``): each cell's outputs
    as a Chinese page embeds them, checked like that page (an English table header or sentence is a problem)."""
    cells = {label: cell for label, cell in cell_labels(executed).items() if label.endswith("-zh")}
    body = "".join(render_outputs(cell, label) for label, cell in cells.items())
    return page_problems(f'<html lang="zh-CN"><body><main><h1>页</h1>{body}</main></body></html>')


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(EXECUTIONS))
def test_notebook_executes(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import papermill

    if name == "10_trl":
        pytest.importorskip("trl", reason="the trl extra is not installed (pip install 'intraskill[trl]')")
    monkeypatch.setenv("INTRASKILL_ROOT", str(NOTEBOOKS.parent))
    out = tmp_path / f"{name}.ipynb"
    parameters = dict(EXECUTIONS[name])
    if "run_root" in papermill.inspect_notebook(str(NOTEBOOKS / f"{name}.ipynb")):
        parameters["run_root"] = str(tmp_path / "runs")
    if name in ("01_cold_start", "02_train_round", "07_co_evolve"):
        parameters["out_dir"] = str(tmp_path / "out")
    if name == "08_controls":  # inside this test's run root: a matrix left in the clone's runs/ holds another plan
        parameters["out_dir"] = str(tmp_path / "runs" / "ci" / "controls")
    papermill.execute_notebook(str(NOTEBOOKS / f"{name}.ipynb"), str(out), parameters=parameters,
                               cwd=str(NOTEBOOKS), progress_bar=False, kernel_name="python3")
    executed = nbformat.read(out, as_version=4)
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert not _page_problems(tmp_path, name)
    assert not _chinese_problems(executed)
    for label in REPORT[name].figures if name in REPORT else ():  # what `make figures` publishes
        assert set(figure_outputs(out, label)) == {"svg", "png"}, label


@pytest.mark.e2e
@pytest.mark.parametrize("name", ["04_evaluate", "05_behaviour"])
def test_report_evaluation_without_a_run_says_so(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the report's parameters and no co-evolve run, 04 and 05 state that plainly (both languages) and
    evaluate nothing: no output anywhere names a stand-in."""
    import papermill

    from intraskill.pipeline.notebook import STAND_IN_MARK

    monkeypatch.setenv("INTRASKILL_ROOT", str(NOTEBOOKS.parent))
    absent = str(tmp_path / "co-evolve")
    parameters = {**REPORT[name].overrides(quick=True), "coevolve_dir": absent, "run_root": str(tmp_path / "runs")}
    out = tmp_path / f"{name}.ipynb"
    papermill.execute_notebook(str(NOTEBOOKS / f"{name}.ipynb"), str(out), parameters=parameters,
                               cwd=str(NOTEBOOKS), progress_bar=False, kernel_name="python3")
    executed = nbformat.read(out, as_version=4)
    texts = [str(value) for cell in executed.cells if cell.cell_type == "code" for output in cell.outputs
             for value in [output.get("text", ""), *output.get("data", {}).values()]]
    assert not any(STAND_IN_MARK in text for text in texts)
    notes = [text for text in texts if text.startswith(("**No co-evolve run", "**`"))]
    assert len(notes) == 2 and f"`{absent}`" in notes[0] and "协同演化" in notes[1]
    assert not _page_problems(tmp_path, name)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").glob("eval-4c-*"))


@pytest.mark.e2e
def test_the_preregistered_matrix_stays_sealed_until_complete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over records of a matrix missing a declared cell, every section of 11 shows the progress note in its
    language, and no number of an outcome."""
    import shutil

    import papermill

    monkeypatch.setenv("INTRASKILL_ROOT", str(NOTEBOOKS.parent))
    records = tmp_path / "pilot"
    shutil.copytree(NOTEBOOKS.parent / "data" / "results" / "reader" / "pilot", records)
    shutil.rmtree(records / "cells" / "grpo" / "seed-2")
    out = tmp_path / "11_preregistered.ipynb"
    papermill.execute_notebook(str(NOTEBOOKS / "11_preregistered.ipynb"), str(out),
                               parameters={"records_dir": str(records), "arms": "coevolve,grpo", "seeds": 3},
                               cwd=str(NOTEBOOKS), progress_bar=False, kernel_name="python3")
    executed = nbformat.read(out, as_version=4)
    labelled = cell_labels(executed)
    texts = {label: " ".join(str(v) for o in cell.outputs for v in o.get("data", {}).values())
             for label, cell in labelled.items() if label.startswith(("tbl-prereg", "fig-prereg"))}
    assert len(texts) == 18  # progress, H1, family, two figures, per seed, conditions, compute, curves; en and zh
    for label, text in texts.items():
        assert ("Sealed by the stopping rule" in text) if label.endswith("-en") else ("按停止规则封存" in text), label
        assert "5 of the 6 declared cells" in text or "6 个单元中已完成 5 个" in text, label
        assert "H1" not in text, label
        assert not any("image/png" in o.get("data", {}) for o in labelled[label].outputs), label
    assert not _page_problems(tmp_path, "11_preregistered")
    assert not _chinese_problems(executed)
