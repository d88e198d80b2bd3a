"""The report's sentences: numbers worded from the results the notebooks hold (release, round, warm start, gate)."""

from __future__ import annotations

from pathlib import Path

import pytest

from intraskill.analysis.release import locate_release_dir, reanalyse_release
from intraskill.evaluate.records import PairedBlock
from intraskill.experiment.results import MatrixResult
from intraskill.experiment.shipped import SHIPPED, YOUR_RUN
from intraskill.organism.gate_validation import GateValidationReport, SeedValidation, TruthComparison
from intraskill.organism.manifest import WarmstartManifest
from intraskill.paths import project_root
from intraskill.pipeline.gate_b import GateBResult, PairedMetric
from intraskill.plots import prose
from intraskill.policy.warmstarts import read_ground_truth


@pytest.fixture(scope="module")
def release():
    return reanalyse_release(locate_release_dir(None), samples=200)


def test_release_sentences_state_the_reanalysed_numbers(release) -> None:
    conditions, comparisons, rounds = (release.to_frame(name) for name in ("conditions", "comparisons", "rounds"))
    test = prose.release_test(conditions, comparisons, int(rounds["step"].max()), "en")
    assert test.startswith("Test success rises from 51.75 % (base, no skill) to 84.25 % after 80 rollout steps")
    final = comparisons.set_index("name").loc["final_skill"]
    assert f"adds +2.00 points [{prose.points(final['success_lo'])}, {prose.points(final['success_hi'])}]" in test
    paired = prose.release_paired(comparisons, "en")
    assert "139 tasks fixed and 9 broken — its interval excludes zero" in paired
    assert "19 tasks fixed and 11 broken — its interval covers zero" in paired
    assert prose.release_rounds(rounds, "en").startswith("The bank goes 10 → 7 → 5 → 8 → 8 chunks. Bare validation "
                                                        "success goes 74.75 % → 80.00 % → 84.75 % → 86.00 %")
    assert "从 +0.0257 变为 +0.0066" in prose.release_rounds(rounds, "zh")
    assert "51.75%（基座）" in prose.release_test(conditions, comparisons, 80, "zh")
    with pytest.raises(ValueError, match=r"language: expected one of \['en', 'zh'\], got 'de'"):
        prose.release_paired(comparisons, "de")


def test_round_and_warm_start_sentences() -> None:
    paired = PairedBlock.from_dict({
        "pairs": 200, "bootstrap": {"samples": 10_000, "seed": 20260901, "confidence_level": 0.95},
        "success_transitions": {"0->1": 39, "1->0": 3, "1->1": 52, "0->0": 106},
        "metrics": {"r_success": {"a_mean": 0.455, "b_mean": 0.635, "mean_difference": 0.18,
                                  "confidence_interval": [0.125, 0.24], "pairs": 200}}})
    assert prose.round_val(paired, "en") == (
        "Bare val success on 200 val tasks went from 45.50 % to 63.50 %: +18.00 points [+12.50, +24.00] "
        "(task-paired bootstrap), 39 tasks fixed and 3 broken.")
    warmstart = project_root() / "params" / "organism_warmstart"
    metrics = WarmstartManifest.read(warmstart / "manifest.json").metrics
    truth = read_ground_truth(warmstart)
    effects = sorted(chunk.effect for chunk in truth.chunks.values())
    sentence = prose.warmstart_effects(metrics, truth, "en")
    assert sentence.startswith(f"On {metrics.bare.episodes} val tasks: bare success "
                               f"{prose.percent(metrics.bare.success, 'en')}, with $S_0$")
    assert f"adds {prose.points(effects[-1])} points" in sentence
    assert f"every other chunk adds {prose.points(effects[0])} … {prose.points(effects[-2])} points" in sentence


