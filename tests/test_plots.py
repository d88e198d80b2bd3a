"""intraskill.plots: every figure from small synthetic tables and from the release data, reproducible
SVG + PNG export, bilingual labels and the English fallback when no CJK font is installed."""

from __future__ import annotations

import logging
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer
from matplotlib.text import Text

from intraskill import plots
from intraskill.analysis.release import locate_release_dir
from intraskill.paths import project_root
from intraskill.plots import style, tidy
from intraskill.plots.labels import label
from intraskill.policy.warmstarts import read_ground_truth

CJK = re.compile(r"[\u4e00-\u9fff]")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _texts(figure: matplotlib.figure.Figure) -> str:
    return " ".join(t.get_text() for t in figure.findobj(Text))


def _synthetic_figures(language: str) -> dict[str, matplotlib.figure.Figure]:
    conditions = [
        {"arm": "base_free", "success_rate": 0.50, "reward_mean": 0.52, "n": 40},
        {"arm": "iter80_free", "success_rate": 0.80, "reward_mean": 0.81, "n": 40},
    ]
    comparisons = [{"a": "base_free", "b": "iter80_free", "success_diff": 0.3, "success_lo": 0.2,
                    "success_hi": 0.4, "0->1": 13, "1->0": 1}]
    steps = pd.DataFrame({"step": range(1, 41), "round": [s // 20 for s in range(40)],
                          "rollout/shopsim/reward_mean": [0.5 + s / 100 for s in range(40)],
                          "rollout/shopsim/success_rate": [0.4 + s / 100 for s in range(40)],
                          "rollout/shopsim/skill_free_group_rate": [0.2] * 40, "rollout/shopsim/q": [0.2] * 40})
    contributions = [
        {"round": 0, "intervention_id": "chunk-aaaaaaaaaaaa", "kind": "current", "coefficient": 0.03,
         "status": "selected", "se": 0.01},
        {"round": 0, "intervention_id": "online-bbbbbbbbbbbbbbbb", "kind": "candidate", "coefficient": -0.02,
         "status": "non_positive", "se": 0.012},
        {"round": 1, "intervention_id": "chunk-aaaaaaaaaaaa", "kind": "current", "coefficient": 0.01,
         "status": "selected"},
    ]
    paired = [{"metric": "tokens_per_turn", "a_mean": 280.0, "b_mean": 160.0, "difference": -120.0,
               "ci_lo": -140.0, "ci_hi": -100.0},
              {"metric": "protocol_errors", "a_mean": 0.15, "b_mean": 0.35, "difference": 0.2,
               "ci_lo": 0.07, "ci_hi": 0.35}]
    phases = [{"round": r, "phase": p, "mean": 100.0 + r, "p90": 200.0, "n": 10}
              for r in (0, 1) for p in ("search_home", "product_detail")]
    updates = pd.DataFrame({"update": range(1, 9), "round": [0] * 4 + [1] * 4,
                            "train/entropy_loss": [0.2 - u / 100 for u in range(8)],
                            "train/pg_clipfrac": [0.001] * 8, "train/grad_norm": [1.0, 0.0, 1.2, 1.1, 0.9, 0.8, 0.0, 0.7]})
    truth = [{"chunk": "persona-query", "effect": 0.2, "ci_lo": 0.1, "ci_hi": 0.3, "role": "helpful"},
             {"chunk": "tone", "effect": 0.0, "ci_lo": -0.05, "ci_hi": 0.05, "role": "neutral"},
             {"chunk": "buy-first-result", "effect": -0.1, "ci_lo": -0.2, "ci_hi": -0.02, "role": "harmful"}]
    return {
        "results": plots.four_condition_results(conditions, comparisons, language=language),
        "training": plots.training_dynamics(steps, language=language),
        "skills": plots.skill_evolution(contributions, language=language),
        "contributions": plots.chunk_contributions(contributions, language=language),
        "behaviour": plots.behaviour_deltas(paired, language=language),
        "phases": plots.behaviour_phases(phases, language=language),
        "optimization": plots.optimization_curves(updates, language=language),
        "cloning": plots.cloning_losses([(10 * k, 7.0 / k) for k in range(1, 30)], drill_steps=60,
                                        lm_steps=100, language=language),
        "effects": plots.chunk_effects(truth, language=language),
    }


@pytest.mark.e2e
def test_synthetic_figures_write_svg_and_png(tmp_path: Path) -> None:
    before = dict(matplotlib.rcParams)
    figures = _synthetic_figures("en")
    assert dict(matplotlib.rcParams) == before, "building figures must not change global rcParams"
    for name, figure in figures.items():
        assert isinstance(figure, matplotlib.figure.Figure)
        svg, png = plots.save_figure(figure, name, tmp_path)
        assert (svg, png) == (tmp_path / f"{name}.svg", tmp_path / f"{name}.png")
        assert ET.parse(svg).getroot().tag.endswith("svg")
        assert png.read_bytes().startswith(PNG_SIGNATURE)
        assert b"<dc:date>" not in svg.read_bytes()
    # CIs from standard errors: two whiskers in round 0, none in round 1
    round0, round1 = figures["contributions"].axes[:2]
    assert [sum(isinstance(c, ErrorbarContainer) for c in a.containers) for a in (round0, round1)] == [2, 0]
    assert "whiskers" in figures["contributions"].axes[0].get_xlabel()
    # three chunks, one whisker each; two phase boundaries
    assert sum(isinstance(c, ErrorbarContainer) for c in figures["effects"].axes[0].containers) == 3
    assert len(figures["cloning"].axes[0].lines) == 3
    # the two zero-gradient updates are marked in every panel
    for axes in figures["optimization"].axes:
        assert len(axes.collections[0].get_offsets()) == 2


def test_save_is_byte_reproducible(tmp_path: Path) -> None:
    figure = plots.skill_evolution([{"round": 0, "kind": "current", "status": "selected"}])
    first = [p.read_bytes() for p in plots.save_figure(figure, "a", tmp_path / "one")]
    again = plots.skill_evolution([{"round": 0, "kind": "current", "status": "selected"}])
    second = [p.read_bytes() for p in plots.save_figure(again, "a", tmp_path / "two")]
    assert first == second
    with pytest.raises(ValueError, match="plain file stem"):
        plots.save_figure(figure, "../escape", tmp_path)


@pytest.mark.e2e
def test_release_figures(tmp_path: Path) -> None:
    release = locate_release_dir()
    steps = tidy.read_step_metrics(release / "analysis" / "training_steps.csv")
    figure = plots.training_dynamics(steps)
    boundaries = sorted({line.get_xdata()[0] for line in figure.axes[0].lines if line.get_linestyle() == "--"})
    assert boundaries == [20.5, 40.5, 60.5]
    updates = pd.read_csv(release / "analysis" / "wandb" / "optimizer_updates.csv")
    optimization = plots.optimization_curves(updates)
    marked = optimization.axes[2].collections[0].get_offsets()[:, 0].tolist()
    assert marked == [66, 70, 82, 116, 140, 142, 156, 160]  # docs/release.md §3.7
    for name, fig in (("training", figure), ("optimization", optimization)):
        svg, png = plots.save_figure(fig, name, tmp_path)
        assert svg.stat().st_size > 10_000 and png.read_bytes().startswith(PNG_SIGNATURE)


def test_chunk_effects_of_a_shipped_ground_truth() -> None:
    truth = read_ground_truth(project_root() / "params" / "organism_warmstart")
    figure = plots.chunk_effects(truth)
    assert sum(isinstance(c, ErrorbarContainer) for c in figure.axes[0].containers) == len(truth.chunks) > 0
    assert {label.get_text() for label in figure.axes[0].get_yticklabels()} == set(truth.chunks)


def test_bank_sizes_from_release_contributions() -> None:
    from intraskill.plots.skills import bank_sizes

    table = pd.read_csv(locate_release_dir() / "analysis" / "chunk_contributions.csv")
    assert bank_sizes(table) == [10, 7, 5, 8, 8]


def test_chinese_labels_with_a_cjk_font() -> None:
    assert style.find_cjk_font() == "Noto Sans CJK SC"  # the packaged font (mplfonts), no system font needed
    figure = plots.behaviour_phases([{"round": 0, "phase": "search_home", "mean": 1.0, "p90": 2.0}], language="zh")
    text = _texts(figure)
    assert "首页搜索" in text and label("title_phases", "zh") in text


def test_chinese_falls_back_to_english_without_a_font(monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(style, "find_cjk_font", lambda: None)
    with caplog.at_level(logging.WARNING, logger="intraskill.plots.style"):
        figure = plots.behaviour_phases([{"round": 0, "phase": "search_home", "mean": 1.0, "p90": 2.0}],
                                        language="zh")
    assert "no CJK font found" in caplog.text
    text = _texts(figure)
    assert "search (home)" in text and not CJK.search(text)


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"missing column\(s\) \['coefficient'\]"):
        plots.chunk_contributions([{"round": 0, "intervention_id": "x", "status": "selected"}])
    with pytest.raises(ValueError, match="unknown status"):
        plots.skill_evolution([{"round": 0, "kind": "current", "status": "maybe"}])
    with pytest.raises(ValueError, match="language must be"):
        plots.behaviour_phases([{"round": 0, "phase": "x", "mean": 1.0, "p90": 2.0}], language="fr")
    with pytest.raises(KeyError, match="no figure label"):
        label("not-a-key", "en")
    with pytest.raises(ValueError, match=r"truth.*missing column\(s\) \['role'\]"):
        plots.chunk_effects([{"chunk": "a", "effect": 0.1, "ci_lo": 0.0, "ci_hi": 0.2}])
    with pytest.raises(ValueError, match="losses"):
        plots.cloning_losses([])


def test_round_starts() -> None:
    assert style.round_starts(range(1, 81), None, 20) == [20.5, 40.5, 60.5]
    assert style.round_starts([1, 2, 3, 4], [0, 0, 1, 1], 20) == [2.5]


def test_every_label_has_both_languages() -> None:
    from intraskill.plots.labels import LABELS

    for key, (english, chinese) in LABELS.items():
        assert english and chinese, key
        assert not CJK.search(english), key


def test_dodged_labels_keep_apart_only_where_points_crowd() -> None:
    from intraskill.plots.gates import dodged

    # three chunks tied on the truth with close β (the organism's case), one far away
    anchors = [(0.03, 0.010), (0.031, 0.012), (0.032, 0.011), (0.10, 0.011)]
    heights = dodged(anchors, width=0.02, height=0.005)
    crowded = sorted(heights[:3])
    assert all(b - a >= 0.005 - 1e-12 for a, b in zip(crowded, crowded[1:]))
    assert heights[3] == 0.011  # alone: its label stays at its point
    assert min(heights[:3]) == 0.010  # the lowest of the crowd stays too


@pytest.mark.parametrize("language", ["en", "zh"])
def test_control_outcomes_word_each_verdict_in_the_pages_language(language: str) -> None:
    levels = [{"arm": arm, "condition": "deployed", "metric": "success", "mean": 0.3, "ci_low": 0.25,
               "ci_high": 0.35, "per_seed": [0.3, 0.31]} for arm in ("coevolve", "grpo", "fixed")]
    row = {"condition": "deployed", "metric": "success", "mean": 0.001, "ci_low": -0.01, "ci_high": 0.012}
    comparisons = [{**row, "comparison": "coevolve-grpo", "verdict": "equivalent", "margin": 0.03},
                   {**row, "comparison": "coevolve-fixed", "verdict": "unresolved", "margin": None},
                   {**row, "comparison": "fixed-grpo", "verdict": "exploratory", "margin": None}]
    text = _texts(plots.control_outcomes(levels, comparisons, language=language))
    for key in ("control_verdict_unresolved", "control_verdict_exploratory"):
        assert label(key, language) in text
    assert label("control_verdict_within", language, margin="3") in text
    assert "no difference" not in text if language == "zh" else "no difference of 3 points or more" in text
