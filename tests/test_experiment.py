"""The control experiment: arms as overlays, a real tiny matrix (two arms × two seeds × one round on the ci
organism), its summary and declared family, resume cell by cell, plan refusal and the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from intraskill.cli import app
from intraskill.experiment import matrix as matrix_module
from intraskill.experiment.arms import CellSeeds, cell_params, overlay_fields
from intraskill.experiment.matrix import MatrixPlanMismatchError, run_matrix
from intraskill.experiment.results import comparison_pairs, load_matrix
from intraskill.experiment.shipped import SHIPPED, YOUR_RUN, matrix_sources, ship_matrix, sources_table
from intraskill.gate.design import load_mask_assignment, mask_draw
from intraskill.gate.ols import RankDeficientDesignError, check_design_rank
from intraskill.params import (
    BUILTIN_ARMS,
    MatrixParams,
    Params,
    ParamsError,
    load_params,
    params_from_dict,
    plan_dump,
    with_overrides,
)
from intraskill.paths import project_root, store_dir
from intraskill.skills.bank import SkillBank, load_skillbank, save_skillbank

SKILL_FIELDS = {"round.q", "round.rho_min", "round.rho_max", "round.full_skill_retry"}


def matrix_params(tmp_path: Path, **matrix: object) -> Params:
    """``params/ci.yaml`` (its S₀: two chunks with stated α) with one rollout step per round, 8 val tasks and 6 test
    tasks."""
    data = load_params(project_root() / "params" / "ci.yaml").model_dump(mode="json")
    data["experiment"]["run_root"] = str(tmp_path / "runs")
    data["round"].update({"n_samples_per_prompt": 2, "rollout_batch_size": 1, "over_sampling_batch_size": 2,
                          "rollout_steps": 1, "val_tasks": 8})
    data["sampling"].update({"max_turns": 4, "max_tokens_per_turn": 32})
    data["matrix"] = {"arms": ["coevolve", "grpo"], "seeds": 2, "rounds": 1, "test_tasks": 6, **matrix}
    return params_from_dict(data)


def trace_lines(root: Path) -> dict[Path, int]:
    return {p: p.read_text(encoding="utf-8").count("\n") for p in root.rglob("traces.jsonl")}


def counted(cell: Path) -> dict[str, int]:
    """A cell's episodes and generated tokens counted from its trace files, by kind (independently of its
    records)."""
    kinds = {"rollout": "round-*/steps/step-*/traces.jsonl", "retry": "round-*/retries.jsonl",
             "gate": "round-*/gate/traces.jsonl", "val": "round-*/val-*/traces.jsonl", "test": "test-*/traces.jsonl"}
    counts = {}
    for kind, pattern in kinds.items():
        traces = [json.loads(line) for path in cell.glob(pattern) for line in path.read_text().splitlines()]
        counts[f"{kind}_episodes"] = len(traces)
        counts[f"{kind}_tokens"] = sum(t["tokens"]["completion"] for t in traces)
    return counts


def assert_compute_table(result: object, out: Path) -> None:
    """The compute table per arm is the mean over seeds of what each cell's trace files hold."""
    table = result.compute_by_arm()
    for arm in result.arms:
        cells = [counted(out / "cells" / arm / f"seed-{c.seed_index}") for c in result.cells if c.arm == arm]
        mean = {key: sum(c[key] for c in cells) / len(cells) for key in cells[0]}
        row = table.loc[arm]
        assert row.seeds == len(cells)
        assert row.generated_episodes == mean["rollout_episodes"] + mean["retry_episodes"] > 0
        assert row.generated_tokens == mean["rollout_tokens"] + mean["retry_tokens"] > 0
        for kind in ("retry", "gate", "val", "test"):
            assert (row[f"{kind}_episodes"], row[f"{kind}_tokens"]) == (mean[f"{kind}_episodes"],
                                                                       mean[f"{kind}_tokens"]), (arm, kind)
        assert 0 < row.trained_episodes <= row.generated_episodes
    assert table.loc["grpo"].retry_episodes == 0 and table.loc["grpo"].gate_episodes == 0
    assert table.loc["coevolve"].gate_episodes > 0
    summary = json.loads((out / "matrix_summary.json").read_text())
    assert summary["compute"]["grpo"]["test_episodes"] == table.loc["grpo"].test_episodes


