"""Publication figures (intraskill.report.figures, `make figures`): the manifest's `figures:` entries, and the
labelled outputs of an executed notebook written byte for byte as the files save_figure writes, through the CLI."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import nbformat
import pytest
import yaml
from typer.testing import CliRunner

from intraskill import plots
from intraskill.cli import app
from intraskill.paths import project_root
from intraskill.report.build import MANIFEST_PATH, load_manifest
from intraskill.report.figures import figure_outputs, publish_figures

STEPS = [{"step": s, "rollout/shopsim/reward_mean": r, "rollout/shopsim/success_rate": r / 2}
         for s, r in ((1, 0.2), (2, 0.4), (3, 0.5))]


def _figure(language: str):
    return plots.training_dynamics(STEPS, metrics=("rollout/shopsim/reward_mean", "rollout/shopsim/success_rate"),
                                   language=language)


def _executed(folder: Path) -> Path:
    """An executed notebook whose labelled cells hold the outputs Jupyter shows for our figures."""
    cells = []
    for language in ("en", "zh"):
        figure = _figure(language)
        cells.append(nbformat.v4.new_code_cell(f"#| label: fig-a-{language}\nfigure", outputs=[
            nbformat.v4.new_output("display_data", data={"image/svg+xml": figure._repr_svg_(),
                                                         "image/png": base64.b64encode(figure._repr_png_()).decode(),
                                                         "text/plain": "<Figure>"})]))
    cells.append(nbformat.v4.new_code_cell("#| label: tbl-b\n1", outputs=[
        nbformat.v4.new_output("execute_result", data={"text/plain": "1"}, execution_count=1)]))
    folder.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), folder / "nb.ipynb")
    return folder / "nb.ipynb"


@pytest.mark.e2e
def test_figures_are_the_bytes_save_figure_writes(tmp_path: Path) -> None:
    notebook = _executed(tmp_path / "executed")
    spec = load_manifest(project_root() / MANIFEST_PATH).notebooks[0].__class__(
        "nb", figures={"fig-a-en": "demo/a", "fig-a-zh": "demo/a-zh"})
    published = publish_figures([spec], notebook.parent, tmp_path / "figures", echo=lambda line: None)
    assert [(p.label, p.name) for p in published] == [("fig-a-en", "demo/a"), ("fig-a-zh", "demo/a-zh")]
    for language, name in (("en", "a"), ("zh", "a-zh")):
        svg, png = plots.save_figure(_figure(language), name, tmp_path / "saved")
        assert (tmp_path / "figures" / "demo" / f"{name}.svg").read_bytes() == svg.read_bytes()
        assert (tmp_path / "figures" / "demo" / f"{name}.png").read_bytes() == png.read_bytes()
    with pytest.raises(ValueError, match="cell 'tbl-b' has no figure output"):
        figure_outputs(notebook, "tbl-b")
    with pytest.raises(ValueError, match="no cell labelled 'fig-c'"):
        figure_outputs(notebook, "fig-c")
    notes: list[str] = []
    assert publish_figures([spec.__class__("absent", figures={"x": "y"})], notebook.parent, tmp_path / "f",
                           echo=notes.append) == [] and "has not been executed" in notes[0]


def test_the_manifest_names_figures_of_labelled_cells(tmp_path: Path) -> None:
    manifest = load_manifest(project_root() / MANIFEST_PATH)
    named = {spec.name: spec.figures for spec in manifest.notebooks if spec.figures}
    assert {"02_train_round", "08_controls", "09_skill1"} <= set(named)
    for name, figures in named.items():
        source = nbformat.read(project_root() / "notebooks" / f"{name}.ipynb", as_version=4)
        labels = {line.split(":", 1)[1].strip() for cell in source.cells for line in cell.source.splitlines()
                  if line.startswith("#| label:")}
        assert set(figures) <= labels, name
    base = yaml.safe_load((project_root() / MANIFEST_PATH).read_text(encoding="utf-8"))
    for figures, message in (({"fig-a": "../out"}, "lower-case path segments"), (["x"], "mapping"),
                             ({"fig-a": "x", "fig-b": "x"}, "same name")):
        bad = tmp_path / "bad.yaml"
        bad.write_text(yaml.safe_dump({**base, "notebooks": [{"name": "nb", "figures": figures}]}), encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            load_manifest(bad)


@pytest.mark.e2e
def test_the_command_publishes_without_executing(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "report").mkdir(parents=True)
    (root / MANIFEST_PATH).write_text(yaml.safe_dump({"notebooks": [
        {"name": "nb", "figures": {"fig-a-en": "demo/a"}}, {"name": "plain"}]}), encoding="utf-8")
    _executed(root / "runs" / "report" / "notebooks")
    result = CliRunner().invoke(app, ["report", "figures", "--root", str(root), "--no-execute", "--json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert [f["name"] for f in printed["figures"]] == ["demo/a"] and printed["failed"] == []
    assert sorted(p.name for p in (root / "figures" / "demo").iterdir()) == ["a.png", "a.svg"]
