"""Co-evolution: two rounds of train → analysis → gate → curriculum with a random-init ci organism."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from fastapi import FastAPI
from t2s_helpers import MessyModel, ScriptedServer
from typer.testing import CliRunner

from intraskill.cli import app as cli_app
from intraskill.gate.contributions import load_contributions
from intraskill.hashing import sha256_json
from intraskill.params import Params, load_params, params_from_dict
from intraskill.paths import project_root
from intraskill.pipeline.coevolve import (
    GATE_SKIPPED,
    NOT_EVOLVING,
    CoEvolveConfig,
    CoEvolvePlanMismatchError,
    CoEvolveSummary,
    co_evolve,
    coevolve_plan,
    curriculum_bank,
)
from intraskill.pipeline.prepare import RoundInputs
from intraskill.pipeline.round import round_curriculum
from intraskill.policy.hf import HFPolicy
from intraskill.policy.organism import OrganismConfig, build_organism, protocol_corpus, train_tokenizer
from intraskill.policy.server import ServerConfig, create_app
from intraskill.provenance import run_provenance
from intraskill.shop.engine import ShopEngine
from intraskill.shop.service import serve_in_thread
from intraskill.skills.bank import Skill, SkillBank, save_skillbank
from intraskill.skills.curriculum import build_curriculum
from intraskill.skills.pool import load_pool
from intraskill.trace2skill.analysis import read_cards
from intraskill.trace2skill.analysts import LLM, AnalystSettings
from intraskill.trace2skill.cards import REASON_FIREWALL

ROUND = {"n_samples_per_prompt": 2, "rollout_batch_size": 1, "over_sampling_batch_size": 2, "rollout_steps": 1,
         "val_tasks": 8}


def ci_params(run_root: Path) -> Params:
    """``params/ci.yaml`` shrunk to one rollout step per round and 8 val tasks."""
    data = load_params(project_root() / "params" / "ci.yaml").model_dump(mode="json")
    data["experiment"]["run_root"] = str(run_root)
    data["round"].update(ROUND)
    data["sampling"].update({"max_turns": 4, "max_tokens_per_turn": 32})
    return params_from_dict(data)


def start(params: Params) -> RoundInputs:
    skills = (Skill("tidy", "### Be tidy\n- Click only listed values.", metadata={"estimated_effect": 0.05}),
              Skill("budget", "### Budget\n- Compare prices.", metadata={"estimated_effect": 0.01}))
    r = params.round
    curriculum = build_curriculum(SkillBank("ci-1", skills), round_id="round-000", skill_free_probability=r.q,
                                  rho_min=r.rho_min, rho_max=r.rho_max, seed=r.curriculum_seed)
    return RoundInputs(checkpoint=None, skillbank=None, curriculum=curriculum, warmstart_dir=None)


def line_count(path: Path) -> int:
    return path.read_text(encoding="utf-8").count("\n")


@pytest.mark.e2e
def test_two_rounds_write_every_artifact_resume_and_refuse_another_plan(
        tmp_path: Path, small_store_root: Path, caplog: pytest.LogCaptureFixture) -> None:
    params = ci_params(tmp_path / "runs")
    config = CoEvolveConfig(max_candidates=2)
    run_dir = tmp_path / "co-evolve"
    result = co_evolve(params, 2, start=start(params), config=config, out_dir=run_dir, store_root=small_store_root,
                       progress=False)
    assert [r.round_index for r in result.rounds] == [0, 1]
    first, second = result.rounds
    for finished in result.rounds:
        assert (finished.checkpoint / "config.json").is_file()
        assert finished.pool_path.is_file()
        assert json.loads((finished.root / "analysis" / "analysis_summary.json").read_text())["round_id"] == \
            f"round-{finished.round_index:03d}"
    # round 0: S0-like curriculum → retries → analysis → a complete gate on the frozen round checkpoint
    assert first.gate_status == "complete"
    gate = first.gate_dir
    for name in ("mask_assignments.json", "contributions.json", "selected_skillbank.json", "selected_skill.md",
                 "proposal_ledger.jsonl", "summary.json", "online_gate_manifest.json"):
        assert (gate / name).is_file(), name
    contributions = load_contributions(gate / "contributions.json")
    manifest = json.loads((gate / "online_gate_manifest.json").read_text())
    assert manifest["config"]["checkpoint_id"] == "round-000-checkpoint"
    assert manifest["inputs"]["bare_run_dir"] == str(first.root / "val-after")  # the round's bare val is reused
    assert contributions.bare_baseline.observations == ROUND["val_tasks"]
    assert {r.intervention_id for r in contributions.contributions} >= {"tidy", "budget"}
    # the next curriculum exists exactly when the gate selected a chunk, and round 1 trains with it
    assert (first.curriculum_path is not None) == (contributions.selected_count > 0)
    round_plan = json.loads((second.root / "plan.json").read_text())
    expected = first.curriculum().state_id if first.curriculum_path else None
    assert round_plan["curriculum_state_id"] == expected
    assert json.loads((second.root / "val-before" / "plan.json").read_text())["model"] == \
        json.loads((first.root / "val-after" / "plan.json").read_text())["model"]  # round 1 starts from round 0
    # round 1's val check before training is round 0's after it: carried over, not run again
    assert (second.root / "val-before" / "traces.jsonl").read_text() == \
        (first.root / "val-after" / "traces.jsonl").read_text()
    if first.curriculum_path is None:
        assert second.gate_status == GATE_SKIPPED and curriculum_bank(None, "round-001").skills == ()
    summary = json.loads((run_dir / "co_evolve_summary.json").read_text())
    assert [r["gate_status"] for r in summary["rounds"]] == [first.gate_status, second.gate_status]
    assert summary["rounds"][0]["gate_outcomes"]["columns"] == len(contributions.columns)
    assert CoEvolveSummary.read(run_dir / "co_evolve_summary.json").rounds == [first.summary(), second.summary()]
    # the plan records its provenance outside the fingerprint
    plan = json.loads((run_dir / "plan.json").read_text())
    assert plan["provenance"] == run_provenance() and plan["fingerprint"] == result.fingerprint
    assert json.loads((first.root / "plan.json").read_text())["provenance"] == run_provenance()
    plan["provenance"]["torch_threads"] += 1  # as if written on another machine
    (run_dir / "plan.json").write_text(json.dumps(plan))
    # resume: a finished run is skipped stage by stage (no new episode anywhere), warning of the provenance
    traces = {p: line_count(p) for p in run_dir.rglob("traces.jsonl")}
    with caplog.at_level(logging.WARNING, logger="intraskill.provenance"):
        again = co_evolve(params, 2, start=start(params), config=config, out_dir=run_dir,
                          store_root=small_store_root, progress=False)
    # one warning names the changed thread count (others may name a commit that changed while the suite ran)
    assert sum("torch_threads" in r.getMessage() for r in caplog.records) == 1
    assert again.rounds == result.rounds
    assert {p: line_count(p) for p in run_dir.rglob("traces.jsonl")} == traces
    with pytest.raises(CoEvolvePlanMismatchError, match="config"):
        co_evolve(params, 2, start=start(params), config=CoEvolveConfig(max_candidates=3), out_dir=run_dir,
                  store_root=small_store_root, progress=False)


@pytest.mark.e2e
def test_without_evolution_every_round_trains_with_the_starting_bank_redrawn(tmp_path: Path,
                                                                             small_store_root: Path) -> None:
    params = ci_params(tmp_path / "runs")
    bank = SkillBank("ci-1", (Skill("tidy", "### Be tidy\n- Click only listed values.",
                                    metadata={"estimated_effect": 0.05}),))
    path = save_skillbank(bank, tmp_path / "bank" / "skillbank.json")
    first = round_curriculum(params.round, 0, path, recorded_path=path.name)
    inputs = RoundInputs(checkpoint=None, skillbank=path, curriculum=first, warmstart_dir=None)
    result = co_evolve(params, 2, start=inputs, config=CoEvolveConfig(evolve=False), out_dir=tmp_path / "chain",
                       store_root=small_store_root, progress=False)
    assert [r.gate_status for r in result.rounds] == [NOT_EVOLVING, NOT_EVOLVING]
    assert not any((r.root / "analysis").exists() or r.gate_dir.exists() for r in result.rounds)
    second = json.loads((result.rounds[1].root / "plan.json").read_text())["curriculum_state_id"]
    assert second == round_curriculum(params.round, 1, path, recorded_path=path.name).state_id != first.state_id
    assert [c.skill_id for c in result.rounds[1].curriculum().chunks] == ["tidy"]
    skill_free = co_evolve(params, 1, start=RoundInputs(None, None, None, None), out_dir=tmp_path / "bare",
                           config=CoEvolveConfig(evolve=False), store_root=small_store_root, progress=False)
    assert skill_free.rounds[0].curriculum_path is None
    assert json.loads((skill_free.rounds[0].root / "plan.json").read_text())["curriculum_state_id"] is None


@pytest.mark.e2e
def test_a_round_with_an_llm_analyst_repairs_or_rejects_messy_replies_and_gates_the_pool(
        tmp_path: Path, small_store_root: Path, small_store) -> None:
    catalog, index, _ = small_store
    model = MessyModel(ShopEngine(catalog.products, catalog.goals, index))
    server = ScriptedServer(model)
    params = ci_params(tmp_path / "runs")
    with serve_in_thread(server.app) as running:
        settings = AnalystSettings(LLM, f"{running.base_url}/v1", model="scripted")
        result = co_evolve(params, 1, start=start(params), config=CoEvolveConfig(max_candidates=2, analyst=settings),
                           out_dir=tmp_path / "co-evolve", store_root=small_store_root, progress=False)
    (finished,) = result.rounds
    analysis = finished.root / "analysis"
    summary = json.loads((analysis / "analysis_summary.json").read_text())
    # two failed retries: each card's broken call and wrong-keyed prose are rejected, its prose card repaired;
    # the first card names the gold product (downgraded), the compiler's first draft too (rejected)
    assert (summary["analyst"], summary["analyzed_cards"], summary["eligible_cards"]) == ("llm", 2, 1)
    assert summary["rejections"] == {"gold_leak": 2, "invalid_fields": 2, "invalid_json": 2}
    assert summary["repairs"] == {"json_from_text": 3}
    assert summary["downgrades"] == {REASON_FIREWALL: 1} and summary["fallback_reason"] is None
    cards = read_cards(analysis / "evidence_cards.jsonl")
    assert sorted(c.downgrade_reason or "kept" for c in cards.values()) == [REASON_FIREWALL, "kept"]
    pool = load_pool(finished.pool_path)
    assert [c.metadata["title"] for c in pool.candidates] == ["Select every option axis"]
    assert summary["candidates"] == 1
    pool_text = finished.pool_path.read_text(encoding="utf-8")
    assert model.gold_names and not any(name in pool_text for name in model.gold_names)
    # the gate ran on the pool (current skills and the accepted candidate) on the frozen checkpoint
    assert finished.gate_status == "complete"
    contributions = load_contributions(finished.gate_dir / "contributions.json")
    assert {r.intervention_id for r in contributions.contributions} >= {"tidy", "budget",
                                                                        pool.candidates[0].candidate_id}
    plan = json.loads((result.run_dir / "plan.json").read_text())
    assert plan["config"]["analyst"] == {"kind": "llm", "url": settings.url, "model": "scripted",
                                         "max_turns": 20, "max_tokens": 4096}
    # the same round analysed by `trace2skill analyze` with a real model served by serve-policy (a random-init
    # organism): every reply is rejected with its reason, and the round still gets its fallback pool
    again = tmp_path / "again" / "round-000"
    shutil.copytree(finished.root, again, ignore=shutil.ignore_patterns("analysis", "gate"))
    bank = save_skillbank(curriculum_bank(start(params).curriculum, "round-000"), tmp_path / "bank.json")
    with serve_in_thread(random_organism_app()) as running:
        printed = CliRunner().invoke(cli_app, [
            "trace2skill", "analyze", "--round-dir", str(again), "--store", str(small_store_root), "--bank",
            str(bank), "--analyst", "llm", "--analyst-url", f"{running.base_url}/v1", "--analyst-max-turns", "2",
            "--analyst-max-tokens", "8", "--json"])
    assert printed.exit_code == 0, printed.output
    real = json.loads(printed.stdout)
    assert (real["analyst"], real["analyzed_cards"], real["fallback_reason"]) == ("llm", 2, "no_eligible_cards")
    assert sum(real["rejections"].values()) == 2 * 3 and real["downgrades"] == {"analyst_no_valid_submission": 2}


def random_organism_app() -> FastAPI:
    """``serve-policy``'s app over a random-init organism that writes at most 8 tokens a reply."""
    config = OrganismConfig(vocab_size=1024, hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1,
                            head_dim=32, intermediate_size=128, max_position=16384, seed=5)
    tokenizer = train_tokenizer(protocol_corpus(), config.vocab_size)
    return create_app(HFPolicy(build_organism(config, tokenizer), tokenizer), ServerConfig(default_max_tokens=8))