def test_arms_differ_from_each_other_only_in_how_skills_enter_and_seeds_only_in_seeds() -> None:
    base = load_params(project_root() / "params" / "organism.yaml")
    method = cell_params(base, BUILTIN_ARMS["coevolve"], 0)
    assert set(overlay_fields(base, method)) <= {f"matrix.{f}" for f in MatrixParams.model_fields}
    for name, arm in BUILTIN_ARMS.items():
        fields = set(overlay_fields(method, cell_params(base, arm, 0)))
        assert fields <= SKILL_FIELDS | ({"round.method", "round.skillbank"} if arm.method == "skill1" else set()), \
            (name, fields)
        assert bool(fields) == (name != "coevolve")
    assert overlay_fields(method, cell_params(base, BUILTIN_ARMS["coevolve"], 2)) == \
        ["experiment.seed", "round.curriculum_seed"]
    seeds = CellSeeds.derive(base, 2)
    assert (seeds.experiment, seeds.curriculum) == (base.experiment.seed + 2, base.round.curriculum_seed + 2)
    fixed = cell_params(base, BUILTIN_ARMS["fixed"], 0).round
    assert (fixed.q, fixed.rho_min, fixed.rho_max, fixed.full_skill_retry) == (0.0, 1.0, 1.0, False)
    assert cell_params(base, BUILTIN_ARMS["grpo"], 0).round.full_skill_retry is False


def test_matrix_parameters_name_the_bad_field() -> None:
    base = load_params(project_root() / "params" / "ci.yaml").model_dump(mode="json")
    for matrix, message in (({"arms": ["coevolve", "foo"]}, "matrix: arms: unknown arm foo"),
                            ({"define": {"grpo": {}}}, "define.grpo: a built-in arm"),
                            ({"define": {"bare": {"skills": "none"}}, "arms": ["bare"]}, "needs skills: s0"),
                            ({"define": {"half": {"rho_min": 0.6, "rho_max": 0.4}}, "arms": ["half"]}, None),
                            ({"define": {"bare": {"skills": "none", "evolve": False, "skillbank": "s0.json"}},
                              "arms": ["bare"]}, "replaces S₀; it needs skills: s0"),
                            ({"seeds": True}, "matrix.seeds"),
                            ({"family": {"primary": {"comparison": "coevolve-foo"}}},
                             "family.primary.comparison: unknown comparison 'coevolve-foo'"),
                            ({"family": {"secondary": {"comparisons": ["grpo-fixed"]}}},
                             "family.secondary.comparisons: unknown comparison 'grpo-fixed'"),
                            ({"family": {"secondary": {"metrics": ["accuracy"]}}}, "family.secondary.metrics.0"),
                            ({"family": {"primary": {"condition": "frozen"}}}, "family.primary.condition")):
        with pytest.raises(ParamsError) as error:
            params = params_from_dict({**base, "matrix": matrix})
            cell_params(params, params.matrix.arm(params.matrix.arms[0]), 0)
        if message is not None:
            assert message in str(error.value)
    defined = params_from_dict({**base, "matrix": {"define": {"sparse": {"rho_min": 0.3, "rho_max": 0.3}},
                                                   "arms": ["coevolve", "sparse"]}})
    assert cell_params(defined, defined.matrix.arm("sparse"), 0).round.rho_max == 0.3
    declared = params_from_dict({**base, "matrix": {"define": {"sparse": {"rho_min": 0.3, "rho_max": 0.3}},
                                                    "family": {"secondary": {"comparisons": ["sparse-grpo"]}}}})
    assert declared.matrix.family.members(["coevolve", "grpo", "sparse"]) == (
        ("coevolve-grpo", "deployed", "success"),
        [("sparse-grpo", "deployed", "success"), ("sparse-grpo", "bare", "success")])
    assert "family" not in plan_dump(defined)["matrix"]  # a default family leaves every plan as it was
    assert comparison_pairs(["coevolve", "grpo", "fixed"]) == [("coevolve", "grpo"), ("fixed", "grpo"),
                                                               ("coevolve", "fixed")]


