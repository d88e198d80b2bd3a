"""The ``skill1`` arm of the control experiment: a real tiny matrix (one skill1 cell, two rounds on the ci organism
with the real encoder) whose Skill1 rounds carry their library, tested bare and deployed with the final library,
resumed after kills, then extended through the command line with a Skill1 arm starting from another checkpoint;
the arm's parameters, its comparisons and the plans of the other arms."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from typer.testing import CliRunner

from intraskill.cli import app
from intraskill.evaluate.compare import AlignmentError, compare_runs
from intraskill.evaluate.skill1_deploy import LibraryDeployment
from intraskill.experiment import matrix as matrix_module
from intraskill.experiment.arms import cell_params, overlay_fields, start_checkpoint
from intraskill.experiment.matrix import arm_checkpoint, matrix_plan, run_matrix
from intraskill.experiment.results import MatrixResult, comparison_pairs, contrast, load_matrix
from intraskill.hashing import sha256_file, sha256_json
from intraskill.jsonl import read_jsonl
from intraskill.params import (
    BUILTIN_ARMS,
    DEFAULT_ARMS,
    METHOD_SPECS,
    ArmParams,
    MethodName,
    Params,
    ParamsError,
    Skill1Params,
    load_params,
    params_from_dict,
    plan_dump,
    section_plan,
    with_overrides,
)
from intraskill.paths import project_root, store_dir
from intraskill.pipeline import coevolve as coevolve_module
from intraskill.pipeline.methods import METHODS
from intraskill.plots.controls import control_learning_curves, control_outcomes
from intraskill.skills.library import ema

SEEDS = [{"desc": "buying clothes in a given colour and size", "strat": "Select every option axis first.",
          "utility": 0.9},
         {"desc": "buying kitchen items under a price limit", "strat": "Compare prices on the results page.",
          "utility": 0.2},
         {"desc": "buying shoes", "strat": "Check the size first."}]


class Killed(BaseException):
    """A simulated kill."""


def skill1_matrix_params(tmp_path: Path) -> Params:
    """``params/ci.yaml`` with one rollout step of one task × 2 rollouts per round, short episodes, 2 val and 4 test
    tasks, the ci S₀, and a three-skill seed library (K = 2) for the Skill1 arm."""
    seeds = tmp_path / "seeds.json"
    seeds.write_text(json.dumps(SEEDS), encoding="utf-8")
    data = load_params(project_root() / "params" / "ci.yaml").model_dump(mode="json")
    data["experiment"]["run_root"] = str(tmp_path / "runs")
    data["round"].update({"n_samples_per_prompt": 2, "rollout_batch_size": 1, "over_sampling_batch_size": 2,
                          "rollout_steps": 1, "val_tasks": 2, "skillbank": "params/ci_s0.json"})
    data["sampling"].update({"max_turns": 3, "max_tokens_per_turn": 24})
    data["skill1"] = {"top_k": 2, "seed_library": str(seeds), "query_max_tokens": 16, "rank_max_tokens": 8,
                      "distill_max_tokens": 24}
    data["matrix"] = {"arms": ["skill1"], "seeds": 1, "rounds": 2, "test_tasks": 4}
    return params_from_dict(data)


def trace_lines(root: Path) -> dict[Path, int]:
    return {p: p.read_text(encoding="utf-8").count("\n") for p in root.rglob("*.jsonl") if p.name != "timings.jsonl"}


@dataclass(frozen=True)
class SkillMatrix:
    """The fixture's matrix: parameters, directory, result and the cell's records before and after the last
    resume."""

    params: Params
    out: Path
    result: MatrixResult
    lines_before: dict[Path, int]
    lines_after: dict[Path, int]

    @property
    def cell_dir(self) -> Path:
        return self.out / "cells" / "skill1" / "seed-0"


@pytest.fixture(scope="module")
def skill1_matrix(tmp_path_factory: pytest.TempPathFactory, small_store_root: Path) -> SkillMatrix:
    """A one-cell skill1 matrix killed in round 1 after its checkpoint (before the library's commit), then in
    its deployed test run, then resumed to the end."""
    tmp_path = tmp_path_factory.mktemp("skill1-matrix")
    params = skill1_matrix_params(tmp_path)
    out = tmp_path / "matrix"
    real_round, real_run = coevolve_module.run_round, LibraryDeployment.run

    def killed_in_round_1(*args: Any, **kwargs: Any) -> Any:
        if args[1] == 1:
            def kill(name: str, info: Mapping[str, Any]) -> None:
                if name == "trained":
                    raise Killed(name)
            kwargs["on_event"] = kill
        return real_round(*args, **kwargs)

    def killed_after_the_batch(self: LibraryDeployment, *args: Any) -> Any:
        real_run(self, *args)
        raise Killed("deployed test")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(coevolve_module, "run_round", killed_in_round_1)
        with pytest.raises(Killed, match="trained"):
            run_matrix(params, out, store_root=small_store_root, progress=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LibraryDeployment, "run", killed_after_the_batch)
        with pytest.raises(Killed, match="deployed test"):
            run_matrix(params, out, store_root=small_store_root, progress=False)
    before = trace_lines(out / "cells" / "skill1" / "seed-0")
    result = run_matrix(params, out, store_root=small_store_root, progress=False)
    return SkillMatrix(params, out, result, before, trace_lines(out / "cells" / "skill1" / "seed-0"))


@pytest.mark.e2e
def test_skill1_cell_carries_its_library_tests_it_deployed_and_resumes_after_kills(
        skill1_matrix: SkillMatrix) -> None:
    out, result, cell_dir = skill1_matrix.out, skill1_matrix.result, skill1_matrix.cell_dir
    assert skill1_matrix.lines_after == skill1_matrix.lines_before  # the resumed test run re-ran nothing

    # round 1's library started from round 0's committed one: same skills, U and n, then only round 1's events
    first, second = (cell_dir / f"round-00{i}" / "library" for i in (0, 1))
    carried = {s["skill_id"]: s for s in json.loads((first / "snapshot.json").read_text())["skills"]}
    assert sum(s["uses"] for s in carried.values()) == 2 * 2  # 2 rollouts × K = 2 retrieved skills
    history = read_jsonl(second / "history.jsonl")
    events = [r["event"] for r in history]
    assert events.count("admit") == 0 and [r["step"] for r in history if r["event"] == "commit"] == [1]
    # the kill discarded the step's uncommitted updates; the commit replayed them from the recorded rollouts
    assert events.count("abort") == 1
    state = {k: dict(v) for k, v in carried.items()}
    for event in (r for r in history[events.index("abort"):] if r["event"] == "update"):
        skill = state[event["skill_id"]]
        assert event["uses"] == skill["uses"] + 1
        assert event["utility"] == pytest.approx(ema(skill["utility"], event["reward"]))
        skill.update(uses=event["uses"], utility=event["utility"])
    final = json.loads((second / "snapshot.json").read_text())
    assert {s["skill_id"]: s for s in final["skills"]} == state
    assert all(s["provenance"]["origin"] == "seed" for s in final["skills"])
    plan = json.loads((second.parent / "plan.json").read_text())
    assert plan["skill1"]["library_start_sha256"] == sha256_file(first / "snapshot.json")
    assert "library_start_sha256" not in json.loads((first.parent / "plan.json").read_text())["skill1"]
    assert json.loads((cell_dir / "final_library.json").read_text())["skills"] == final["skills"]

    cell = result.cell("skill1", 0)
    assert set(cell.tests) == {"final-bare", "final-bank", "final-library"} and cell.deployed == "final-library"
    assert cell.tests["final-library"].skills == ("skill1-0", "skill1-1", "skill1-2")
    assert [r.round_index for r in cell.rounds] == [0, 1] and cell.start_checkpoint is None
    assert all(r.rollout_episodes == 2 and r.trained_episodes == 2 and r.generated_tokens > 0 for r in cell.rounds)
    assert cell.rounds[1].val_before == cell.rounds[0].val_after
    # the deployed run: no distillation, the same jobs and seed as every other test run, each episode with the
    # selected library skill
    deployed = out / cell.tests["final-library"].run_dir
    test_plans = [json.loads(p.read_text()) for p in out.rglob("test-*/plan.json")]
    assert len({json.dumps(p["jobs"]) for p in test_plans}) == 1 and {p["seed"] for p in test_plans} == {7}
    library_plan = json.loads((deployed / "plan.json").read_text())["skills"]
    assert library_plan["provider"] == "skill1-library" and library_plan["replies"]["query_max_tokens"] == 16
    traces = read_jsonl(deployed / "traces.jsonl")
    selected = [t["provenance"]["selected_skills"] for t in traces]
    assert len(traces) == 4 and all(len(s) == 1 and s[0]["skill_id"].startswith("skill1-") for s in selected)
    assert not list((cell_dir / "round-001" / "steps").glob("*/traces.jsonl"))
    # the deployed run pairs with the bare one of its checkpoint, though its episodes carry different skills
    bare = out / cell.tests["final-bare"].run_dir
    paired = compare_runs(bare, deployed, kind="same-checkpoint", samples=200).alignment.traces
    assert paired.b_skill_ids == sorted({s[0]["skill_id"] for s in selected}) and paired.b_bare_episodes == 0
    with pytest.raises(AlignmentError, match="run a must be bare, it deploys a Skill1 library"):
        compare_runs(deployed, bare, kind="same-checkpoint", samples=200)

    # results: per-task values read from the deployed run (its level, and a contrast as against another arm)
    levels = result.arm_intervals(samples=200)
    assert list(levels.arm) == ["skill1"] * 4 and set(levels.condition) == {"deployed", "bare"}
    assert "final-library" in set(result.four_conditions().condition)
    against_bare = contrast(out, [cell], [replace(cell, arm="bare", deployed="final-bare")], "deployed", "r_success",
                            200, 1)
    assert against_bare.across_seeds.n_tasks == 4 and "started from" not in against_bare.statement()
    assert against_bare.across_seeds.method == "one_seed_task_paired_bootstrap" and against_bare.verdict == "exploratory"
    record = against_bare.to_dict()
    figure = control_outcomes(levels, [{"comparison": against_bare.name, "condition": "deployed", "metric": "success",
                                        **{k: record[k] for k in ("mean", "ci_low", "ci_high", "verdict")}}])
    assert [label.get_text() for label in figure.axes[0].get_yticklabels()] == ["skill1"]
    assert control_learning_curves(result.learning_curves()).axes[0].get_legend_handles_labels()[1] == \
        ["skill1 (n = 1)"]


@pytest.mark.e2e
def test_an_arm_from_another_checkpoint_extends_the_matrix_through_the_command_line(
        skill1_matrix: SkillMatrix, small_store_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A defined Skill1 arm starting from skill1's round-0 checkpoint is added with ``--arms``; the finished cell
    does not run again, and the new arm's start is named in its cell, plan, summary and statements."""
    params, out, cell_dir = skill1_matrix.params, skill1_matrix.out, skill1_matrix.cell_dir
    cell = skill1_matrix.result.cell("skill1", 0)
    summary = json.loads((out / "matrix_summary.json").read_text())
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(params.model_dump(mode="json")), encoding="utf-8")
    shutil.copytree(small_store_root, store_dir("small", 11, params.experiment.run_root))  # the CLI's default store
    real_cell = matrix_module.run_cell
    monkeypatch.setattr(matrix_module, "run_cell", lambda params, out, cell, *args, **kwargs: real_cell(
        params, out, cell, *args, **kwargs) if cell.arm == "late" else pytest.fail("a finished cell ran again"))
    checkpoint = cell_dir / "round-000" / "checkpoint" / "model"
    late = f"{{late: {{method: skill1, skills: none, evolve: false, checkpoint: {checkpoint}}}}}"
    cli = CliRunner().invoke(app, ["experiment", "--params", str(path), "--out", str(out), "--allow-outside-run-root", "--arms", "skill1,late",
                                   "--set", f"matrix.define={late}", "--no-progress", "--json"])
    assert cli.exit_code == 0, cli.output
    printed = json.loads(cli.stdout)
    assert printed["arms"]["skill1"] == summary["arms"]["skill1"]
    assert printed["arms"]["late"]["0"]["start_checkpoint"] == str(checkpoint)
    late_dir = out / "cells" / "late" / "seed-0"
    assert json.loads((late_dir / "plan.json").read_text())["start"]["checkpoint"] == str(checkpoint)
    extended = load_matrix(out)
    note = f"late started from {checkpoint}, not the shared warm start"
    assert note in extended.summary()
    assert note in contrast(out, [extended.cell("late", 0)], [cell], "deployed", "r_success", 200, 1).statement()


