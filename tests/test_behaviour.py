"""intraskill.analysis.behaviour: behaviour tables on real runtime traces of the scripted expert, the
paired behaviour deltas with the release's numpy bootstrap, and the schema of the release excerpt."""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reward_helpers import strict_reward

from intraskill.agent.traces import EpisodeTrace, TurnRecord, read_traces
from intraskill.analysis.behaviour import (
    BEHAVIOUR_METRICS,
    PHASES,
    BehaviourDelta,
    PairedBlock,
    compare_behaviour,
    episode_behaviour,
    episode_table,
    paired_block,
    phase_summary,
    release_behaviour,
    scored_traces,
    side_by_side,
    turn_behaviours,
    turn_table,
)
from intraskill.analysis.release import locate_release_dir
from intraskill.chat.base import ChatRequest, Generation, SessionTokens
from intraskill.chat.chatml import parse_tool_calls, render_tool_call
from intraskill.evaluate.bootstrap import numpy_paired_bootstrap
from intraskill.evaluate.runner import EvalRun, run_eval
from intraskill.params import params_from_dict
from intraskill.pipeline.notebook import behaviour_runs, run_label
from intraskill.policy.expert_policy import ExpertPolicy, competences_from_tag

BASE_TAG = "without:inspect_candidates,check_budget"
NEXT_PAGE = "next >"
BACK = "click[back to search]"
TOKEN_METRICS = ("tokens_per_turn", "generated_tokens", "first_turn_tokens")