@pytest.mark.e2e
def test_tiny_matrix_runs_compares_resumes_cell_by_cell_and_refuses_another_plan(
        tmp_path: Path, small_store_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    params = matrix_params(tmp_path)
    out = tmp_path / "matrix"
    # a kill between cells: the first cell finishes, the second one never starts
    real_run_cell = matrix_module.run_cell
    finished: list[str] = []

    def killed_after_one(*args: object, **kwargs: object) -> object:
        if finished:
            raise KeyboardInterrupt
        result = real_run_cell(*args, **kwargs)
        finished.append(result.arm)
        return result

    kept = tmp_path / "kept"  # the records folder a run that outlives its machine keeps
    monkeypatch.setattr(matrix_module, "run_cell", killed_after_one)
    with pytest.raises(KeyboardInterrupt):
        run_matrix(params, out, store_root=small_store_root, progress=False, records_dir=kept)
    monkeypatch.setattr(matrix_module, "run_cell", real_run_cell)
    first_cell = out / "cells" / "coevolve" / "seed-0"
    before = trace_lines(first_cell)
    assert (first_cell / "cell.json").is_file() and not (out / "cells" / "coevolve" / "seed-1").exists()
    # the plan and the shared start are kept; coevolve seed 0 waits for its seed's baselines (they need its bank
    # and grpo's checkpoint)
    assert (kept / "matrix.json").is_file() and (kept / "shared" / "warmstart.json").is_file()
    assert not list(kept.glob("cells/*/*/cell.json"))

    result = run_matrix(params, out, store_root=small_store_root, progress=False, records_dir=kept)
    assert trace_lines(first_cell) == before  # the finished cell ran nothing again
    assert [(c.arm, c.seed_index) for c in result.cells] == [("coevolve", 0), ("coevolve", 1), ("grpo", 0),
                                                             ("grpo", 1)]
    assert len(list(kept.glob("cells/*/*/cell.json"))) == 4 and len(list(kept.glob("baselines/*/*.json"))) == 2
    assert not list(kept.rglob("traces.jsonl")) and not list(kept.rglob("*.safetensors"))
    summary = json.loads((out / "matrix_summary.json").read_text())
    assert set(summary["arms"]) == {"coevolve", "grpo"} and set(summary["arms"]["grpo"]) == {"0", "1"}
    block = summary["comparisons"]["coevolve-grpo"]
    for condition in ("deployed", "bare"):
        for metric in ("success", "reward"):
            record = block[condition][metric]
            assert record["ci_low"] <= record["mean"] <= record["ci_high"]
            assert record["seeds"] == 2 and record["tasks"] == 6 and len(record["per_seed"]) == 2
            assert record["method"] == "seeds_x_tasks_crossed_t" and 0.0 <= record["p_value"] <= 1.0
    # the declared family: the primary contrast unadjusted, coevolve-grpo bare success its one secondary member,
    # the reward contrasts outside it (no verdict)
    assert (block["deployed"]["success"]["role"], block["deployed"]["success"]["p_holm"]) == ("primary", None)
    secondary = block["bare"]["success"]
    assert secondary["role"] == "secondary" and secondary["p_holm"] == pytest.approx(secondary["p_value"])
    assert {block[c]["reward"]["verdict"] for c in ("deployed", "bare")} == {"exploratory"}
    assert summary["family"]["secondary_size"] == 1 and summary["family"]["primary"]["comparison"] == "coevolve-grpo"
    assert set(summary["warmstart"]) == {"warmstart-bare", "warmstart-s0"}

    # every cell trains with the base parameters plus its overlay and seed, nothing else
    plans = {(c.arm, c.seed_index): Params.model_validate(
        json.loads((out / "cells" / c.arm / f"seed-{c.seed_index}" / "plan.json").read_text())["params"])
        for c in result.cells}
    assert set(overlay_fields(plans["coevolve", 0], plans["grpo", 0])) <= SKILL_FIELDS
    assert overlay_fields(plans["grpo", 0], plans["grpo", 1]) == ["experiment.seed", "round.curriculum_seed"]
    coevolve, grpo = result.cell("coevolve", 0), result.cell("grpo", 0)
    assert coevolve.rounds[0].chunks_in == 2 and coevolve.rounds[0].gate_status == "complete"
    assert grpo.rounds[0].chunks_in == 0 and grpo.rounds[0].retry_episodes == 0
    assert grpo.rounds[0].gate_status == "not_evolving" and grpo.deployed == "final-bare"
    assert grpo.rounds[0].rollout_episodes >= 4 and grpo.rounds[0].trained_episodes >= 2
    assert grpo.tests["final-bank"].skills == ("tidy", "budget")  # S₀ completes a skill-free arm's table
    # every test run is paired: the same jobs and the base seed, whatever the cell's training seed
    test_plans = [json.loads(p.read_text()) for p in out.rglob("test-*/plan.json")]
    assert len(test_plans) == 2 + 2 * 4 - sum(1 for c in result.cells if "final-bank" not in c.tests)
    assert {p["seed"] for p in test_plans} == {params.experiment.seed}
    assert len({json.dumps(p["jobs"]) for p in test_plans}) == 1
    frames = result.four_conditions(), result.learning_curves(), result.compute(), result.comparisons()
    assert all(not frame.empty for frame in frames)
    assert set(frames[0].condition) >= {"warmstart-bare", "warmstart-s0", "final-bare"}
    assert_compute_table(result, out)

    # the deployment baselines, per seed: grpo with S₀ is its own final-bank run; the ci gate keeps no chunk, so
    # grpo with coevolve's (empty) final bank is grpo bare and runs nothing
    assert [(c.arm, c.seed_index) for c in result.baselines] == [("grpo+s0", 0), ("grpo+s0", 1),
                                                                 ("grpo+coevolve_bank", 0), ("grpo+coevolve_bank", 1)]
    for k in (0, 1):
        baselines = {c.arm: c.tests[c.deployed] for c in result.baselines if c.seed_index == k}
        assert baselines["grpo+s0"].run_dir == f"cells/grpo/seed-{k}/test-final-bank"
        assert baselines["grpo+coevolve_bank"].run_dir == f"cells/grpo/seed-{k}/test-final-bare"
    assert not list(out.glob("baselines/seed-*/test-*"))
    for name in ("coevolve-grpo+s0", "coevolve-grpo+coevolve_bank"):
        assert set(summary["comparisons"][name]) == {"deployed"}
        assert summary["comparisons"][name]["deployed"]["success"]["seeds"] == 2
    assert set(summary["baselines"]) == {"grpo+s0", "grpo+coevolve_bank"}

    # shipped records (no traces, no training runs): the same loader gives the same analysis
    shipped_dir = tmp_path / "data" / "results" / "controls"
    shipped = ship_matrix(out, shipped_dir)
    assert not list(shipped_dir.rglob("traces.jsonl")) and not list(shipped_dir.rglob("*.safetensors"))
    records = list(shipped_dir.rglob("tasks.jsonl"))
    assert len(records) == len(test_plans) and all(p.read_text().count("\n") == 6 for p in records)
    assert {**shipped.to_dict(), "out_dir": None} == {**result.to_dict(), "out_dir": None}
    samples = 200
    assert shipped.arm_intervals(samples).equals(result.arm_intervals(samples))
    for frame, live in zip((shipped.four_conditions(), shipped.learning_curves(), shipped.compute()), frames):
        assert frame.equals(live)
    sources = matrix_sources(out, shipped_dir)
    assert list(sources) == [YOUR_RUN, SHIPPED] and list(sources_table(sources).source.unique()) == list(sources)
    bare = next(path for path in records if path.parent.name == "test-final-bare")
    line = json.loads(bare.read_text().splitlines()[0])
    bare.write_text(json.dumps({k: v for k, v in line.items() if k not in ("steps", "record_sha256")}) + "\n")
    with pytest.raises(ValueError, match=r"tasks.jsonl: line 1 lacks \['steps'\]"):
        load_matrix(shipped_dir)

    # a fresh machine: the kept records alone restore every finished cell and baseline; nothing trains again
    def must_not_run(*args: object, **kwargs: object) -> object:
        raise AssertionError("a kept cell ran again")

    monkeypatch.setattr(matrix_module, "run_cell", must_not_run)
    elsewhere = run_matrix(params, tmp_path / "fresh", store_root=small_store_root, progress=False, records_dir=kept)
    assert {**elsewhere.to_dict(), "out_dir": None} == {**result.to_dict(), "out_dir": None}
    with pytest.raises(MatrixPlanMismatchError, match="rounds"):
        run_matrix(matrix_params(tmp_path, rounds=2), tmp_path / "other", store_root=small_store_root,
                   progress=False, records_dir=kept)
    assert not (tmp_path / "other").exists()
    monkeypatch.setattr(matrix_module, "run_cell", real_run_cell)

    # a cell killed after its tests but before cell.json: resumed without a new episode
    all_lines = trace_lines(out)
    (first_cell / "cell.json").unlink()
    again = run_matrix(params, out, store_root=small_store_root, progress=False)
    assert trace_lines(out) == all_lines and (first_cell / "cell.json").is_file()
    assert again.to_dict()["comparisons"] == result.to_dict()["comparisons"]
    with pytest.raises(MatrixPlanMismatchError, match="rounds"):
        run_matrix(matrix_params(tmp_path, rounds=2), out, store_root=small_store_root, progress=False)

    # the command line prints the same summary as one JSON object
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(params.model_dump(mode="json")), encoding="utf-8")
    monkeypatch.setattr(matrix_module, "run_cell", killed_after_one)  # nothing may run again
    cli = CliRunner().invoke(app, ["experiment", "--params", str(path), "--out", str(out), "--allow-outside-run-root", "--no-progress",
                                   "--json", "--set", f"experiment.run_root={tmp_path / 'runs'}"])
    assert cli.exit_code == 0, cli.output
    printed = json.loads(cli.stdout)
    assert printed["comparisons"]["coevolve-grpo"]["deployed"]["success"]["mean"] == \
        block["deployed"]["success"]["mean"]
    assert load_matrix(out).to_dict()["arms"].keys() == {"coevolve", "grpo"}

    # an arm with its own S₀ (a cold start's bank): refused before any work when missing, then one new cell that
    # trains from that bank alone, named in its cell, summary and statements
    induced = tmp_path / "induced_s0.json"
    save_skillbank(SkillBank("ci-induced", load_skillbank(project_root() / "params" / "ci_s0.json").skills[1:]), induced)
    for bank, message in ((tmp_path / "missing.json", "matrix arm induced: skillbank .* is not a file"),
                          (induced, None)):
        define = f"matrix.define={{induced: {{skillbank: {bank}}}}}"
        if message is not None:
            with pytest.raises(FileNotFoundError, match=message):
                run_matrix(with_overrides(params, [define, "matrix.arms=[coevolve,induced]"]), out,
                           store_root=small_store_root, progress=False)
            assert not (out / "cells" / "induced").exists()
            continue
        monkeypatch.setattr(matrix_module, "run_cell", lambda params, out, cell, *args, **kwargs: real_run_cell(
            params, out, cell, *args, **kwargs) if cell.arm == "induced" else pytest.fail("a finished cell ran"))
        extended = run_matrix(with_overrides(params, [define, "matrix.arms=[coevolve,induced]", "matrix.seeds=1"]),
                              out, store_root=small_store_root, progress=False)
    cell = extended.cell("induced", 0)
    assert cell.start_skillbank == str(induced) and cell.rounds[0].chunks_in == 1
    assert [s.skill_id for s in load_skillbank(out / "cells" / "induced" / "seed-0" / "start" / "skillbank.json")
            .skills] == ["budget"]
    assert extended.cell("coevolve", 0).start_skillbank is None
    note = f"induced trained from S₀ {induced}, not the shared S₀"
    assert note in extended.summary()
    assert [c.name for c in extended.contrasts] == ["coevolve-induced"] * 4
    assert {c.across_seeds.method for c in extended.contrasts} == {"one_seed_task_paired_bootstrap"}
    assert [c.role for c in extended.contrasts] == ["secondary", "exploratory"] * 2  # success declared, reward not
    assert all(note in c.statement() for c in extended.contrasts)


