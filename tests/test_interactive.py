"""Interactive training curves (intraskill.plots.interactive): the panels drawn from a round's metrics, the
notebook and HTML outputs, and the static site that ships plotly.js once — rendered by headless Chromium
from a file on disk, offline."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml

from intraskill.plots.interactive import PLOTLY_MARKER, PLOTLY_SCRIPT, round_curves
from intraskill.report.site import render_static_site

STEPS = pd.DataFrame({
    "step": [1, 2, 3],
    "rollout/shopsim/reward_mean": [0.2, 0.4, 0.5], "rollout/shopsim/success_rate": [0.1, 0.3, 0.4],
    "rollout/shopsim/train_group_count": [2, 2, 2], "train/entropy_loss": [1.2, 1.1, 1.0],
    "train/pg_clipfrac": [0.0, 0.01, 0.02], "train/grad_norm": [0.5, 0.7, 0.6], "train/ppo_kl": [0.0, 1e-3, 2e-3],
    "time/rollout_s": [10.0, 11.0, 9.0], "time/train_s": [2.0, 2.1, 2.2],
    "skill1/library_size": [None, None, None],
})


def test_panels_follow_the_metrics_present() -> None:
    figure = round_curves(STEPS).figure
    titles = [annotation.text for annotation in figure.layout.annotations]
    assert titles == ["Reward and success", "Groups: trained and dropped", "Token entropy", "Clipped fraction",
                      "Gradient norm", "KL", "Seconds per phase"]  # no Skill1 panel: its column is empty
    assert [trace.name for trace in figure.data] == [c for c in STEPS.columns if c not in ("step",
                                                                                           "skill1/library_size")]
    success = next(trace for trace in figure.data if trace.name == "rollout/shopsim/success_rate")
    assert list(success.x) == [1, 2, 3] and list(success.y) == [0.1, 0.3, 0.4]
    assert figure.layout.hovermode == "x unified"
    chinese = round_curves(STEPS, language="zh").figure
    assert chinese.layout.annotations[0].text == "奖励与成功率" and chinese.layout.xaxis7.title.text == "rollout 步"
    with pytest.raises(ValueError, match="none of the panels"):
        round_curves(STEPS[["step", "skill1/library_size"]])
    with pytest.raises(KeyError, match="'step'"):
        round_curves(STEPS.drop(columns="step"))


def test_outputs_for_notebooks_and_pages() -> None:
    shown = round_curves(STEPS)
    bundle = shown._repr_mimebundle_()
    assert set(bundle) == {"application/vnd.plotly.v1+json", "text/html"}
    assert len(bundle["application/vnd.plotly.v1+json"]["data"]) == 9
    assert PLOTLY_MARKER in bundle["text/html"] and len(bundle["text/html"]) < 100_000  # plotly.js not inlined


def _site_with_curves(root: Path) -> Path:
    (root / "report" / "en").mkdir(parents=True)
    (root / "_quarto.yml").write_text(yaml.safe_dump({
        "project": {"type": "website", "render": ["report/en/a.qmd"]},
        "website": {"title": "T", "navbar": {"left": [{"href": "report/en/a.qmd", "text": "A"}]}}}),
        encoding="utf-8")
    (root / "report" / "en" / "a.qmd").write_text(
        "---\ntitle: A\nlang: en\n---\n\n{{< embed ../../runs/report/notebooks/nb.ipynb#fig-curves >}}\n",
        encoding="utf-8")
    executed = root / "runs" / "report" / "notebooks"
    executed.mkdir(parents=True)
    cell = nbformat.v4.new_code_cell("#| label: fig-curves\nround_curves(steps)", outputs=[
        nbformat.v4.new_output("display_data", data=round_curves(STEPS)._repr_mimebundle_())])
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), executed / "nb.ipynb")
    render_static_site(root, executed, root / "_site")
    return root / "_site"


def test_the_static_site_ships_plotly_once_and_pages_load_it(tmp_path: Path) -> None:
    site = _site_with_curves(tmp_path)
    page = (site / "report" / "en" / "a.html").read_text(encoding="utf-8")
    assert f'<script src="../../assets/{PLOTLY_SCRIPT}"></script>' in page and PLOTLY_MARKER in page
    assert (site / "assets" / PLOTLY_SCRIPT).stat().st_size > 1_000_000
    notebook = (site / "notebooks" / "nb.html").read_text(encoding="utf-8")
    assert f'<script src="../assets/{PLOTLY_SCRIPT}"></script>' in notebook


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not on PATH (apt-get install chromium)")
def test_chromium_draws_the_curves_offline(tmp_path: Path) -> None:
    site = _site_with_curves(tmp_path)
    command = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000",
               "--dump-dom", (site / "report" / "en" / "a.html").as_uri()]
    dom = subprocess.run(command, capture_output=True, text=True, timeout=90, check=True).stdout
    assert "main-svg" in dom and dom.count('class="scatterlayer') >= 7  # plotly drew every panel's series
