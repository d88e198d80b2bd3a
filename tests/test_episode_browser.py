"""The episode browser's data (intraskill.analysis.episodes, intraskill.report.browser) on real tiny runs, and
its live read-only replay routes served by uvicorn on 127.0.0.1 (intraskill.report.replay)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from typer.testing import CliRunner

from intraskill.agent.traces import read_traces
from intraskill.analysis import episodes as episodes_module
from intraskill.analysis.episodes import FAILURE_CLASSES, failure_class, read_episode, read_trace_file
from intraskill.cli import app as cli_app
from intraskill.report import browser
from intraskill.report.replay import replay_router
from intraskill.shop.service import serve_in_thread
from intraskill.trace2skill import mechanisms as mech

EXPERT = Path("eval-expert") / "val-s0" / "traces.jsonl"
ORGANISM = Path("eval-organism") / "val-s0" / "traces.jsonl"


def test_summaries_follow_the_traces(browser_runs: Path) -> None:
    runs = browser_runs / "runs"
    for relative in (EXPERT, ORGANISM):
        path = runs / relative
        traces = read_traces(path)
        read = read_trace_file(path, path.parent)
        assert read.split == "val" and [e.episode_id for e in read.episodes] == [t.episode_id for t in traces]
        for row, trace in zip(read.episodes, traces):
            assert row.turns == len(trace.turns) and row.failure == failure_class(trace)
            assert row.success == (trace.reward.r_success == 1.0)
            assert row.skills == tuple(s["skill_id"] for s in trace.provenance["selected_skills"])
        assert set(read.skills) == {s for row in read.episodes for s in row.skills}
    organism = read_trace_file(runs / ORGANISM, runs / ORGANISM.parent)
    assert {row.failure for row in organism.episodes} <= {mech.PROTOCOL_ERRORS, mech.ACTION_LIMIT}
    assert all(row.tokens and row.tokens > 0 for row in organism.episodes)
    expert = read_trace_file(runs / EXPERT, runs / EXPERT.parent)
    assert any(row.failure == "success" for row in expert.episodes)
    assert set(FAILURE_CLASSES) >= {row.failure for row in [*organism.episodes, *expert.episodes]}


def test_view_keeps_the_private_goal_on_the_final_panel(browser_runs: Path) -> None:
    path = browser_runs / "runs" / EXPERT
    trace = read_traces(path)[1]
    view = read_episode(path, 1)
    goal = trace.private_goal
    assert view["final"]["private_goal"] == goal and view["summary"]["episode_id"] == trace.episode_id
    outside = json.dumps({key: value for key, value in view.items() if key != "final"}, ensure_ascii=False)
    assert goal["instruction_text"] not in outside and '"private_goal"' not in outside
    assert [t["action"] for t in view["turns"]] == [t.action for t in trace.turns]
    assert view["turns"][0]["observation"] == trace.turns[0].observation
    with pytest.raises(IndexError, match="has no episode 4 \\(it holds 4\\)"):
        read_episode(path, 4)


def test_static_data_is_paged_and_chunked(browser_runs: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browser, "PAGE_SIZE", 3)
    monkeypatch.setattr(browser, "CHUNK_SIZE", 3)
    runs = browser.write_browser_data([("eval-expert", browser_runs / "runs" / "eval-expert"),
                                       ("eval-organism", browser_runs / "runs" / "eval-organism")], tmp_path)
    assert [run.id for run in runs] == ["eval-expert/val-none/traces.jsonl", "eval-expert/val-s0/traces.jsonl",
                                        "eval-organism/val-s0/traces.jsonl"]
    document = json.loads((tmp_path / "runs.json").read_text(encoding="utf-8"))
    assert document["page_size"] == 3 and document["chunk_size"] == 3 and len(document["runs"]) == 3
    for run in runs:
        assert run.episodes == 4 and run.pages == 2
        folder = tmp_path / run.folder
        rows = [row for page in range(run.pages)
                for row in json.loads((folder / f"index-{page:04d}.json").read_text())["episodes"]]
        assert [row["index"] for row in rows] == list(range(4))
        chunks = [json.loads((folder / f"episodes-{c:04d}.json").read_text())["episodes"] for c in range(2)]
        assert [len(chunk) for chunk in chunks] == [3, 1]
        assert [view["summary"]["episode_id"] for chunk in chunks for view in chunk] == [r["episode_id"] for r in rows]
    assert sorted(p.name for p in browser.copy_assets(tmp_path / "site").iterdir()) == sorted(browser.ASSETS)


@pytest.fixture(scope="module")
def replay(browser_runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    """The replay routes over a copy of the runs folder (a test appends to it), served on 127.0.0.1."""
    import shutil

    runs = tmp_path_factory.mktemp("replay") / "runs"
    shutil.copytree(browser_runs / "runs", runs)
    (runs / "notes.txt").write_text("not a trace", encoding="utf-8")
    app = FastAPI()
    app.include_router(replay_router(runs))
    with serve_in_thread(app) as running, httpx.Client(base_url=running.base_url, trust_env=False,
                                                       timeout=10) as client:
        yield client, runs


def test_live_routes_answer_the_browser_shapes(replay: tuple[httpx.Client, Path]) -> None:
    client, runs = replay
    listed = client.get("/api/replay/runs").json()
    assert listed["source"] == "live" and listed["failure_classes"] == list(FAILURE_CLASSES)
    ids = [run["id"] for run in listed["runs"]]
    assert ids == ["eval-expert/val-none/traces.jsonl", "eval-expert/val-s0/traces.jsonl",
                   "eval-organism/val-s0/traces.jsonl", "planted/co-evolve/round-000/gate/bare-val/traces.jsonl",
                   "planted/co-evolve/round-000/gate/traces.jsonl"]
    gate = listed["runs"][-1]
    assert (gate["run"], gate["part"], gate["split"], gate["episodes"]) == ("planted", "co-evolve/round-000/gate",
                                                                          "val", 40)
    page = client.get("/api/replay/run", params={"run": ids[2], "page": 0}).json()
    assert page["run"]["run"] == "eval-organism" and page["run"]["split"] == "val" and len(page["episodes"]) == 4
    episode = client.get("/api/replay/episode", params={"run": ids[2], "index": 3}).json()
    assert episode == json.loads(json.dumps(read_episode(runs / ids[2], 3)))
    ui = client.get("/replay-ui", params={"lang": "zh"})
    assert ui.status_code == 200 and 'data-source="live"' in ui.text and 'lang="zh-CN"' in ui.text
    script = client.get("/replay-ui/assets/episode-browser.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")


@pytest.mark.parametrize(("route", "params", "status", "message"), [
    ("/api/replay/run", {}, 400, "run: required"),
    ("/api/replay/run", {"run": "../replay/runs/eval-expert/val-s0/traces.jsonl"}, 400, "outside the runs folder"),
    ("/api/replay/run", {"run": "/etc/passwd"}, 400, "must be a relative path"),
    ("/api/replay/run", {"run": "notes.txt"}, 400, "is not a trace file"),
    ("/api/replay/run", {"run": "eval-expert/val-x/traces.jsonl"}, 404, "no trace file"),
    # a path component over the file system's 255-byte name limit (was a 500)
    ("/api/replay/run", {"run": "a" * 300 + "/traces.jsonl"}, 400, "is no usable path (File name too long)"),
    ("/api/replay/episode", {"run": "eval-expert/" + "b" * 300 + "/traces.jsonl"}, 400, "is no usable path"),
    ("/api/replay/run", {"run": str(EXPERT), "page": "two"}, 400, "page: must be a non-negative integer"),
    ("/api/replay/run", {"run": str(EXPERT), "page": 1}, 404, "page must be in 0..0"),
    ("/api/replay/episode", {"run": str(EXPERT), "index": -1}, 400, "index: must be a non-negative integer"),
    ("/api/replay/episode", {"run": str(EXPERT), "index": 9}, 404, "has no episode 9"),
    ("/replay-ui", {"lang": "fr"}, 400, "lang: expected one of en, zh"),
    ("/replay-ui/assets/secret.py", {}, 404, "asset: no 'secret.py'"),
])
def test_live_routes_refuse_bad_input(replay: tuple[httpx.Client, Path], route: str, params: dict[str, object],
                                      status: int, message: str) -> None:
    client, _ = replay
    response = client.get(route, params=params)
    assert response.status_code == status and message in response.json()["error"], response.text


def test_live_routes_follow_a_growing_file(replay: tuple[httpx.Client, Path]) -> None:
    """A trace appended while the server runs (a round still writing) is listed on the next request; a torn
    last line (a write in progress) is skipped, a corrupt record is a clear 422."""
    client, runs = replay
    source = (runs / EXPERT).read_text(encoding="utf-8").splitlines(keepends=True)
    growing = runs / "eval-live" / "steps" / "step-0001" / "traces.jsonl"
    growing.parent.mkdir(parents=True)
    growing.write_text(source[0], encoding="utf-8")
    ident = "eval-live/steps/step-0001/traces.jsonl"
    assert client.get("/api/replay/run", params={"run": ident}).json()["run"]["episodes"] == 1
    with growing.open("a", encoding="utf-8") as handle:
        handle.write(source[1] + source[2][:40])
    page = client.get("/api/replay/run", params={"run": ident}).json()
    assert page["run"]["episodes"] == 2 and page["run"]["split"] == "train"
    listed = {run["id"]: run for run in client.get("/api/replay/runs").json()["runs"]}
    assert listed[ident]["episodes"] == 2  # the torn line is not counted
    growing.write_text(source[0] + "{broken\n" + source[1], encoding="utf-8")
    response = client.get("/api/replay/run", params={"run": ident})
    assert response.status_code == 422 and "traces.jsonl:2" in response.json()["error"]
    response = client.get("/api/replay/episode", params={"run": ident, "index": 1})
    assert response.status_code == 422 and "traces.jsonl:2" in response.json()["error"]


def test_serve_refuses_a_missing_runs_folder(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli_app, ["env", "serve", "--runs", str(tmp_path / "absent")])
    assert result.exit_code == 1 and "--runs: needs the shopsimulator protocol and an existing runs folder" in (
        result.stderr)


def test_failure_classes_are_the_rule_analysts_surfaces() -> None:
    assert set(FAILURE_CLASSES) - {episodes_module.SUCCESS, episodes_module.TECHNICAL_ERROR} <= set(mech.SURFACES)