def test_gate_b_sentence() -> None:
    result = GateBResult(project_root(), 400, PairedMetric(0.4, 0.4725, 0.0725, (0.0475, 0.1)),
                         PairedMetric(0.538, 0.594, 0.056, (0.035, 0.079)),
                         {"0->1": 31, "1->0": 2, "1->1": 158, "0->0": 209}, 800, 2_620_132)
    assert prose.gate_b(result, "en") == (
        "Gate B on 400 test tasks: bare success 40.00 %, with the induced $S_0$ 47.25 %: +7.25 points "
        "[+4.75, +10.00] (task-paired bootstrap), 31 tasks fixed and 2 broken.")
    assert "400 个测试任务：无技能成功率 40.00%，带归纳出的 $S_0$ 为 47.25%" in prose.gate_b(result, "zh")
    assert result.statement().startswith("Gate B on 400 test tasks: success 40.0 % bare, 47.2 % with S₀ (+7.2 points")


def test_gate_validation_sentence() -> None:
    def seed(mask_seed: int, rho: float, coverage: float) -> SeedValidation:
        return SeedValidation(mask_seed, 400, 0.2, TruthComparison({}, rho, coverage, 0.87))

    reports = {1: GateValidationReport("success", 1, None, (seed(20260901, 0.98, 1.0), seed(1, 0.88, 0.875))),
               2: GateValidationReport("success", 2, None, (seed(20260901, 0.5, 0.5),))}
    sentence = prose.gate_validation(reports, "en")
    assert sentence.startswith("With m = 1 masked rollout(s) per task (mask seeds 20260901, 1), Spearman's ρ "
                               "averages 0.93 (0.98 / 0.88) and CI coverage 0.94")
    assert sentence.endswith("With m = 2 masked rollout(s) per task (mask seeds 20260901), Spearman's ρ averages "
                             "0.50 (0.50) and CI coverage 0.50; the attainable ρ is 0.87; the target (ρ ≥ 0.8, "
                             "coverage ≥ 0.9) is not met.")
    assert "已达到" in prose.gate_validation({1: reports[1]}, "zh")
    tied = {1: GateValidationReport("success", 1, None, (seed(1, float("nan"), 1.0),))}
    assert "ρ averages — (—) and CI coverage 1.00" in prose.gate_validation(tied, "en")


def test_transcript_quotes_every_page_under_a_caption() -> None:
    """Each text is a fenced block (its fence longer than any backtick run inside), so a price's `$` stays a
    dollar and a page cannot close its own block."""
    text = prose.transcript("A mug under $30.00", "WebShop [SEP] Search", [("search[mug]", "Results ``` $12.99"),
                                                                            ("click[buy now]", "Thank you")])
    assert text.split("\n\n") == [
        "**The task's instruction**", "```text\nA mug under $30.00\n```", "**The first page**",
        "```text\nWebShop [SEP] Search\n```", "**Turn 1: the action**", "```text\nsearch[mug]\n```",
        "**Turn 1: the page it led to**", "````text\nResults ``` $12.99\n````", "**Turn 2: the action**",
        "```text\nclick[buy now]\n```", "**Turn 2: the page it led to**", "```text\nThank you\n```"]


def test_matrix_source_names_the_records_in_the_page_language() -> None:
    """The controls page says which matrix it shows (the user's run before the shipped records), in its language."""
    own = MatrixResult(Path("runs/organism/controls"), {"rounds": 2}, {}, (), ())
    shipped = MatrixResult(Path("data/results/organism/controls"), {"rounds": 2}, {}, (), ())
    assert prose.matrix_source({YOUR_RUN: own, SHIPPED: shipped}, "en") == (
        "The figures and tables below come from **your run** (`runs/organism/controls`: 0 cells, 2 round(s) each); "
        "this table shows the shipped records (`data/results/organism/controls`) beside them.")
    assert prose.matrix_source({SHIPPED: shipped}, "zh") == (
        "以下图表来自**随包发布的记录**（`data/results/organism/controls`：0 个单元，每个单元 2 轮）。")
    assert "你自己的运行" in prose.matrix_source({YOUR_RUN: own, SHIPPED: shipped}, "zh")