def test_plans_leave_out_the_settings_of_an_unused_method() -> None:
    params = load_params(project_root() / "params" / "ci.yaml")
    dump = plan_dump(params)
    assert "skill1" not in dump and "method" not in dump["round"] and "skill1_warmstart" not in dump
    skill1 = with_overrides(params, ["round.method=skill1", "round.skillbank=null"])
    assert plan_dump(skill1)["round"]["method"] == "skill1" and "skill1" in plan_dump(skill1)


@pytest.mark.e2e
def test_deployment_baseline_runs_grpo_with_coevolves_bank_and_resumes_it(
        tmp_path: Path, small_store_root: Path) -> None:
    out = tmp_path / "matrix"
    run_matrix(matrix_params(tmp_path, arms=["coevolve"], seeds=1), out, store_root=small_store_root, progress=False)
    assert not (out / "baselines").exists()  # no grpo cell yet: no baseline
    # the ci gate keeps no chunk; this coevolve cell ends as if its gate had kept S₀'s two chunks
    save_skillbank(load_skillbank(project_root() / "params" / "ci_s0.json"),
                   out / "cells" / "coevolve" / "seed-0" / "final_skillbank.json")
    params = matrix_params(tmp_path, seeds=1)
    result = run_matrix(params, out, store_root=small_store_root, progress=False)
    run = next(c for c in result.baselines if c.arm == "grpo+coevolve_bank").tests["final-bank"]
    run_dir = out / "baselines" / "seed-0" / "test-grpo-coevolve-bank"
    assert run.run_dir == "baselines/seed-0/test-grpo-coevolve-bank" and run.skills == ("tidy", "budget")
    assert run.checkpoint == result.cell("grpo", 0).tests["final-bare"].checkpoint and run.episodes == 6
    assert json.loads((run_dir / "plan.json").read_text())["seed"] == params.experiment.seed
    record = result.to_dict()["comparisons"]["coevolve-grpo+coevolve_bank"]["deployed"]["success"]
    assert len(record["per_seed"]) == 1 and record["ci_low"] <= record["mean"] <= record["ci_high"]
    assert "grpo+coevolve_bank" in result.summary() and "compute coevolve" in result.summary()

    # resumed, not redone: a run killed midway finishes only its missing episodes; a lost record is rebuilt
    # without an episode
    traces = run_dir / "traces.jsonl"
    lines = traces.read_text().splitlines(keepends=True)
    traces.write_text("".join(lines[:3]))  # kept episodes stay byte for byte (each holds its own duration)
    (run_dir / "summary.json").unlink()
    (out / "baselines" / "seed-0" / "baseline.json").unlink()
    again = run_matrix(params, out, store_root=small_store_root, progress=False)
    assert traces.read_text().splitlines(keepends=True)[:3] == lines[:3] and len(traces.read_text().splitlines()) == 6
    before = trace_lines(out)
    (out / "baselines" / "seed-0" / "baseline.json").unlink()
    assert run_matrix(params, out, store_root=small_store_root, progress=False).to_dict()["baselines"] == \
        again.to_dict()["baselines"]
    assert trace_lines(out) == before


