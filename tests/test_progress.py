"""A pre-registered matrix's progress, read from which records exist and never from what they hold, and the
declared analysis's tables on a complete matrix (the reader pilot's shipped records)."""

from __future__ import annotations

from pathlib import Path

import pytest

from intraskill.experiment.preregistered import (
    claims_table,
    companions,
    deployment_table,
    family_contrasts,
    per_seed_table,
)
from intraskill.experiment.progress import MatrixIncomplete, matrix_progress, matrix_timeline
from intraskill.experiment.results import deployment_effect, load_matrix
from intraskill.layout import MatrixDir
from intraskill.params import load_params
from intraskill.paths import project_root
from intraskill.plots import prose

ARMS = ("coevolve", "grpo", "fixed")


def _finish(out: Path, cells: list[tuple[str, int]], baselines: list[int]) -> None:
    """Records that exist but hold nothing readable: progress must not open them."""
    matrix = MatrixDir(out)
    for arm, seed in cells:
        path = matrix.cell(f"{arm}/seed-{seed}").result
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\x00 not a record")
    for seed in baselines:
        path = matrix.baseline(seed).record
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\x00")


def test_progress_counts_finished_parts_without_reading_them(tmp_path: Path) -> None:
    assert matrix_progress(tmp_path / "absent", ARMS, 2).missing[:2] == ["coevolve/seed-0", "coevolve/seed-1"]
    _finish(tmp_path, [("coevolve", 0), ("grpo", 0), ("fixed", 0), ("fixed", 1), ("grpo", 5)], [0])
    progress = matrix_progress(tmp_path, ARMS, 2)
    assert progress.missing == ["coevolve/seed-1", "grpo/seed-1", "baselines/seed-1"]  # seed 5 is not declared
    assert not progress.complete
    with pytest.raises(MatrixIncomplete, match=r"3 declared part\(s\) not finished \(coevolve/seed-1, grpo/seed-1, "
                                               r"baselines/seed-1\); the stopping rule"):
        progress.require_complete()
    table = progress.table()
    assert list(table.training_arm) == [*ARMS, "baselines"] and list(table.finished) == [1, 1, 2, 1]
    assert list(table.finished_seeds) == ["0", "0", "0, 1", "0"]
    _finish(tmp_path, [("coevolve", 1), ("grpo", 1)], [1])
    assert matrix_progress(tmp_path, ARMS, 2).complete
    # without both coevolve and grpo the matrix writes no baselines, so none are missing
    assert matrix_progress(tmp_path, ("fixed",), 2).complete


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_sealed_matrix_is_worded_without_an_outcome(tmp_path: Path, language: str) -> None:
    _finish(tmp_path, [("coevolve", 0)], [])
    text = prose.matrix_sealed(matrix_progress(tmp_path, ARMS, 2), language)
    assert ("1 of the 6 declared cells" in text) if language == "en" else ("6 个单元中已完成 1 个" in text)
    assert "%" not in text and "points" not in text


def test_the_declared_tables_of_a_complete_matrix() -> None:
    pilot = project_root() / "data" / "results" / "reader" / "pilot"
    family = load_params(project_root() / "params" / "organism_reader.yaml").matrix.family
    assert matrix_progress(pilot, ("coevolve", "grpo"), 3).complete
    result = load_matrix(pilot, ["coevolve", "grpo"], 3, family=family)
    rows = claims_table(companions(result))
    assert list(rows.comparison) == ["coevolve-grpo", "coevolve-grpo", "coevolve-grpo+s0",
                                     "coevolve-grpo+coevolve_bank"]
    assert list(rows.condition) == ["deployed", "bare", "deployed", "deployed"]
    assert list(rows.family_role) == ["primary", "secondary", "exploratory", "exploratory"]
    primary = rows.iloc[0]
    # the pilot's published per-seed differences (amendment 3): −6.5, −2.5, −7.5 points
    seeds = per_seed_table(companions(result))
    assert list(seeds.columns) == ["comparison", "condition", 0, 1, 2]
    assert seeds.iloc[0, 2:].tolist() == pytest.approx([-0.065, -0.025, -0.075])
    assert primary.contrast == pytest.approx(-0.055) == primary.contrast90
    assert primary.ci_low < primary.ci90_low < primary.ci90_high < primary.ci_high
    assert primary.verdict == "unresolved" and rows.ci90_low.iloc[1:].isna().all()
    assert list(claims_table(family_contrasts(result)).comparison) == ["coevolve-grpo"]
    assert "**unresolved**" in prose.primary_claim(companions(result)[0], "en")
    assert "**未分辨**" in prose.primary_claim(companions(result)[0], "zh")


