"""intraskill.plots.tables.format_table: integers, percentages, CI columns, near-zero values and translated
headers on a table shaped like the release re-analysis output; release chunks labelled by their titles."""

from __future__ import annotations

import pandas as pd
import pytest

from intraskill.analysis.release import locate_release_dir
from intraskill.plots import tidy
from intraskill.plots.tables import format_table, html_label, settings_table


def _comparisons() -> pd.DataFrame:
    return pd.DataFrame({
        "name": ["training_free", "initial_skill"], "a": ["base_free", "base_free"], "b": ["iter80_free", "base_s0"],
        "success_diff": [0.325, 0.0275], "success_lo": [0.28, -0.01], "success_hi": [0.387563, 0.07],
        "0->1": [139.0, 46.0], "error": [1.1102e-16, float("nan")],
    }).set_index("name")


def test_english_table() -> None:
    styler = format_table(_comparisons(), "en", percent=["success_diff"], signed=["success_diff"],
                          ci={"success_diff": ("success_lo", "success_hi")},
                          values={"name": "comparison_", "a": "arm_", "b": "arm_"})
    shown = styler.data
    assert list(shown.columns) == ["Comparison", "a", "b", "Success b − a, points [95% CI]", "Fixed (0→1)", "error"]
    assert shown.iloc[0].tolist() == ["Training (no skill)", "Base, no skill", "Iter80, no skill",
                                      "+32.50 [+28.00, +38.76]", "139", "0.000"]
    assert shown.iloc[1, 2] == "Base + S<sub>0</sub>" and shown.iloc[1, 5] == "—"
    html = styler.to_html()
    assert "S<sub>0</sub>" in html and html == format_table(
        _comparisons(), "en", percent=["success_diff"], signed=["success_diff"],
        ci={"success_diff": ("success_lo", "success_hi")}, values={"name": "comparison_", "a": "arm_", "b": "arm_"}
    ).to_html()  # stable ids: the same table renders to the same HTML


def test_chinese_headers_and_errors() -> None:
    shown = format_table(_comparisons(), "zh", percent=["success_diff"], hide=["error"]).data
    assert list(shown.columns)[:2] == ["比较", "a"] and "成功率 b − a（百分点）[95% CI]" in shown.columns
    assert shown["成功率 b − a（百分点）[95% CI]"].tolist() == ["32.50%", "2.75%"]
    assert shown["修复（0→1）"].tolist() == ["139", "46"]
    with pytest.raises(KeyError, match=r"no column\(s\) \['missing'\]"):
        format_table(_comparisons(), "en", ci={"success_diff": ("missing", "success_hi")})
    with pytest.raises(ValueError, match="language"):
        format_table(_comparisons(), "fr")
    seeds = format_table(pd.DataFrame({"mask_seed": [20260901], "n": [12000]}), "en", plain=["mask_seed"]).data
    assert seeds.iloc[0].tolist() == ["20260901", "12,000"]
    assert html_label("Iter80 + $S_{T}$") == "Iter80 + S<sub>T</sub>" and html_label("$x^2$") == "x<sup>2</sup>"
    missing = format_table(pd.DataFrame({"success_sd": [0.0461, float("nan")]}), "zh", percent=["success_sd"]).data
    assert missing.iloc[:, 0].tolist() == ["4.61%", "—"]  # a missing value carries no unit


def test_lists_booleans_missing_text_scientific_and_two_level_columns() -> None:
    """No Python repr reaches a cell: lists join with commas, booleans read yes / no (是 / 否), a missing text is
    —; scientific columns keep tiny values; two-level columns read ``outer: inner``."""
    frame = pd.DataFrame({"check": ["chunk_use", "bare_success"], "value": [["c1", "c2"], None],
                          "met": [True, False], "note": ["x < y", float("nan")], "error": [1.283695e-16, 2.0]})
    shown = format_table(frame, "en", scientific=["error"]).data
    assert shown.to_dict("list") == {"check": ["chunk_use", "bare_success"], "value": ["c1, c2", "—"],
                                     "met": ["yes", "no"], "note": ["x &lt; y", "—"], "error": ["1.28e-16", "2.00e+00"]}
    assert format_table(frame[["met"]], "zh").data["met"].tolist() == ["是", "否"]
    pairs = pd.DataFrame([[1, 0.25]], columns=pd.MultiIndex.from_tuples([("ours", "n"), ("ours", "a_mean")]))
    assert list(format_table(pairs, "en").data.columns) == ["ours: n", "ours: a_mean"]
    assert list(format_table(pairs.set_index(pd.Index(["steps"], name="metric")), "en").data.columns) == [
        "Metric", "ours: n", "ours: a_mean"]


def test_release_chunks_are_labelled_by_title() -> None:
    release = locate_release_dir(None)
    table = tidy.label_chunks(pd.read_csv(release / "analysis" / "chunk_contributions.csv"),
                              tidy.bank_titles(release / "cold-start" / "selected_skillbank.json"))
    labels = dict(zip(table["intervention_id"], table["label"]))
    assert labels["chunk-27a7e5bb9344"] == "搜索查询构建 - 显式约束整合 (27a7)"
    assert labels["online-ab35490ec83d1bb6"] == "+ab35490e"  # the release keeps no text for candidates


def test_settings_are_html_escaped() -> None:
    """A setting's name or value holding markup is shown, never parsed: the Styler writes its cells unescaped."""
    html = settings_table({"note": "<script>alert(1)</script>", "a<b": {"c": ["x & y", "z"]}}).to_html()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>" not in html
    assert "a&lt;b.c" in html and "x &amp; y, z" in html