def test_every_method_is_specified_once_for_the_parameters_and_the_pipeline() -> None:
    """The parameters check a method by its :class:`~intraskill.params.MethodSpec`, the pipeline runs its
    :class:`~intraskill.pipeline.methods.TrainingMethod`: the same methods, the same curriculum fact."""
    assert set(METHODS) == set(METHOD_SPECS) == set(get_args(MethodName))
    for name, method in METHODS.items():
        assert method.name == name and method.uses_curriculum == METHOD_SPECS[name].uses_curriculum
        arm = ArmParams(method=name, skills="s0" if method.uses_curriculum else "none",
                        evolve=method.uses_curriculum)
        assert arm.starts_from_skill1 == METHOD_SPECS[name].starts_from_skill1
        assert ("skillbank" in arm.round_overlay()) != method.uses_curriculum
    data = load_params(project_root() / "params" / "organism.yaml").model_dump(mode="json")
    plans = {name: plan_dump(params_from_dict({**data, "round": {**data["round"], "method": name,
                                                                 "skillbank": None}}))
             for name in METHODS if not METHOD_SPECS[name].uses_curriculum}
    assert all(plan["round"]["method"] == name and METHOD_SPECS[name].section in plan for name, plan in plans.items())
    plain = plan_dump(params_from_dict(data))  # an IntraSkill run: no method, no other method's section
    assert "method" not in plain["round"] and not any(spec.section in plain for spec in METHOD_SPECS.values())