def test_what_an_arm_deploys_adds_to_its_own_final_checkpoint() -> None:
    pilot = load_matrix(project_root() / "data" / "results" / "reader" / "pilot", ["coevolve", "grpo"], 3)
    table = deployment_table(deployment_effect(pilot, "coevolve"))
    assert list(table.seed_index) == ["0", "1", "2", "all"]
    # per seed: the final bank on the pilot's 200 dev tasks against the same checkpoint bare
    effect = table.deployment_effect
    assert effect.tolist() == pytest.approx([-0.005, 0.055, 0.015, 0.065 / 3])
    assert effect.tolist() == pytest.approx((table.deployed_success - table.bare_success).tolist())
    assert (table.ci_low <= effect).all() and (effect <= table.ci_high).all()
    assert deployment_table(deployment_effect(pilot, "grpo")).deployment_effect.abs().max() == 0  # grpo: bare
    with pytest.raises(ValueError, match="'skill1' has no finished cell"):
        deployment_effect(pilot, "skill1")


def test_the_command_says_how_far_a_matrix_has_come_and_reads_nothing(tmp_path: Path) -> None:
    """``intraskill experiment --status`` runs no cell and opens no record (these hold no readable one)."""
    import json

    from typer.testing import CliRunner

    from intraskill.cli import app

    _finish(tmp_path, [("coevolve", 0), ("grpo", 0), ("grpo", 1)], [0])
    args = ["experiment", "--params", str(project_root() / "params" / "ci.yaml"), "--arms", "coevolve,grpo",
            "--seeds", "2", "--out", str(tmp_path), "--allow-outside-run-root", "--status"]
    cli = CliRunner().invoke(app, [*args, "--json"])
    assert cli.exit_code == 0, cli.output
    status = json.loads(cli.stdout)
    assert status["complete"] is False and status["missing"] == ["coevolve/seed-1", "baselines/seed-1"]
    assert [row["finished"] for row in status["arms"]] == [1, 2, 1] and status["timeline"]["stages"] == 0
    assert status["seconds_left"] is None  # no stage timed: no pace to go by
    text = CliRunner().invoke(app, args).stdout
    assert "3 of 4 declared cells finished; 0 stages ran 0.00 h" in text and "grpo        2 / 2  seeds 0, 1" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baselines", "cells"]  # nothing written


def test_the_timeline_counts_wall_time_once_and_leaves_gaps_out(tmp_path: Path) -> None:
    """Two cells side by side (10:00–10:10 and 10:05–10:20), a session gap, then a baseline 11:00–11:05: 25 min
    busy, 30 min of stages, 65 min from first start to last finish."""
    import json

    def stage(folder: Path, finished_at: str, seconds: float) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "timings.jsonl").open("a", encoding="utf-8") as out:
            out.write(json.dumps({"finished_at": f"2026-12-07T{finished_at}+00:00", "seconds": seconds}) + "\n")

    stage(tmp_path / "cells" / "grpo" / "seed-0", "10:04:00", 240.0)
    stage(tmp_path / "cells" / "grpo" / "seed-0", "10:10:00", 360.0)
    stage(tmp_path / "cells" / "coevolve" / "seed-0", "10:20:00", 900.0)
    stage(tmp_path / "baselines" / "seed-0", "11:05:00", 300.0)
    timeline = matrix_timeline(tmp_path)
    assert (timeline.stages, timeline.busy_seconds, timeline.stage_seconds, timeline.span_seconds) == \
        (4, 25 * 60, 30 * 60, 65 * 60)
    assert timeline.to_dict()["first_start"] == "2026-12-07T10:00:00+00:00"
    # two of four declared cells finished in 25 busy minutes: the other two need about as long again
    _finish(tmp_path, [("grpo", 0), ("coevolve", 0)], [])
    progress = matrix_progress(tmp_path, ("coevolve", "grpo"), 2)
    assert progress.seconds_left(timeline) == 25 * 60
    assert matrix_progress(tmp_path / "absent", ("grpo",), 1).seconds_left(timeline) is None
    assert matrix_timeline(tmp_path / "absent").to_dict() == {
        "stages": 0, "stage_seconds": 0.0, "busy_seconds": 0.0, "span_seconds": 0.0, "first_start": None,
        "last_finish": None}