def test_a_rule_analyst_plan_keeps_its_fingerprint() -> None:
    """The analyst setting joined the plan's config after plans were written: at its rule default it stays out,
    so a rule-analyst plan's fingerprint is the one computed before it existed."""
    params = ci_params(Path("runs"))  # relative to the project: the plan holds no machine path
    params = params.model_copy(update={"round": params.round.model_copy(update={"skillbank": None})})  # ci.yaml then
    fingerprints = [sha256_json(coevolve_plan(params, config, start(params)))
                    for config in (CoEvolveConfig(), CoEvolveConfig(max_candidates=2))]
    # computed with the code before the analyst setting existed (commit 2612c52)
    assert fingerprints == ["262726c83b0e21cb6b71e8ff5812e3868ec3dffc8fd3e7e47aa3ca5a72542c86",
                            "695c2b6efa36420462f35d081ce5307a9d236aac07730e8fac3ab090433c4cf1"]
    llm = CoEvolveConfig(analyst=AnalystSettings(LLM, "http://127.0.0.1:30000/v1"))
    assert coevolve_plan(params, llm, start(params))["config"]["analyst"]["kind"] == "llm"


@pytest.mark.parametrize(("flags", "message"), [
    (["--analyst", "llm"], "--analyst-url: required with --analyst llm"),
    (["--analyst-url", "http://127.0.0.1:1/v1"], "--analyst-url: only with --analyst llm"),
    (["--analyst", "llm", "--analyst-url", "http://127.0.0.1:1/v1", "--analyst-max-turns", "0"],
     "--analyst-max-turns: must be >= 1"),
    (["--analyst", "oracle"], "--analyst: expected one of rule, llm"),
])
def test_co_evolve_refuses_bad_analyst_flags_before_any_work(tmp_path: Path, flags: list[str],
                                                             message: str) -> None:
    out = tmp_path / "co-evolve"
    result = CliRunner().invoke(cli_app, ["co-evolve", "--params", "params/ci.yaml", "--rounds", "1",
                                          "--out", str(out), *flags])
    assert result.exit_code == 1 and result.output.startswith(f"error: {message}")
    assert result.output.count("\n") == 1
    assert not out.exists()
