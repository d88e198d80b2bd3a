"""The typed records load what was shipped: every summary and comparison in the release excerpt and in
data/results, every warm start's manifest and ground truth, validates as its model and writes back the same JSON;
a round's metrics line keeps its flat shape."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from intraskill.evaluate.records import EvalSummary, PairedComparison
from intraskill.gate.contributions import load_contributions
from intraskill.gate.manifest import GateManifest
from intraskill.organism.manifest import Skill1WarmstartManifest, WarmstartManifest, read_manifest
from intraskill.policy.warmstarts import GroundTruth, read_ground_truth
from intraskill.training.checkpoint import CheckpointState
from intraskill.training.grpo import StepMetrics
from intraskill.training.metrics import RoundStepMetrics

DATA = Path(__file__).resolve().parents[1] / "data"
SUMMARIES = sorted((DATA / "intraskill-release").rglob("summary.json"))
CONTRIBUTIONS = sorted(DATA.rglob("contributions.json"))
MANIFESTS = sorted(DATA.rglob("gate_a_manifest.json"))
SKILL1_WARMSTART = DATA.parent / "params" / "organism_skill1_warmstart" / "manifest.json"
WARMSTARTS = sorted({*DATA.rglob("warmstart/manifest.json"), *(DATA.parent / "params").glob("*_warmstart/manifest.json")}
                    - {SKILL1_WARMSTART})
GROUND_TRUTHS = sorted({*DATA.rglob("ground_truth.json"),
                        *(DATA.parent / "params").glob("*_warmstart/ground_truth.json")})


def same_json(a: object, b: object) -> bool:
    """Equal as JSON, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return a == b


def test_the_shipped_records_are_there() -> None:
    assert len(SUMMARIES) >= 8 and len(CONTRIBUTIONS) >= 10 and len(MANIFESTS) >= 6 and len(WARMSTARTS) >= 4
    assert len(GROUND_TRUTHS) >= 4 and SKILL1_WARMSTART.is_file()