def test_skill1_arm_parameters_and_the_other_arms_plans() -> None:
    assert "skill1" in BUILTIN_ARMS and "skill1" not in DEFAULT_ARMS
    arm = BUILTIN_ARMS["skill1"]
    assert arm.round_overlay() == {"method": "skill1", "skillbank": None, "full_skill_retry": False}
    for settings, message in (({"method": "skill1"}, "method: skill1 .* set skills: none"),
                              ({"method": "skill1", "skills": "none"}, "evolve: true needs skills: s0"),
                              ({"method": "skill1", "skills": "none", "evolve": False, "q": 0.1}, "q set"),
                              ({"method": "other"}, "method"), ({"checkpoint": ""}, "checkpoint")):
        with pytest.raises(ValueError, match=message):
            ArmParams.model_validate(settings)
    # the new arm and settings leave every other plan as it was: fields at their defaults are not in plans
    base = load_params(project_root() / "params" / "organism.yaml")
    assert section_plan(BUILTIN_ARMS["grpo"]) == {k: v for k, v in BUILTIN_ARMS["grpo"].model_dump(mode="json").items()
                                                  if k not in ("method", "checkpoint", "skillbank", "skill1_start")}
    defaults = Skill1Params()
    assert section_plan(base.skill1) == base.skill1.model_dump(mode="json", exclude={
        name for name in Skill1Params.plan_optional if getattr(base.skill1, name) == getattr(defaults, name)})
    assert section_plan(Skill1Params()) == Skill1Params().model_dump(mode="json", exclude=set(
        Skill1Params.plan_optional))  # the options issue 36 added leave plans written before them as they were
    defined = params_from_dict({**base.model_dump(mode="json"), "matrix": {
        "define": {"late": {"method": "skill1", "skills": "none", "evolve": False, "checkpoint": "elsewhere"}}}})
    assert plan_dump(defined)["matrix"]["define"]["late"]["checkpoint"] == "elsewhere"
    # the organism's skill1 arm starts from its Skill1 warm start, an arm's own checkpoint first, others shared
    assert "skill1" in base.matrix.arms
    assert start_checkpoint(base, base.matrix.arm("skill1")) == base.skill1.start_checkpoint
    arm_checkpoint("skill1", base.skill1.start_checkpoint)  # shipped: it holds a model
    assert start_checkpoint(defined, defined.matrix.arm("late")) == "elsewhere"
    # grpo_s1: plain GRPO (the grpo arm's overlay) from the Skill1 warm start
    assert "grpo_s1" in base.matrix.arms
    assert start_checkpoint(base, base.matrix.arm("grpo_s1")) == base.skill1.start_checkpoint
    assert start_checkpoint(base, base.matrix.arm("grpo")) is None
    assert overlay_fields(cell_params(base, BUILTIN_ARMS["grpo"], 0), cell_params(base, BUILTIN_ARMS["grpo_s1"], 0)) == []
    assert start_checkpoint(base, base.matrix.arm("grpo")) is None
    with pytest.raises(FileNotFoundError, match="matrix arm late: checkpoint 'elsewhere' holds no model"):
        arm_checkpoint("late", "elsewhere")
    with pytest.raises(ParamsError, match="skill1.rank_max_tokens"):
        params_from_dict({**base.model_dump(mode="json"), "skill1": {"rank_max_tokens": 0}})
    assert comparison_pairs(["coevolve", "grpo", "skill1"]) == [("coevolve", "grpo"), ("skill1", "grpo"),
                                                                ("coevolve", "skill1")]
    assert comparison_pairs(["grpo", "skill1", "grpo_s1"]) == [("skill1", "grpo"), ("grpo_s1", "grpo"),
                                                               ("skill1", "grpo_s1")]


