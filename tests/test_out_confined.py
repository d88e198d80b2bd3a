"""Every verb's ``--out`` stays inside the run root unless ``--allow-outside-run-root`` says otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from intraskill.cli import app
from intraskill.params import load_params
from intraskill.paths import project_root

VERBS = {
    "eval": ["eval", "--split", "val", "--skills", "none"],
    "round": ["round"],
    "co-evolve": ["co-evolve", "--rounds", "1"],
    "experiment": ["experiment"],
    "cold-start": ["cold-start"],
    "gate run": ["gate", "run", "--round-dir", "{tmp}"],
    "gate-a": ["gate", "gate-a", "--draft", "{tmp}/params.yaml", "--checkpoint-id", "x"],
    "warmstart": ["warmstart"],
    "warmstart-skill1": ["warmstart-skill1"],
    "slime-args": ["slime-args"],
    "trl": ["trl"],
}
"""Verbs with ``--params`` (the run root is ``experiment.run_root``)."""
BARE_VERBS = {
    "compare": ["compare", "{tmp}", "{tmp}"],
    "export": ["export", "--run", "{tmp}"],
    "env build": ["env", "build"],
}
"""Verbs without params (the run root is the default ``runs/``)."""


@pytest.fixture
def params_file(tmp_path: Path) -> Path:
    data = load_params(project_root() / "params" / "ci.yaml").model_dump(mode="json")
    data["experiment"]["run_root"] = str(tmp_path / "runs")
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _refused(arguments: list[str], escaped: Path, root: Path) -> None:
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --out ") and f"outside {root.resolve()}" in lines[0], lines
    assert not escaped.exists()


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_an_out_that_climbs_out_of_the_run_root_is_refused(tmp_path: Path, params_file: Path, verb: str) -> None:
    escaped = tmp_path / "escaped"
    arguments = [part.format(tmp=tmp_path) for part in VERBS[verb]]
    _refused([*arguments, "--params", str(params_file), "--out", str(tmp_path / "runs" / ".." / "escaped")],
             escaped, tmp_path / "runs")


@pytest.mark.parametrize("verb", sorted(BARE_VERBS))
def test_verbs_without_params_keep_out_inside_the_default_run_root(tmp_path: Path, verb: str) -> None:
    escaped = tmp_path / "escaped"
    arguments = [part.format(tmp=tmp_path) for part in BARE_VERBS[verb]]
    _refused([*arguments, "--out", str(escaped)], escaped, project_root() / "runs")


def test_a_link_out_of_the_run_root_is_refused_and_the_flag_allows_it(tmp_path: Path, params_file: Path,
                                                                     small_store_root: Path) -> None:
    (tmp_path / "runs" / "store").mkdir(parents=True)
    (tmp_path / "runs" / "store" / "small-11").symlink_to(small_store_root, target_is_directory=True)
    (tmp_path / "runs" / "link").symlink_to(tmp_path, target_is_directory=True)
    run = tmp_path / "runs" / "link" / "escaped"
    _refused(["eval", "--params", str(params_file), "--split", "val", "--skills", "none", "--out", str(run)],
             tmp_path / "escaped", tmp_path / "runs")
    allowed = CliRunner().invoke(app, ["eval", "--params", str(params_file), "--split", "val", "--skills", "none",
                                       "--out", str(run), "--allow-outside-run-root", "--set", "model.spec=expert",
                                       "--set", "model.checkpoint=null", "--limit", "1", "--no-progress"])
    assert allowed.exit_code == 0, allowed.output
    assert (tmp_path / "escaped" / "plan.json").is_file()


def test_report_figures_stay_inside_the_project(tmp_path: Path) -> None:
    _refused(["report", "figures", "--root", str(project_root()), "--out", str(tmp_path / "figures")],
             tmp_path / "figures", project_root())