class Instrumented:
    """The expert with a ``<think>`` prefix and a token count on every turn. With ``detours``, each
    sample-1 episode answers turn 1 with an empty reply (a protocol error), then clicks ``next >`` and
    opens the first product of page 2, and lets the expert go on from there."""

    def __init__(self, policy: ExpertPolicy, detours: bool) -> None:
        self.policy, self.detours = policy, detours
        self.detoured: dict[str, int] = {}

    @property
    def identity(self) -> dict[str, Any]:
        return {**self.policy.identity, "instrumented": True, "detours": self.detours}

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        return [self._reply(request) for request in requests]

    def end_session(self, session_id: str) -> SessionTokens | None:
        return self.policy.end_session(session_id)

    def _detour(self, request: ChatRequest, turn: int) -> str | None:
        """The detour's click value on this turn, or ``None`` to let the expert act."""
        if not (self.detours and request.session_id.endswith("__sample-001")):
            return None
        click = next((t["function"] for t in request.tools if t["function"]["name"] == "click"), None)
        enum = click["parameters"]["properties"]["value"].get("enum", []) if click else []
        done = self.detoured.setdefault(request.session_id, 0)
        if done == 0 and NEXT_PAGE in enum:
            self.detoured[request.session_id] = 1
            return NEXT_PAGE
        if done == 1:
            self.detoured[request.session_id] = 2
            return next(value for value in enum if value.isdigit())
        return None

    def _reply(self, request: ChatRequest) -> Generation:
        turn = sum(message["role"] == "assistant" for message in request.messages)
        if self.detours and request.session_id.endswith("__sample-001") and turn == 1:
            return Generation(text="", content="", tool_calls=[], finish_reason="stop", prompt_tokens=0,
                              completion_tokens=1)
        value = self._detour(request, turn)
        if value is not None:
            tool_text = render_tool_call("click", {"value": value})
        else:
            tool_text = self.policy.generate([request])[0].text
        _, calls, error = parse_tool_calls(tool_text)
        text = f"<think>turn {turn}: weigh the page</think>{tool_text}"
        return Generation(text=text, content="", tool_calls=calls, finish_reason="stop", parse_error=error,
                          prompt_tokens=0, completion_tokens=len(text) // 4 + 1)


def _params(tmp: Path, repeats: int):
    return params_from_dict({
        "experiment": {"name": "behaviour-test", "seed": 7, "run_root": str(tmp / "runs")},
        "store": {"scale": "small", "seed": 11},
        "model": {"spec": "expert", "device": "cpu"},
        "sampling": {"temperature": 1.0, "max_tokens_per_turn": 48, "max_turns": 30},
        "evaluation": {"repeats": repeats, "task_limit": 40, "bootstrap_samples": 1000},
    })


@pytest.fixture(scope="module")
def runs(small_store_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, EvalRun]:
    """Three val runs through the eval runner: a = expert without candidate inspection / budget check
    (one sample per task), b = full expert with detours (two samples per task), plain = the bare expert."""
    tmp = tmp_path_factory.mktemp("behaviour")
    arms = {
        "a": (Instrumented(ExpertPolicy(competences_from_tag(BASE_TAG)), detours=False), 1),
        "b": (Instrumented(ExpertPolicy(), detours=True), 2),
        "plain": (ExpertPolicy(), 1),
    }
    return {
        name: run_eval(_params(tmp, repeats), "val", None, None, tmp / name, policy=policy, progress=False,
                       store_root=small_store_root)
        for name, (policy, repeats) in arms.items()
    }


@pytest.fixture(scope="module")
def comparison(runs: dict[str, EvalRun]):
    return compare_behaviour(runs["a"].run_dir, runs["b"].run_dir, a_label="base stand-in", b_label="expert")


def _actions(trace: EpisodeTrace) -> list[str]:
    return [turn.action for turn in trace.turns if turn.action]


def _count(actions: list[str], predicate) -> float:
    return float(sum(1 for action in actions if predicate(action)))


def _is_open(action: str) -> bool:
    return action.startswith("click[") and action[6:-1].isdigit()


# --- hand-computed expectations on real traces ------------------------------------------------------
def test_expert_counts_follow_its_actions(runs: dict[str, EvalRun]) -> None:
    """The expert only clicks ``< prev`` to reject a product and ASINs on results pages, so each count
    follows from its action strings; inspect_candidates gives backtracks somewhere."""
    traces = scored_traces(runs["plain"].run_dir)
    assert len(traces) == 40
    for trace in traces:
        actions, metrics = _actions(trace), episode_behaviour(trace)
        assert metrics["searches"] == _count(actions, lambda a: a.startswith("search["))
        assert metrics["backtracks"] == _count(actions, lambda a: a in ("click[< prev]", BACK))
        assert metrics["pagination"] == _count(actions, lambda a: a == "click[next >]")
        assert metrics["product_opens"] == _count(actions, _is_open)
        assert metrics["option_selections"] == _count(actions, lambda a: "=" in a)
        assert metrics["model_steps"] == trace.counts["model_steps"]
        assert metrics["actions"] == metrics["valid_actions"] == trace.counts["steps"]
        assert metrics["protocol_errors"] == metrics["invalid_actions"] == 0.0
        assert metrics["reasoning_chars_per_turn"] == 0.0
        assert all(math.isnan(metrics[m]) for m in TOKEN_METRICS)
    rejecting = [t for t in traces if "click[< prev]" in _actions(t)]
    assert rejecting, "the full expert (inspect_candidates on) rejects some product on the val split"
    metrics = episode_behaviour(rejecting[0])
    assert metrics["backtracks"] >= 1 and metrics["product_opens"] == metrics["backtracks"] + 1
    assert metrics["unique_products"] == metrics["product_opens"] and metrics["product_revisits"] == 0


def test_first_result_opened_has_rank_one(runs: dict[str, EvalRun]) -> None:
    """Without candidate inspection the expert opens the first result of page 1."""
    table = episode_table(runs["a"].run_dir)
    assert (table["first_product_rank"] == 1.0).all() and (table["pagination"] == 0).all()


def test_detour_episode_turn_by_turn(runs: dict[str, EvalRun]) -> None:
    """A sample-1 episode of run b: search, empty reply, a repair turn that pages on, then the first
    product of page 2 is opened (printed rank 21 with 20 products a page)."""
    traces = [t for t in scored_traces(runs["b"].run_dir) if t.sample_id == 1]
    assert len(traces) == 40
    for trace in traces:
        turns = turn_behaviours(trace)
        phases = ["search_home", "search_results", "protocol_repair", "search_results"]
        assert [t.phase for t in turns[:4]] == phases
        assert [t.kind for t in turns[:4]] == ["search", None, "pagination", "product_open"]
        assert turns[1].protocol_error == "empty_response" and turns[2].page == "search_results"
        metrics = episode_behaviour(trace)
        assert metrics["pagination"] >= 1.0 and metrics["protocol_errors"] == 1.0
        assert metrics["model_steps"] == metrics["actions"] + 1
        assert metrics["first_product_rank"] == turns[3].opened_rank == 21
        record = trace.turns
        tokens = [turn.completion_tokens for turn in record]
        assert metrics["generated_tokens"] == sum(tokens)
        assert metrics["tokens_per_turn"] == sum(tokens) / len(record)
        assert metrics["first_turn_tokens"] == tokens[0]
        expected_chars = sum(len(f"turn {t.turn}: weigh the page") for t in record if t.raw_output)
        assert metrics["reasoning_chars_per_turn"] == expected_chars / len(record)


# --- a hand-built episode covering every rule -------------------------------------------------------
def _results_page(*asins: str, first_rank: int = 1) -> str:
    lines = ["Page: search results", "Search: blue mug", "Products:"]
    for offset, asin in enumerate(asins):
        lines += [f"{first_rank + offset}. Mug {asin}", f"   ASIN: {asin}", "   Price: 5.0"]
    return "\n".join(lines)


def _turn(index: int, action: str | None, page: str | None, *, valid: bool | None = True, raw: str = "x",
          observation: str | None = None, tokens: int = 10) -> TurnRecord:
    return TurnRecord(turn=index, raw_output=raw, content="", tool_calls=[], finish_reason="stop",
                      parse_error=None, protocol_error=None if action else "tool_call_count", action=action,
                      action_valid=valid if action else None, page_type=page,
                      observation=observation or (f"Page: {page}" if page else None),
                      completion_tokens=tokens)


def _hand_built(tokens_last: int = 10) -> EpisodeTrace:
    steps = [
        ("search[Blue Mug]", "search_results", True, _results_page("A1", "A2")),
        ("click[A2]", "product_detail", True, None),
        ("click[color=blue]", "product_detail", True, None),
        ("click[color=red]", "product_detail", True, None),
        ("click[< prev]", "search_results", True, _results_page("A1", "A2")),
        (None, None, None, None),
        ("click[A2]", "product_detail", True, None),
        ("click[size=xl]", "product_detail", True, None),
        ("click[back to search]", "search_home", True, None),
        ("search[blue  mug!]", "search_results", True, _results_page("A1", "A2")),
        ("click[next >]", "search_results", True, _results_page("A3", first_rank=21)),
        ("click[bogus]", "search_results", False, _results_page("A3", first_rank=21)),
        ("click[A3]", "product_detail", True, None),
        ("click[buy now]", "terminal", True, None),
    ]
    turns = [_turn(i, action, page, valid=valid, observation=obs)
             for i, (action, page, valid, obs) in enumerate(steps)]
    turns[0].raw_output = "<think>abc</think><tool_call>{}</tool_call>"
    turns[-1].completion_tokens = tokens_last
    return EpisodeTrace("task-000001__sample-000", 1, 0, "completed", provenance={}, turns=turns,
                        reward=strict_reward(1.0))


def test_hand_built_episode() -> None:
    metrics = episode_behaviour(_hand_built())
    expected = {
        "model_steps": 14, "actions": 13, "valid_actions": 12, "invalid_actions": 1, "protocol_errors": 1,
        "searches": 2, "unique_queries": 1, "product_opens": 3, "unique_products": 2, "product_revisits": 1,
        "backtracks": 2, "pagination": 1, "option_selections": 3, "option_changes": 1,
        "first_product_rank": 2, "generated_tokens": 140, "tokens_per_turn": 10, "first_turn_tokens": 10,
        "reasoning_chars_per_turn": 3 / 14,
        "success": 1.0, "reward": 1.0,
    }
    assert metrics == pytest.approx(expected)
    phases = [t.phase for t in turn_behaviours(_hand_built())]
    assert phases == ["search_home", "search_results", "product_detail", "product_detail", "product_detail",
                      "search_results", "protocol_repair", "product_detail", "product_detail", "search_home",
                      "search_results", "search_results", "search_results", "product_detail"]
    uncounted = episode_behaviour(_hand_built(tokens_last=0))
    assert math.isnan(uncounted["tokens_per_turn"]) and math.isnan(uncounted["generated_tokens"])
    assert uncounted["first_turn_tokens"] == 10


# --- pairing and the bootstrap ------------------------------------------------------------------------
def _task_means(run_dir: Path, value) -> dict[int, float]:
    """Per-task mean of ``value(trace)`` over the completed records, computed straight from the JSONL."""
    per_task: dict[int, list[float]] = defaultdict(list)
    for trace in read_traces(run_dir / "traces.jsonl"):
        if trace.status == "completed" and trace.reward is not None:
            per_task[trace.task_id].append(float(value(trace)))
    return {task: sum(values) / len(values) for task, values in per_task.items()}


@pytest.mark.parametrize(("metric", "value"), [
    ("model_steps", lambda t: len(t.turns)),
    ("protocol_errors", lambda t: t.counts["protocol_errors"]),
    ("generated_tokens", lambda t: t.tokens["completion"]),
])
def test_paired_ci_reproduces_numpy_bootstrap(runs, comparison, metric: str, value) -> None:
    a, b = _task_means(runs["a"].run_dir, value), _task_means(runs["b"].run_dir, value)
    tasks = sorted(set(a) & set(b))
    direct = numpy_paired_bootstrap([a[t] for t in tasks], [b[t] for t in tasks], metric)
    block = comparison.paired["all"].metrics[metric]
    assert block == BehaviourDelta(n=direct.pairs, a_mean=direct.a_mean, b_mean=direct.b_mean,
                                   difference=direct.mean_difference, ci95=direct.ci95)
    assert direct.samples == 5000
    assert direct.seed == int.from_bytes(hashlib.sha256(f"20260909:{metric}".encode()).digest()[:4], "big")


def test_pairing_averages_repeats(comparison) -> None:
    """Run b has two samples per task, one with a protocol error: each task averages to 0.5."""
    block = comparison.paired["all"]
    assert block.paired_tasks == 40 and len(comparison.b_episodes) == 80
    errors = block.metrics["protocol_errors"]
    assert errors.n == 40 and errors.a_mean == 0.0 and errors.b_mean == 0.5
    assert errors.ci95 == (0.5, 0.5)


def test_both_success_is_conditioned_and_descriptive(comparison) -> None:
    won = {arm: table[table["success"] == 1.0] for arm, table in
           (("a", comparison.a_episodes), ("b", comparison.b_episodes))}
    assert comparison.paired["both_success"] == paired_block(won["a"], won["b"])
    both = comparison.paired["both_success"]
    assert 0 < both.paired_tasks <= comparison.paired["all"].paired_tasks
    record = comparison.to_dict()
    assert record["paired"]["both_success"]["descriptive"] is True
    assert "descriptive" in record["uncertainty"]["success_conditioning"]
    json.dumps(record, allow_nan=False)


def test_phase_summary(comparison) -> None:
    turns = comparison.b_turns
    table = phase_summary(turns).set_index("phase")
    assert list(table.index) == list(PHASES)
    repair = turns[turns["phase"] == "protocol_repair"]["tokens"].to_numpy()
    assert table.loc["protocol_repair", "n"] == 40 == len(repair)
    assert table.loc["protocol_repair", "mean"] == pytest.approx(repair.mean())
    assert table.loc["protocol_repair", "p90"] == pytest.approx(np.quantile(repair, 0.9))
    assert table["n"].sum() == len(turns)
    assert set(comparison.phases()["value"]) == {"tokens"}


def test_plain_expert_records_no_tokens(runs, comparison) -> None:
    plain = compare_behaviour(runs["a"].run_dir, runs["plain"].run_dir, samples=200)
    assert plain.paired["all"].metrics["tokens_per_turn"] == BehaviourDelta(
        n=0, a_mean=None, b_mean=None, difference=None, ci95=None)
    assert not plain.records_tokens and set(plain.phases()["value"]) == {"output_chars"}
    assert plain.to_frame().set_index("metric").loc["tokens_per_turn"].isna().sum() == 5


# --- release schema, tables and errors ---------------------------------------------------------------
def test_schema_covers_release_excerpt(comparison) -> None:
    release = release_behaviour(locate_release_dir())
    ours = comparison.to_dict()
    for theirs_name, our_name in (("fixed_val_all", "all"), ("fixed_val_both_success", "both_success")):
        theirs, mine = release["paired"][theirs_name], ours["paired"][our_name]
        assert set(theirs) <= set(mine)
        assert set(theirs["metrics"]) <= set(mine["metrics"])
        for name, stats in theirs["metrics"].items():
            assert {k for k in stats if not k.startswith("_")} <= set(mine["metrics"][name])
    assert set(release["paired"]["fixed_val_both_success"]["metrics"]) == set(BEHAVIOUR_METRICS)
    phase_keys = {key for record in release["phases"] for key in record} - {"round"}
    assert phase_keys <= set(ours["phases"][0])
    assert {record["phase"] for record in release["phases"]} == set(PHASES)
    table = side_by_side(comparison, release)
    assert list(table.index) == list(BEHAVIOUR_METRICS)
    assert table.loc["tokens_per_turn", ("release", "a_mean")] == 282.388
    assert math.isnan(table.loc["actions", ("release", "n")])
    assert table.loc["protocol_errors", ("ours", "b_mean")] == 0.5


def test_tables_and_labels(runs, comparison) -> None:
    turns = turn_table(runs["b"].run_dir)
    assert len(turns) == sum(len(t.turns) for t in scored_traces(runs["b"].run_dir))
    assert {"episode_id", "task_id", "sample_id", "phase", "kind", "tokens", "reasoning_chars",
            "opened_rank"} <= set(turns.columns)
    means = comparison.to_frame("means")
    assert means.loc["protocol_errors", ("expert", "mean")] == 0.5
    assert means.loc["model_steps", ("expert", "n")] == 80
    table = comparison.to_frame()
    assert list(table["metric"]) == list(BEHAVIOUR_METRICS)
    assert list(table.columns) == ["metric", "n", "a_mean", "b_mean", "difference", "ci_lo", "ci_hi"]
    assert run_label(runs["a"].run_dir) == f"scripted-expert ({BASE_TAG}), val"


def test_summary_text_and_frames(comparison) -> None:
    text = comparison.summary()
    assert text.splitlines()[1].startswith("a: base stand-in  (40 episodes, 40 tasks, ")
    assert "CIs: paired task bootstrap, 5000 resamples" in text
    assert "all: 40 paired tasks\n" in text and "; descriptive, conditioned on success" in text
    protocol = [line for line in text.splitlines() if line.startswith("protocol_errors")]
    assert protocol[0].split()[1:] == ["40", "0", "0.5", "+0.5", "[+0.5,", "+0.5]"]
    assert len(protocol) == 2
    assert comparison.to_frame("phases").equals(comparison.phases())
    assert comparison.to_frame("both_success").equals(comparison.paired["both_success"].to_frame())


def test_paired_block_round_trips_through_json(comparison) -> None:
    record = json.loads(json.dumps(comparison.to_dict()))
    for name, block in comparison.paired.items():
        assert PairedBlock.from_dict(record["paired"][name]) == block


def test_bad_input_names_the_problem(tmp_path: Path, comparison) -> None:
    with pytest.raises(ValueError, match="metrics: unknown"):
        compare_behaviour([_hand_built()], [_hand_built()], metrics=("steps",))
    with pytest.raises(FileNotFoundError, match="no traces"):
        scored_traces(tmp_path)
    with pytest.raises(KeyError, match="value"):
        phase_summary(comparison.a_turns, "latency")
    with pytest.raises(KeyError, match="subset"):
        comparison.to_frame("some")
    failed = _hand_built()
    failed.status, failed.reward = "failed", None
    with pytest.raises(ValueError, match="b: no scored episodes"):
        compare_behaviour([_hand_built()], [failed])
    with pytest.raises(ValueError, match="b_label"):
        compare_behaviour([_hand_built()], [_hand_built()], a_label="x", b_label="x")


def test_behaviour_runs_uses_given_runs_and_their_labels(runs) -> None:
    given = {arm: str(runs[arm].run_dir) for arm in ("a", "b")}
    chosen = behaviour_runs("ci", split="val", limit=8, repeats=1, max_turns=30, runs=given,
                            stand_ins={"a": "expert", "b": "expert"}, labels={"a": "", "b": "mine"})
    assert chosen.run_dirs == {arm: Path(path) for arm, path in given.items()}
    assert chosen.labels == {"a": f"scripted-expert ({BASE_TAG}), val", "b": "mine"}
    assert chosen.to_dict()["arms"]["b"] == {"run": given["b"], "label": "mine"}