@pytest.mark.e2e
def test_a_probe_matrix_evaluates_on_dev_and_its_cells_train_without_dev(
        tmp_path: Path, small_store_root: Path, small_store: object) -> None:
    params = matrix_params(tmp_path, split="dev", test_tasks=3)
    assert matrix_module.matrix_plan(params)["split"] == "dev"
    assert "split" not in matrix_module.matrix_plan(matrix_params(tmp_path))  # a test matrix's plan is as before
    cell = cell_params(params, params.matrix.arm("coevolve"), 1)
    assert overlay_fields(cell_params(matrix_params(tmp_path), params.matrix.arm("coevolve"), 1), cell) == \
        ["round.exclude_dev"]
    _, tests = matrix_module.shared_start(params, tmp_path / "matrix", small_store_root, progress=False)
    dev = small_store[2].ids("dev")
    for run in tests.values():
        plan = json.loads((tmp_path / "matrix" / run.run_dir / "plan.json").read_text())
        assert plan["split"] == "dev" and [job[0] for job in plan["jobs"]] == list(dev[:3])
    with pytest.raises(ParamsError, match="matrix.split"):
        matrix_params(tmp_path, split="val")


@pytest.mark.e2e
def test_the_ci_parameters_run_the_experiment_as_they_are(tmp_path: Path, small_store_root: Path) -> None:
    """``intraskill experiment --params params/ci.yaml --arms coevolve,grpo,fixed --seeds 2 --rounds 1`` as a new
    user types it (only the run root moved, to find the suite's store): S₀ and its α come from ``ci.yaml``, and the
    gate of seed 1, whose first mask draws are singular on its 4 val tasks, redraws instead of aborting."""
    runs = tmp_path / "runs"
    shutil.copytree(small_store_root, store_dir("small", 11, runs))
    out = runs / "matrix"
    cli = CliRunner().invoke(app, ["experiment", "--params", str(project_root() / "params" / "ci.yaml"), "--arms",
                                   "coevolve,grpo,fixed", "--seeds", "2", "--rounds", "1", "--out", str(out),
                                   "--no-progress", "--json", "--set", f"experiment.run_root={runs}"])
    assert cli.exit_code == 0, cli.output
    summary = json.loads(cli.stdout)
    assert set(summary["arms"]) == {"coevolve", "grpo", "fixed"} and set(summary["arms"]["fixed"]) == {"0", "1"}
    s0 = load_skillbank(out / "shared" / "skillbank.json")
    assert [(s.skill_id, s.estimated_effect) for s in s0.skills] == [("tidy", 0.05), ("budget", 0.01)]
    gate = out / "cells" / "coevolve" / "seed-1" / "round-000" / "gate"
    manifest = json.loads((gate / "online_gate_manifest.json").read_text())
    assignment = load_mask_assignment(gate / "mask_assignments.json")
    assert manifest["status"] == "complete" and manifest["protocol"]["mask_redraw"] == assignment.redraw >= 1
    for redraw in range(assignment.redraw):  # every earlier draw of its mask seed was singular
        rows = [[int(mask_draw(assignment.mask_seed, redraw, "val", job.task_id, job.sample_id, slot.slot_id)
                     % (len(slot.versions) + 1) == k) for slot in assignment.slots
                 for k in range(1, len(slot.versions) + 1)] for job in assignment.jobs]
        with pytest.raises(RankDeficientDesignError):
            check_design_rank(rows, assignment.columns)


def test_a_failed_cell_leaves_the_other_cells_records_and_is_raised_last() -> None:
    # The parallel and Ray paths hand each cell's outcome here as it comes: a cell that raised (the skill1 arm's
    # record-type failure of registration 2) used to stop the loop, so cells finishing after it ran to the end
    # but never shipped their records or ran their seed's baselines.
    from concurrent.futures import Future

    cells = [matrix_module.Cell(arm, 0) for arm in ("skill1", "grpo", "grpo_s1")]
    outcomes = []
    for cell in cells:
        future: Future[None] = Future()
        if cell.arm == "skill1":
            future.set_exception(ValueError("admitted_skills: a string is expected"))
        else:
            future.set_result(None)
        outcomes.append((cell, future.result))
    finished: list[str] = []
    with pytest.raises(ValueError, match="admitted_skills"):
        matrix_module._finish_each(outcomes, lambda cell: finished.append(cell.name))
    assert finished == ["grpo/seed-0", "grpo_s1/seed-0"]