def test_existing_plans_keep_their_fingerprints() -> None:
    """The matrix plan, every default arm's cell plan and a plan with a defined arm and Skill1's section hash as
    they did before the skill1 arm, its settings and the reply budgets existed."""
    ci = with_overrides(load_params(project_root() / "params" / "ci.yaml"), ["round.skillbank=null"])  # as it was
    defined = with_overrides(ci, ["matrix.define={half: {rho_min: 0.6, rho_max: 0.6}}", "round.method=skill1"])
    fingerprints = [sha256_json(matrix_plan(ci)),
                    *(sha256_json(plan_dump(cell_params(ci, BUILTIN_ARMS[arm], 0))) for arm in DEFAULT_ARMS),
                    sha256_json(plan_dump(defined))]
    # computed with the code before the skill1 arm (commit da5683b)
    assert fingerprints == ["d3ac1506224868bca28f80729f663b86029db73f92da0077266242d38bd2ac6f",
                            "6a80a0c3274832abd38582aded557097b508d5b10eb3b59877083c8c67e5b475",
                            "c1fdbf2312b304deb2ebb1ec7afb513b127762b7eb8ff3f88e3d98b080086c85",
                            "cb4300ea92de7be1947cc8e1db721745cec9b4cf861c4ee770a5d88a6b342bbb",
                            "9dbdfe83d8fdca1d80522735b59d7a5adbad4a7746d9314d306e5005bbf4b951",
                            "1f74853a7ee14c7b5a3477b65898ea247cd0e6fb7c45c6309782bb6de123bfad",
                            "4ca481b69748903a33dd3d78572b1630c35609db60670be0a3440d4a57b6a453"]
