"""The typed records load what was shipped: every summary and comparison in the release excerpt and in
data/results validates as its model and writes back the same JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from intraskill.evaluate.records import EvalSummary, PairedComparison
from intraskill.gate.contributions import load_contributions
from intraskill.gate.manifest import GateManifest
from intraskill.organism.manifest import WarmstartManifest

DATA = Path(__file__).resolve().parents[1] / "data"
SUMMARIES = sorted((DATA / "intraskill-release").rglob("summary.json"))
CONTRIBUTIONS = sorted(DATA.rglob("contributions.json"))
MANIFESTS = sorted(DATA.rglob("gate_a_manifest.json"))
WARMSTARTS = sorted({*DATA.rglob("warmstart/manifest.json"), *(DATA.parent / "params").glob("*_warmstart/manifest.json")}
                    - {DATA.parent / "params" / "organism_skill1_warmstart" / "manifest.json"})


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
