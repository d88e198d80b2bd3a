"""Inference across seeds: the crossed t interval against scipy's t test, the one-seed bootstrap fallback, Holm on
a hand-checked case, verdicts that follow the declared family, the power figures the docs quote, and a reduced
run of the coverage benchmark (the new interval near nominal, the old percentile bootstrap under it)."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from scipy import stats

from intraskill.evaluate.bootstrap import paired_bootstrap_ci
from intraskill.experiment.inference import contrast_interval, holm, pilot_seed_count, power, seeds_needed
from intraskill.experiment.results import EQUIVALENCE_CONFIDENCE, Contrast, declared
from intraskill.params import FamilyParams
from intraskill.paths import project_root


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(project_root() / "benchmarks"))
    import bench_interval_coverage

    return bench_interval_coverage


def test_without_a_task_component_the_interval_is_the_t_interval_on_the_seed_means() -> None:
    seed_means = [0.02, -0.01, 0.05, 0.03]
    result = contrast_interval([[m] * 50 for m in seed_means])
    reference = stats.ttest_1samp(seed_means, 0.0)
    low, high = reference.confidence_interval(0.95)
    assert (result.low, result.high, result.p_value) == pytest.approx((low, high, reference.pvalue))
    assert result.df == 3 and result.n_seeds == 4 and result.n_tasks == 50
    assert result.per_seed == pytest.approx(tuple(seed_means)) and result.method == "seeds_x_tasks_crossed_t"
    # a task effect every seed shares widens the interval: the seed means alone cannot show it
    shared = np.tile(np.r_[np.ones(10), np.zeros(40)], (4, 1)) + np.asarray(seed_means)[:, None]
    assert contrast_interval(shared).high - contrast_interval(shared).low > high - low


def test_one_seed_falls_back_to_the_task_paired_bootstrap_and_says_so() -> None:
    diffs = [1.0, 0.0, 0.0, 1.0, -1.0, 1.0, 0.0, 1.0]
    result = contrast_interval([diffs], samples=500, metric="reward")
    reference = paired_bootstrap_ci([0.0] * 8, diffs, "reward", samples=500)
    assert (result.low, result.high) == reference.ci95 and result.mean == reference.mean_difference
    assert result.method == "one_seed_task_paired_bootstrap" and result.df is None
    # the p-value comes from the interval's own draws: it agrees with whether the interval holds 0
    assert result.low < 0 < result.high and result.p_value > 0.05
    clear = contrast_interval([[1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]], samples=500)
    assert clear.low > 0 and clear.p_value < 0.05


@pytest.mark.parametrize(("diffs", "message"), [([], "at least one seed"), ([[1.0, 0.0], [1.0]], "same tasks"),
                                                ([[1.0, float("nan")]], "not finite"), ([[]], "non-empty")])
def test_bad_differences_are_refused_with_the_reason(diffs: list[list[float]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        contrast_interval(diffs)
    with pytest.raises(ValueError, match="confidence"):
        contrast_interval([[1.0], [0.0]], confidence=1.0)


def test_holm_on_a_hand_checked_family() -> None:
    # sorted 0.01, 0.03, 0.04: 3 × 0.01 = 0.03; 2 × 0.03 = 0.06; max(0.06, 1 × 0.04) = 0.06
    assert holm({"a": 0.01, "b": 0.04, "c": 0.03}) == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06})
    # a declared member not run counts as p = 1: 4 × 0.01, 3 × 0.03, max(0.09, 2 × 0.04)
    assert holm({"a": 0.01, "b": 0.04, "c": 0.03}, family_size=4) == pytest.approx({"a": 0.04, "b": 0.09, "c": 0.09})
    with pytest.raises(ValueError, match="family of 1"):
        holm({"a": 0.01, "b": 0.02}, family_size=1)


def contrast_of(a: str, b: str, condition: str, seed_means: list[float]) -> Contrast:
    per_seed = tuple(paired_bootstrap_ci([0.0] * 20, [m] * 20, "r_success", samples=100) for m in seed_means)
    rows = [[m] * 20 for m in seed_means]
    return Contrast(a, b, condition, "r_success", contrast_interval(rows), per_seed, None,
                    equivalence=contrast_interval(rows, EQUIVALENCE_CONFIDENCE))


def test_verdicts_follow_the_declared_family() -> None:
    clear = [0.10, 0.11, 0.12, 0.10, 0.11]  # p ≈ 2e-7
    borderline = [0.01, 0.03, 0.02, 0.00, 0.04]  # p ≈ 0.047: excluded from 0 alone, not after Holm
    primary = contrast_of("coevolve", "grpo", "deployed", borderline)
    secondary = [contrast_of("coevolve", "fixed", c, m) for c, m in (("deployed", clear), ("bare", borderline))]
    outside = contrast_of("fixed", "grpo", "deployed", clear)
    # four secondary members, the two reward ones not run (p = 1): the borderline one is multiplied by 3
    family = FamilyParams.model_validate({"secondary": {"comparisons": ["coevolve-fixed"],
                                                        "metrics": ["success", "reward"]}})
    read = declared([primary, *secondary, outside], family, ["coevolve", "grpo", "fixed"])
    assert [c.role for c in read] == ["primary", "secondary", "secondary", "exploratory"]
    assert primary.across_seeds.excludes_zero() and read[0].verdict == "coevolve > grpo" and read[0].p_holm is None
    assert read[1].verdict == "coevolve > fixed"
    assert read[2].across_seeds.excludes_zero() and read[2].p_holm == pytest.approx(3 * read[2].across_seeds.p_value)
    assert read[2].verdict == "unresolved"
    assert read[3].verdict == "exploratory" and "no verdict" in read[3].statement()
    assert "Holm p" in read[2].statement() and "no difference resolved" in read[2].statement()


@pytest.mark.parametrize(("seed_means", "verdict"), [
    ([0.01, -0.01, 0.00, 0.02, -0.015], "equivalent"),  # 90 %: [−1.3, +1.5] points
    ([0.04, -0.04, 0.01, 0.05, -0.03], "unresolved"),  # 95 % holds 0, 90 % [−3.2, +4.4] not inside ±3
    ([0.010, 0.012, 0.011, 0.009, 0.013], "coevolve > grpo"),  # inside ±3 points, yet 0 excluded: a difference
])
def test_the_primarys_declared_equivalence_is_two_one_sided_tests(seed_means: list[float], verdict: str) -> None:
    family = FamilyParams.model_validate({"primary": {"equivalence_margin": 0.03},
                                          "secondary": {"comparisons": ["coevolve-grpo"]}})
    primary, secondary = declared([contrast_of("coevolve", "grpo", c, seed_means) for c in ("deployed", "bare")],
                                  family, ["coevolve", "grpo"])
    e = primary.equivalence
    assert e is not None and e.confidence == pytest.approx(0.90) and e.high - e.low < primary.across_seeds.high - \
        primary.across_seeds.low
    assert primary.margin == 0.03 and primary.verdict == verdict
    assert "90 % interval" in primary.statement()
    words = {"equivalent": "supported: no difference of 3 points or more", "unresolved": "no difference resolved"}
    assert words.get(verdict, verdict) in primary.statement()
    # only the primary contrast carries the margin: the same numbers in the secondary family get no such verdict
    assert secondary.margin is None and secondary.verdict in ("unresolved", "coevolve > grpo")
    assert FamilyParams().primary.equivalence_margin is None
    with pytest.raises(ValueError, match="equivalence_margin"):
        FamilyParams.model_validate({"primary": {"equivalence_margin": 3}})


def test_power_of_a_three_point_difference_at_the_organisms_seed_spread() -> None:
    # the organism's coevolve − grpo seed means scatter with SD 2.46 points (docs/results.md)
    figures = [power(3.0, seed_sd=2.46, seeds=n) for n in (3, 5, 10)]
    assert figures == pytest.approx([0.236, 0.543, 0.928], abs=0.002)
    assert seeds_needed(3.0, seed_sd=2.46) == 8 and seeds_needed(3.0, 0.9, seed_sd=2.46) == 10
    assert power(0.0, seed_sd=2.46, seeds=5) == pytest.approx(0.05)


def test_a_pilots_seed_count_is_the_power_rule_within_its_bounds() -> None:
    spread = pilot_seed_count([0.0, 2.46 * 2 ** 0.5, 2.46 * 2 ** 0.5 / 2], 3.0, least=2, most=20)
    assert spread.seed_sd == pytest.approx(2.46 * 2 ** 0.5 * 0.5) and spread.needed == spread.seeds
    assert spread.needed == seeds_needed(3.0, seed_sd=spread.seed_sd)
    assert pilot_seed_count([1.0, 1.0, 1.0], 3.0, least=10, most=20).seeds == 10  # no spread: the least
    assert pilot_seed_count([1.0, 3.0, 2.0], 3.0, least=10, most=20).seeds == 10  # SD 1: 4 needed, 10 declared
    wide = pilot_seed_count([-10.0, 10.0, 0.0], 3.0, least=10, most=20)
    assert wide.needed > 20 and wide.seeds == 20
    with pytest.raises(ValueError, match="at least 2 pilot seeds"):
        pilot_seed_count([1.0], 3.0, least=10, most=20)


def test_reduced_coverage_the_interval_holds_and_the_old_bootstrap_does_not(bench: ModuleType) -> None:
    cell = bench.coverage_cell(seeds=3, tasks=400, seed_sd=0.04, task_sd=0.0, reps=300, resamples=400, seed=7)
    coverage = cell["coverage"]
    assert coverage["crossed_t"] >= 0.91 and coverage["t_seed_means"] >= 0.91
    assert coverage["hierarchical_percentile"] <= 0.88  # the percentile bootstrap over 3 seeds is too narrow