@pytest.mark.parametrize("path", SUMMARIES, ids=lambda p: str(p.relative_to(DATA)))
def test_a_shipped_summary_loads_as_its_model_and_writes_back_unchanged(path: Path, tmp_path: Path) -> None:
    summary = EvalSummary.read(path)
    assert summary.counts.scored <= summary.counts.requested
    written = json.loads(summary.write(tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert same_json(written, json.loads(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("path", CONTRIBUTIONS, ids=lambda p: str(p.relative_to(DATA)))
def test_shipped_contributions_load(path: Path) -> None:
    assert load_contributions(path).observations > 0


def test_a_bad_record_is_one_line_naming_the_file_and_field(tmp_path: Path) -> None:
    data = json.loads(SUMMARIES[0].read_text(encoding="utf-8"))
    data["counts"]["scored"] = "many"
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=r"summary\.json: counts\.scored: ") as error:
        EvalSummary.read(path)
    assert "\n" not in str(error.value)
    data = json.loads(SUMMARIES[0].read_text(encoding="utf-8"))
    data["primary"]["reward_median"] = 0.5
    with pytest.raises(ValueError, match=r"primary\.reward_median: Extra inputs are not permitted"):
        EvalSummary.from_dict(data)


def test_a_comparison_of_the_release_layout_is_refused() -> None:
    """The release's own comparison names its arms bare/equipped; ours a/b — the record says which it is."""
    release = DATA / "intraskill-release" / "eval" / "qwen35-4b-test-iter80-st" / "comparison.json"
    with pytest.raises(ValueError, match="comparison.json: "):
        PairedComparison.read(release)


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(DATA)))
def test_a_shipped_gate_manifest_loads_as_its_model_and_writes_back_unchanged(path: Path, tmp_path: Path) -> None:
    manifest = GateManifest.read(path)
    assert manifest.complete and manifest.design == "gate_a" and manifest.outcomes.columns > 0
    written = json.loads(manifest.write(tmp_path / path.name, indent=1).read_text(encoding="utf-8"))
    assert same_json(written, json.loads(path.read_text(encoding="utf-8")))


def test_a_running_gate_manifest_keeps_its_short_shape(tmp_path: Path) -> None:
    complete = json.loads(MANIFESTS[0].read_text(encoding="utf-8"))
    running = {key: complete[key] for key in ("schema_version", "updated_at", "design", "config", "inputs")}
    running["status"] = "running"
    assert set(GateManifest.from_dict(running).to_dict()) == set(running)


@pytest.mark.parametrize("path", WARMSTARTS, ids=lambda p: str(p.relative_to(DATA.parent)))
def test_a_shipped_warm_start_manifest_loads_as_its_model_and_writes_back_unchanged(path: Path,
                                                                                    tmp_path: Path) -> None:
    manifest = WarmstartManifest.read(path)
    assert manifest.metrics.bare.episodes > 0 and manifest.final_loss > 0
    written = json.loads(manifest.write(tmp_path / path.name, indent=1).read_text(encoding="utf-8"))
    assert same_json(written, json.loads(path.read_text(encoding="utf-8")))


def test_the_shipped_skill1_warm_start_manifest_loads_as_its_model_and_writes_back_unchanged(tmp_path: Path) -> None:
    manifest = read_manifest(SKILL1_WARMSTART)
    assert isinstance(manifest, Skill1WarmstartManifest) and manifest.final_loss > 0
    assert manifest.metrics.success.pairs == manifest.metrics.episodes > 0
    assert manifest.metrics.ranking.ranked <= manifest.metrics.replies["rank"]
    written = json.loads(manifest.write(tmp_path / "manifest.json", indent=1).read_text(encoding="utf-8"))
    assert same_json(written, json.loads(SKILL1_WARMSTART.read_text(encoding="utf-8")))
    assert isinstance(read_manifest(WARMSTARTS[0]), WarmstartManifest)


@pytest.mark.parametrize("path", GROUND_TRUTHS, ids=lambda p: str(p.relative_to(DATA.parent)))
def test_a_shipped_ground_truth_loads_as_its_model_and_writes_back_unchanged(path: Path, tmp_path: Path) -> None:
    truth = read_ground_truth(path.parent)
    assert truth.checkpoint_sha256 is not None and truth.metric == "r_success"
    assert all(chunk.pairs == truth.episodes_per_arm for chunk in truth.chunks.values())
    written = json.loads(truth.write(tmp_path / path.name, indent=1).read_text(encoding="utf-8"))
    assert same_json(written, json.loads(path.read_text(encoding="utf-8")))
    teacher = truth.model_copy(update={"checkpoint_sha256": None}).to_dict()  # the teacher's: no weights
    assert "checkpoint_sha256" not in teacher and GroundTruth.from_dict(teacher).checkpoint_sha256 is None


def test_a_ground_truth_missing_a_chunk_field_names_the_file_and_field(tmp_path: Path) -> None:
    data = json.loads(GROUND_TRUTHS[0].read_text(encoding="utf-8"))
    chunk = next(iter(data["chunks"]))
    del data["chunks"][chunk]["effect"]
    (tmp_path / "ground_truth.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"ground_truth\.json: chunks\.{chunk}\.effect: Field required"):
        read_ground_truth(tmp_path)
    with pytest.raises(FileNotFoundError, match="run `intraskill warmstart`"):
        read_ground_truth(tmp_path / "missing")


METRICS_LINE = {"round": 0, "step": 3, "rollout/shopsim/trajectory_count": 8, "rollout/shopsim/success_rate": 0.25,
                "rollout/shopsim/chunk/persona-query/inclusion_rate": None, "skill1/protocol_error_rate/act": 0.5,
                "rollout/dynamic_filter/drop_zero_std": 1, "train/loss": 0.12, "train/pg_loss": 0.1,
                "train/pg_clipfrac": 0.0, "train/ppo_kl": 0.001, "train/entropy_loss": 1.5, "train/kl_loss": None,
                "train/grad_norm": 0.7, "train/lr": 1e-5, "train/updates": 2, "train/model_tokens": 900,
                "train/padding_waste": 0.1, "train/tokens_per_s": 300.0, "train/global_batch_size": 4,
                "time/rollout_s": 1.5, "time/retry_s": 0.0, "time/train_s": 2.0, "time/io_s": 0.25}


def test_a_metrics_line_keeps_its_flat_shape_and_groups_its_metrics() -> None:
    line = RoundStepMetrics.from_dict(METRICS_LINE)
    assert (line.round, line.step, line.train.loss, line.train.kl_loss, line.time.total_s) == (0, 3, 0.12, None, 3.75)
    assert line.rollout["rollout/shopsim/trajectory_count"] == 8 and line.train.global_batch_size == 4
    assert list(line.to_dict().items()) == list(METRICS_LINE.items())  # same keys, same order, ints kept ints
    with pytest.raises(ValueError, match=r"metrics\.jsonl: lr/rate: Extra inputs are not permitted"):
        RoundStepMetrics.from_dict({**METRICS_LINE, "lr/rate": 0.1}, "metrics.jsonl")
    with pytest.raises(ValueError, match=r"metrics\.jsonl: train\.loss: "):
        RoundStepMetrics.from_dict({**METRICS_LINE, "train/loss": "low"}, "metrics.jsonl")


def test_a_checkpoint_state_holds_the_trainers_steps() -> None:
    step = StepMetrics(loss=0.1, pg_loss=0.1, clipfrac=0.0, approx_kl=0.0, entropy=1.0, kl_ref=None, grad_norm=0.5,
                       updates=1, micro_batches=1, samples=4, episodes=4, groups=1, model_tokens=100,
                       real_tokens=100, padded_tokens=120, padding_waste=1 / 6, duration_s=0.5, tokens_per_s=200.0,
                       lr=1e-5, grad_norms=[0.5])
    state = CheckpointState(step=1, history={"1": step}, files={"rng.pt": "0" * 64})
    data = json.loads(json.dumps(state.to_dict()))
    assert data["history"]["1"]["grad_norms"] == [0.5] and CheckpointState.from_dict(data) == state
    with pytest.raises(ValueError, match=r"state\.json: history\.1\.loss: "):
        CheckpointState.from_dict({**data, "history": {"1": {**data["history"]["1"], "loss": "x"}}}, "state.json")
