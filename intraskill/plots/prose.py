"""Sentences that state a result's numbers, in English or Chinese, as Markdown for a labelled notebook cell.

The report's pages embed these instead of typing numbers by hand: each function takes what the notebook already
holds (the release re-analysis frames, a round's val comparison, a warm start's metrics and ground truth) and
words its numbers as the pages do: success as a percentage with two decimals, a difference in points with its
95 % interval, and the tasks a comparison fixes (0 → 1) and breaks (1 → 0).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from intraskill.evaluate.records import PairedBlock
from intraskill.experiment.records import SUCCESS
from intraskill.organism.manifest import WarmstartMetrics
from intraskill.plots.labels import label
from intraskill.policy.warmstarts import GroundTruth
from intraskill.shop.actions import LANGUAGES

if TYPE_CHECKING:
    import pandas as pd

    from intraskill.experiment.progress import MatrixProgress
    from intraskill.experiment.results import Contrast, MatrixResult
    from intraskill.pipeline.gate_b import GateBResult

ARROW = " → "


def _check(language: str) -> None:
    if language not in LANGUAGES:
        raise ValueError(f"language: expected one of {list(LANGUAGES)}, got {language!r}")


def percent(value: float, language: str) -> str:
    """A 0–1 rate as a percentage: ``51.75 %`` (en), ``51.75%`` (zh)."""
    _check(language)
    return f"{100 * value:.2f}{' %' if language == 'en' else '%'}"


def points(value: float) -> str:
    """A 0–1 difference in signed percentage points: ``+32.50``, ``−0.50``."""
    return f"{100 * value:+.2f}".replace("-", "−")


def interval(low: float, high: float) -> str:
    """A 95 % interval of a 0–1 difference in points: ``[+27.50, +37.50]``."""
    return f"[{points(low)}, {points(high)}]"


def _fixed(value: float) -> str:
    """A statistic with two decimals, or ``—`` where it is undefined (NaN: e.g. ρ of tied effects)."""
    return "—" if math.isnan(value) else f"{value:.2f}"


def _covers_zero(low: float, high: float) -> bool:
    return low <= 0.0 <= high


def _row(frame: pd.DataFrame, column: str, value: str) -> Mapping[str, Any]:
    rows = frame[frame[column] == value]
    if rows.empty:
        raise ValueError(f"no row with {column} == {value!r} (rows: {list(frame[column])})")
    return rows.iloc[0]


def release_test(conditions: pd.DataFrame, comparisons: pd.DataFrame, steps: int, language: str) -> str:
    """Base free → Iter80 free test success and what the final bank adds (the re-analysis' ``conditions`` and
    ``comparisons`` frames; ``steps``: the rollout steps of the last round)."""
    _check(language)
    base = percent(_row(conditions, "arm", "base_free")["success_rate"], language)
    trained = percent(_row(conditions, "arm", "iter80_free")["success_rate"], language)
    final = _row(comparisons, "name", "final_skill")
    added, span = points(final["success_diff"]), interval(final["success_lo"], final["success_hi"])
    if language == "en":
        return (f"Test success rises from {base} (base, no skill) to {trained} after {steps} rollout steps, without "
                f"any skill in the prompt; the final bank adds {added} points {span} on top.")
    return (f"在提示中不带任何技能的情况下，测试成功率从 {base}（基座）提升到 {steps} 个 rollout 步之后的 {trained}；"
            f"最终技能库在此基础上再增加 {added} 个百分点 {span}。")


def _paired(row: Mapping[str, Any], language: str) -> str:
    fixed, broken = int(row["0->1"]), int(row["1->0"])
    span = interval(row["success_lo"], row["success_hi"])
    verdict = _covers_zero(row["success_lo"], row["success_hi"])
    if language == "en":
        return (f"{points(row['success_diff'])} points {span}, {fixed} tasks fixed and {broken} broken — "
                f"its interval {'covers' if verdict else 'excludes'} zero")
    return (f"{points(row['success_diff'])} 个百分点 {span}，{fixed} 个任务由失败变为成功、{broken} 个相反，"
            f"置信区间{'包含' if verdict else '不包含'}零")


def release_paired(comparisons: pd.DataFrame, language: str) -> str:
    """What training did without skills (Iter80 free − Base free) and what the final bank adds on Iter80."""
    _check(language)
    training = _paired(_row(comparisons, "name", "training_free"), language)
    final = _paired(_row(comparisons, "name", "final_skill"), language)
    if language == "en":
        return f"Iter80 free − Base free is {training}; Iter80 + $S_T$ − Iter80 free is {final}."
    return f"Iter80 无技能 − 基座无技能为 {training}；Iter80 + $S_T$ − Iter80 无技能为 {final}。"


def release_rounds(rounds: pd.DataFrame, language: str) -> str:
    """The bank's size through the gates, bare val success per gate and the gate delta's first and last value
    with how many of its intervals cover zero (the re-analysis' ``rounds`` frame)."""
    _check(language)
    sizes = ARROW.join(str(int(n)) for n in [*rounds["input_chunks"], rounds["selected_chunks"].iloc[-1]])
    success = ARROW.join(percent(value, language) for value in rounds["bare_success"])
    first, last = (f"{value:+.4f}".replace("-", "−") for value in rounds["gate_delta"].iloc[[0, -1]])
    covering = sum(_covers_zero(low, high) for low, high in zip(rounds["gate_delta_lo"], rounds["gate_delta_hi"]))
    if language == "en":
        return (f"The bank goes {sizes} chunks. Bare validation success goes {success} across the gates, and the "
                f"masked-minus-bare gate delta goes from {first} to {last} strict reward; {covering} of its "
                f"{len(rounds)} intervals cover zero.")
    return (f"技能库依次为 {sizes} 个技能块。各次门控的无技能验证成功率依次为 {success}，"
            f"“带掩码减无技能”的门控差值从 {first} 变为 {last}（严格奖励）；{len(rounds)} 个置信区间中有 {covering} "
            "个包含零。")


def _paired_difference(difference: float, ci: Sequence[float], transitions: Mapping[str, int], language: str) -> str:
    """``+18.00 points [+12.50, +24.00] (task-paired bootstrap), 39 tasks fixed and 3 broken.`` (or its Chinese)."""
    fixed, broken = transitions["0->1"], transitions["1->0"]
    if language == "en":
        return (f"{points(difference)} points {interval(*ci)} (task-paired bootstrap), {fixed} tasks fixed and "
                f"{broken} broken.")
    return f"{points(difference)} 个百分点 {interval(*ci)}（按任务配对的自助法），{fixed} 个任务由失败变为成功，{broken} 个相反。"


def round_val(paired: PairedBlock, language: str) -> str:
    """A round's bare val check (the paired block of its ``val-compare/comparison.json``): before → after, the
    difference with its interval, and the tasks fixed and broken."""
    _check(language)
    success = paired.metric("r_success")
    before, after = percent(success.a_mean, language), percent(success.b_mean, language)
    tail = _paired_difference(success.mean_difference, success.confidence_interval, paired.success_transitions,
                              language)
    if language == "en":
        return f"Bare val success on {paired.pairs} val tasks went from {before} to {after}: {tail}"
    return f"{paired.pairs} 个验证任务上的无技能成功率从 {before} 升到 {after}：{tail}"


def gate_b(result: GateBResult, language: str) -> str:
    """The cold start's Gate B: the base policy on test bare and with the induced S₀, the difference with its
    interval, and the tasks fixed and broken."""
    _check(language)
    success = result.success
    bare, s0 = percent(success.bare, language), percent(success.s0, language)
    tail = _paired_difference(success.difference, success.ci, result.transitions, language)
    if language == "en":
        return f"Gate B on {result.tasks} test tasks: bare success {bare}, with the induced $S_0$ {s0}: {tail}"
    return f"Gate B，{result.tasks} 个测试任务：无技能成功率 {bare}，带归纳出的 $S_0$ 为 {s0}：{tail}"


def warmstart_effects(metrics: WarmstartMetrics, truth: GroundTruth, language: str) -> str:
    """A warm start's val success bare and with S₀, and each chunk alone against bare: the largest effect with
    its interval and the range of the others (``manifest.json`` metrics, ``ground_truth.json``)."""
    _check(language)
    chunks = sorted(truth.chunks.items(), key=lambda item: -item[1].effect)
    (best, top), others = chunks[0], [chunk.effect for _, chunk in chunks[1:]]
    episodes = metrics.bare.episodes
    bare, s0 = percent(metrics.bare.success, language), percent(metrics.s0.success, language)
    lead = f"{points(top.effect)}" + (" points " if language == "en" else " 个百分点 ") + interval(*top.ci95)
    spread = f"{points(min(others))} … {points(max(others))}" if others else "—"
    if language == "en":
        return (f"On {episodes} val tasks: bare success {bare}, with $S_0$ {s0}. Alone against bare, the `{best}` chunk "
                f"adds {lead}; every other chunk adds {spread} points.")
    return (f"在 {episodes} 个验证任务上：无技能成功率 {bare}，带 $S_0$ 为 {s0}。单独加入与无技能相比，"
            f"`{best}` 技能块提升 {lead}；其余每个技能块提升 {spread} 个百分点。")


def gate_validation(reports: Mapping[int, Any], language: str) -> str:
    """Gate A against the ground truth, one sentence per number of masked rollouts per task m: the mean
    Spearman ρ over the mask seeds (each seed's), the mean CI coverage, the attainable ρ and whether the target
    is met (``reports``: m → :class:`~intraskill.organism.gate_validation.GateValidationReport`)."""
    _check(language)
    sentences = []
    for m, report in reports.items():
        seeds = ", ".join(str(seed) for seed in report.seeds)
        each = " / ".join(_fixed(s.comparison.spearman) for s in report.per_seed)
        rho, coverage = _fixed(report.spearman_mean), _fixed(report.coverage_mean)
        attainable = _fixed(report.attainable_spearman_mean)
        if language == "en":
            sentences.append(
                f"With m = {m} masked rollout(s) per task (mask seeds {seeds}), Spearman's ρ averages {rho} ({each}) "
                f"and CI coverage {coverage}; the attainable ρ is {attainable}; the target (ρ ≥ 0.8, coverage ≥ "
                f"0.9) is {'met' if report.meets_target else 'not met'}.")
        else:
            sentences.append(
                f"每个任务 m = {m} 次掩码 rollout（掩码种子 {seeds}）时，Spearman ρ 平均为 {rho}（{each}），"
                f"置信区间覆盖率为 {coverage}；可达 ρ 为 {attainable}；目标（ρ ≥ 0.8，覆盖率 ≥ 0.9）"
                f"{'已达到' if report.meets_target else '未达到'}。")
    return " ".join(sentences)


def matrix_source(sources: Mapping[str, MatrixResult], language: str) -> str:
    """Which control matrix a page's figures and tables come from (the first of ``sources``, as
    :func:`intraskill.experiment.shipped.matrix_sources` orders them: the user's own run, else the shipped
    records), and which other source its first table shows beside it."""
    _check(language)
    (source, result), *others = sources.items()
    name, cells, rounds = label(f"source_{source}", language), len(result.cells), result.plan["rounds"]
    beside = [f"{label(f'source_{other}', language)} (`{matrix.out_dir}`)" for other, matrix in others]
    if language == "en":
        return (f"The figures and tables below come from **{name}** (`{result.out_dir}`: {cells} cells, {rounds} "
                f"round(s) each)" + (f"; this table shows the {' and the '.join(beside)} beside them." if beside
                                     else "."))
    return (f"以下图表来自**{name}**（`{result.out_dir}`：{cells} 个单元，每个单元 {rounds} 轮）"
            + (f"；本表同时列出{'和'.join(beside)}以作对照。" if beside else "。"))


def _quoted(text: str) -> str:
    """``text`` as a fenced text block, its fence longer than any run of backticks inside it."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return f"{fence}text\n{text.rstrip()}\n{fence}"


def transcript(instruction: str, observation: str, steps: Sequence[tuple[str, str]]) -> str:
    """An episode as the agent saw it, in Markdown: the task's instruction and its first page, then each action
    with the page it led to; every text is a quoted block under a caption (shown literally: a price's ``$`` stays
    a dollar)."""
    parts = ["**The task's instruction**", _quoted(instruction), "**The first page**", _quoted(observation)]
    for turn, (action, page) in enumerate(steps, start=1):
        parts += [f"**Turn {turn}: the action**", _quoted(action), f"**Turn {turn}: the page it led to**", _quoted(page)]
    return "\n\n".join(parts)


def matrix_sealed(progress: MatrixProgress, language: str) -> str:
    """A pre-registered matrix not yet complete: how far it has come, and that nothing of its outcome is shown."""
    _check(language)
    cells = len(progress.arms) * progress.seeds
    done = len(progress.finished)
    baselines = (f" (and {len(progress.baselines)} of {progress.seeds} seeds' deployment baselines)"
                 if progress.needs_baselines else "")
    if language == "en":
        return (f"**Sealed by the stopping rule.** {done} of the {cells} declared cells{baselines} have finished "
                f"(`{progress.out_dir}`). The pre-registration (`docs/preregistration.md`) reads the matrix only "
                "once every declared cell has finished, so this page shows no outcome yet.")
    baselines = f"（部署基线 {len(progress.baselines)}/{progress.seeds} 个种子）" if progress.needs_baselines else ""
    return (f"**按停止规则封存。** 预先声明的 {cells} 个单元中已完成 {done} 个{baselines}（`{progress.out_dir}`）。"
            "预注册（`docs/preregistration.md`）规定全部单元完成后才读取矩阵，因此本页暂不显示任何结果。")


VERDICT_WORDS = {
    "greater": ("**confirmed**: {a} beats {b} on this testbed", "**得到证实**：在此测试平台上 {a} 优于 {b}"),
    "less": ("**refuted in the other direction**: {a} is worse than {b} on this testbed",
             "**反向否定**：在此测试平台上 {a} 劣于 {b}"),
    "equivalent": ("**no difference of {margin} points or more** (two one-sided tests)",
                   "**差异不足 {margin} 个百分点**（双单侧检验）"),
    "unresolved": ("**unresolved**: the interval reaches 0 and no equivalence holds, so no verdict",
                   "**未分辨**：区间包含 0 且等效不成立，故不下结论"),
}
"""How the registration words each outcome of the primary contrast (docs/preregistration.md, "Analysis")."""


def primary_claim(contrast: Contrast, language: str, hypothesis: str = "H1") -> str:
    """The primary contrast (the registration's ``hypothesis``) with its 95 % interval (and 90 % one where an
    equivalence margin is declared), seeds × tasks, and its verdict in the registration's words."""
    _check(language)
    r, e = contrast.across_seeds, contrast.equivalence
    outcome = ("equivalent" if contrast.equivalent else "unresolved" if not contrast.supported
               else "greater" if r.mean > 0 else "less")
    words = VERDICT_WORDS[outcome][language == "zh"].format(a=contrast.a, b=contrast.b,
                                                            margin=f"{100 * (contrast.margin or 0.0):g}")
    size = f"{points(r.mean)} {interval(r.low, r.high)}"
    if language == "en":
        ninety = f", 90 % interval {interval(e.low, e.high)}" if e is not None else ""
        metric = "success" if contrast.metric == SUCCESS else "strict reward"
        return (f"**{hypothesis}**, {contrast.a} − {contrast.b} ({contrast.condition}, {metric}): {size} points "
                f"(95 %){ninety}, over {r.n_seeds} seeds × {r.n_tasks} tasks, p = {r.p_value:.3g}. Verdict: {words}.")
    condition = label(f"condition_{contrast.condition}", "zh")
    ninety = f"，90% 区间 {interval(e.low, e.high)}" if e is not None else ""
    metric = "成功率" if contrast.metric == SUCCESS else "严格奖励"
    return (f"**{hypothesis}**，{contrast.a} − {contrast.b}（{condition}，{metric}）：{size} 个百分点（95%）{ninety}，"
            f"{r.n_seeds} 个种子 × {r.n_tasks} 个任务，p = {r.p_value:.3g}。结论：{words}。")
