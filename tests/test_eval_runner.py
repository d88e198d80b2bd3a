"""The evaluation runner: plan fingerprint, summary schema, resume after a kill, retries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from policy_doubles import KilledAfter

from intraskill.agent.runtime import episode_seed
from intraskill.agent.traces import read_traces
from intraskill.chat.base import ChatRequest, Generation, SessionTokens
from intraskill.evaluate.records import EvalSummary
from intraskill.evaluate import runner
from intraskill.evaluate.runner import BlockOrder, PlanMismatchError, read_plan, run_eval
from intraskill.evaluate.summary import DuplicateEpisodeError, summarize
from intraskill.params import Params, params_from_dict, plan_dump, section_plan
from intraskill.policy.expert_policy import ExpertPolicy
from intraskill.shop.scripted_expert import Competences

SUMMARY_KEYS = {
    "counts": ["requested", "trace_files", "completed", "failed", "scored", "coverage"],
    "primary": ["reward_mean", "reward_sem", "success_rate"],
    "reward_components": ["r_att", "r_loose", "r_option", "r_price", "r_strict", "r_success", "r_type"],
    "behavior": ["steps_mean", "model_steps", "protocol_errors", "protocol_error_rate", "policy_failures",
                 "policy_failure_rate", "invalid_action_rate", "invalid_actions", "total_actions",
                 "termination_reasons"],
    "cost": ["duration_ms_mean", "tokens"],
}


def make_params(tmp_path: Path, **sections: dict[str, Any]) -> Params:
    """The ``ci`` parameter set with the small test store (scale small, seed 11) and overrides."""
    data: dict[str, Any] = {
        "experiment": {"name": "eval-test", "seed": 7, "run_root": str(tmp_path / "runs")},
        "store": {"scale": "small", "seed": 11},
        "model": {"spec": "expert", "device": "cpu",
                  "organism": {"vocab_size": 1024, "hidden_size": 64, "num_layers": 2, "num_heads": 4,
                               "num_kv_heads": 2, "intermediate_size": 128}},
        "sampling": {"temperature": 1.0, "max_tokens_per_turn": 48, "max_turns": 30},
        "evaluation": {"repeats": 1, "task_limit": 6, "bootstrap_samples": 1000},
    }
    for name, values in sections.items():
        data[name] = {**data[name], **values}
    return params_from_dict(data)


class FailingFor:
    """Raises for one episode during its first ``attempts`` attempts (an environment-independent failure)."""

    def __init__(self, policy: ExpertPolicy, session_id: str, attempts: int) -> None:
        self.policy, self.session_id, self.attempts_left = policy, session_id, attempts

    @property
    def identity(self) -> dict[str, Any]:
        return self.policy.identity

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        if self.attempts_left > 0 and any(r.session_id == self.session_id for r in requests):
            raise RuntimeError("backend crashed")
        return self.policy.generate(requests)

    def end_session(self, session_id: str) -> SessionTokens | None:
        if session_id == self.session_id:
            self.attempts_left -= 1
        return self.policy.end_session(session_id)


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "traces.jsonl").read_text(encoding="utf-8").splitlines()]


def test_expert_run_writes_plan_traces_and_summary(tmp_path: Path, small_store_root: Path) -> None:
    params = make_params(tmp_path)
    run = run_eval(params, "val", None, None, tmp_path / "run", progress=False, batch_size=4,
                   store_root=small_store_root)
    summary = json.loads((run.run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["schema_version"] == "shopsimrl-eval-summary-v2"
    assert list(summary) == ["schema_version", "created_at", "counts", "primary", "reward_components",
                             "behavior", "cost", "errors"]
    for block, keys in SUMMARY_KEYS.items():
        assert list(summary[block]) == keys, block
    assert summary["cost"]["tokens"] == {"completion_tokens": 0, "prompt_tokens": 0, "total_tokens": 0}
    assert summary["counts"] == {"requested": 6, "trace_files": 6, "completed": 6, "failed": 0, "scored": 6,
                                 "coverage": 1.0}
    traces = read_traces(run.traces_path)
    rewards = [t.reward.reward for t in traces]
    assert summary["primary"]["reward_mean"] == pytest.approx(sum(rewards) / 6)
    assert summary["behavior"]["model_steps"] == sum(t.counts["model_steps"] for t in traces)
    assert summary["behavior"]["termination_reasons"] == {"purchase": 6}
    assert EvalSummary.read(run.run_dir / "summary.json") == run.summary
    plan = read_plan(run.run_dir)
    assert plan.fingerprint == run.plan.fingerprint
    assert sorted(plan.jobs) == sorted((t.task_id, 0) for t in traces)
    assert plan.skills == {"provider": "none"} and plan.model["checkpoint_id"] == "all"
    assert all(t.provenance["seeds"]["episode_seed"] == episode_seed(7, t.task_id, 0) for t in traces)


@pytest.mark.e2e
def test_random_init_organism_run(tmp_path: Path, small_store_root: Path) -> None:
    params = make_params(tmp_path, model={"spec": "organism"}, evaluation={"task_limit": 2},
                         sampling={"max_turns": 2, "max_tokens_per_turn": 8})
    run = run_eval(params, "test", None, "none", tmp_path / "organism", progress=False,
                   store_root=small_store_root)
    assert run.plan.model["backend"] == "hf" and run.plan.model["organism"]["hidden_size"] == 64
    counts = run.summary.counts
    assert counts.requested == 2 and counts.completed + counts.failed == 2
    assert run.summary.behavior.model_steps >= 2
    assert run.summary.cost.tokens.prompt_tokens > 0


@pytest.mark.e2e
def test_resume_after_kill_runs_every_episode_once(tmp_path: Path, small_store_root: Path) -> None:
    params = make_params(tmp_path)
    out = tmp_path / "killed"
    with pytest.raises(KeyboardInterrupt):
        run_eval(params, "val", None, None, out, policy=KilledAfter(ExpertPolicy(seed=7), calls=9),
                 progress=False, batch_size=2, store_root=small_store_root)
    before = _records(out)
    assert 0 < len(before) < 6 and all(r["status"] == "completed" for r in before)
    with open(out / "traces.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"episode_id": "torn')  # a kill in the middle of a write
    run = run_eval(params, "val", None, None, out, progress=False, batch_size=2, store_root=small_store_root)
    after = _records(out)
    assert after[:len(before)] == before
    ids = [r["episode_id"] for r in after]
    assert len(ids) == len(set(ids)) == 6
    assert run.summary.counts.completed == 6
    run_eval(params, "val", None, None, out, progress=False, store_root=small_store_root)
    assert _records(out) == after


@pytest.mark.e2e
def test_changed_plan_is_refused_naming_the_field(tmp_path: Path, small_store_root: Path) -> None:
    params = make_params(tmp_path, evaluation={"task_limit": 2})
    out = tmp_path / "run"
    run_eval(params, "val", None, None, out, progress=False, store_root=small_store_root)
    with pytest.raises(PlanMismatchError, match=r"model\.checkpoint_id"):
        model = params.model.model_copy(update={"spec": "expert:without:page_on"})
        ablated = params.model_copy(update={"model": model})
        run_eval(ablated, "val", None, None, out, progress=False, store_root=small_store_root)
    with pytest.raises(PlanMismatchError, match=r"runtime\.max_turns"):
        run_eval(make_params(tmp_path, evaluation={"task_limit": 2}, sampling={"max_turns": 12}),
                 "val", None, None, out, progress=False, store_root=small_store_root)
    with pytest.raises(PlanMismatchError, match="jobs"):
        run_eval(params, "val", None, None, out, progress=False, limit=3, store_root=small_store_root)
    assert len(_records(out)) == 2


def test_the_plan_records_its_provenance_beside_the_fingerprint(tmp_path: Path, small_store_root: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    params = make_params(tmp_path, evaluation={"task_limit": 2})
    out = tmp_path / "run"
    run = run_eval(params, "val", None, None, out, progress=False, store_root=small_store_root)
    stored = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert stored["provenance"]["schema_version"] == "intraskill-provenance-v1"
    assert {"git_commit", "torch_threads"} <= set(stored["provenance"]) and read_plan(out) == run.plan
    stored["provenance"]["torch_threads"] = -1  # as if recorded elsewhere: the resume warns and goes on
    (out / "plan.json").write_text(json.dumps(stored), encoding="utf-8")
    with caplog.at_level("WARNING"):
        run_eval(params, "val", None, None, out, progress=False, store_root=small_store_root)
    assert "different provenance" in caplog.text and "torch_threads" in caplog.text


@pytest.mark.e2e
def test_failed_episode_is_retried_and_the_attempt_kept(tmp_path: Path, small_store_root: Path) -> None:
    params = make_params(tmp_path, evaluation={"task_limit": 3})
    first = run_eval(params, "val", None, None, tmp_path / "probe", progress=False,
                     store_root=small_store_root)
    target = read_traces(first.traces_path)[1].episode_id
    run = run_eval(params, "val", None, None, tmp_path / "retry", progress=False, store_root=small_store_root,
                   policy=FailingFor(ExpertPolicy(seed=7), target, 1))
    statuses = [(r["episode_id"], r["status"]) for r in _records(run.run_dir)]
    assert statuses.count((target, "failed")) == 1 and statuses.count((target, "completed")) == 1
    assert "backend crashed" in next(r["error"] for r in _records(run.run_dir) if r["status"] == "failed")
    assert run.summary.counts.completed == 3 and run.summary.counts.failed == 0

    stuck = run_eval(params, "val", None, None, tmp_path / "stuck", progress=False,
                     store_root=small_store_root, policy=FailingFor(ExpertPolicy(seed=7), target, 99))
    assert [r["episode_id"] for r in _records(stuck.run_dir)].count(target) == 3
    assert stuck.summary.counts.to_dict() == {"requested": 3, "trace_files": 3, "completed": 2, "failed": 1,
                                       "scored": 2, "coverage": pytest.approx(2 / 3)}
    assert stuck.summary.errors == {"RuntimeError": 1}


class Appended(list):
    def append(self, record: dict[str, Any]) -> None:
        super().append(record["episode_id"])


def test_block_order_holds_a_block_until_every_block_before_it_has_finished() -> None:
    written = Appended()
    order = BlockOrder(written, ["a", "b", "c", "d", "e"], block=2)
    for episode in ["c", "b", "e", "a"]:
        order.append({"episode_id": episode})
    assert written == ["b", "a", "c"]  # a block keeps its arrival order; c waited for block 0, e for d
    order.append({"episode_id": "d"})
    assert written == ["b", "a", "c", "d", "e"]


def _episodes(run_dir: Path) -> list[dict[str, Any]]:
    return [{k: v for k, v in record.items() if k not in ("duration_ms", "record_sha256")}
            for record in _records(run_dir)]


def _summary(run_dir: Path) -> dict[str, Any]:
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    del summary["created_at"], summary["cost"]["duration_ms_mean"]
    return summary


def test_a_larger_lockstep_batch_writes_the_same_files(tmp_path: Path, small_store_root: Path, monkeypatch) -> None:
    """Traces go out in blocks of ``TRACE_BLOCK`` jobs, each in finish order: with blocks of one job, one batch of 6
    writes what batches of 1 wrote, episode for episode in the same order, and the same summary; the batch size is
    in no plan. In one block of 6 the batch writes its finish order (task 16 ends a turn before task 7), which
    differs: without the blocks the file would depend on the batch."""
    monkeypatch.setattr(runner, "TRACE_BLOCK", 1)
    params = make_params(tmp_path)
    runs = {size: run_eval(params, "val", None, None, tmp_path / f"batch-{size}", progress=False, batch_size=size,
                           store_root=small_store_root, policy=ExpertPolicy(seed=7)) for size in (1, 6)}
    assert _episodes(runs[6].run_dir) == _episodes(runs[1].run_dir)
    assert _summary(runs[6].run_dir) == _summary(runs[1].run_dir)
    assert runs[6].plan.fingerprint == runs[1].plan.fingerprint
    monkeypatch.setattr(runner, "TRACE_BLOCK", 6)
    whole = run_eval(params, "val", None, None, tmp_path / "one-block", progress=False, batch_size=6,
                     store_root=small_store_root, policy=ExpertPolicy(seed=7))
    assert sorted(_episodes(whole.run_dir), key=str) == sorted(_episodes(runs[1].run_dir), key=str)
    assert _episodes(whole.run_dir) != _episodes(runs[1].run_dir)
    larger = params.model_copy(update={"evaluation": params.evaluation.model_copy(update={"batch_size": 200})})
    assert section_plan(larger.evaluation) == section_plan(params.evaluation)
    assert plan_dump(larger) == plan_dump(params)


def test_summary_refuses_a_second_completed_record(tmp_path: Path, small_store_root: Path) -> None:
    params = make_params(tmp_path, evaluation={"task_limit": 1})
    run = run_eval(params, "val", None, None, tmp_path / "run", progress=False, store_root=small_store_root)
    traces = read_traces(run.traces_path)
    with pytest.raises(DuplicateEpisodeError, match=traces[0].episode_id):
        summarize(traces + traces, requested=1)


def test_equipped_run_records_the_bank(tmp_path: Path, small_store_root: Path) -> None:
    from intraskill.skills.bank import Skill, SkillBank, save_skillbank

    bank = SkillBank("test-v1", (Skill("chunk-a", "### A\n\n- Applies when: x"),))
    path = save_skillbank(bank, tmp_path / "bank.json")
    params = make_params(tmp_path, evaluation={"task_limit": 2})
    run = run_eval(params, "val", None, path, tmp_path / "eq", progress=False, store_root=small_store_root,
                   policy=ExpertPolicy(Competences(), seed=7))
    assert run.plan.skills["bank_sha256"] == bank.sha256 and run.plan.skills["skill_ids"] == ["chunk-a"]
    assert all([s["skill_id"] for s in t.provenance["selected_skills"]] == ["chunk-a"]
               for t in read_traces(run.traces_path))


@pytest.mark.e2e
def test_a_deleted_plan_is_refused_like_a_changed_one(tmp_path: Path, small_store_root: Path) -> None:
    """Deleting ``plan.json`` does not let a resume with another temperature mix its traces with the first plan's."""
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_eval(make_params(tmp_path), "val", None, None, out, policy=KilledAfter(ExpertPolicy(seed=7), calls=9),
                 progress=False, batch_size=2, store_root=small_store_root)
    before = _records(out)
    (out / "plan.json").unlink()
    with pytest.raises(PlanMismatchError, match=rf"{out / 'plan.json'} is missing but {out} holds traces.jsonl"):
        run_eval(make_params(tmp_path, sampling={"temperature": 0.5}), "val", None, None, out, progress=False,
                 store_root=small_store_root)
    assert _records(out) == before and not (out / "plan.json").exists()
