"""The line that heads an evaluation notebook's results, in English or Chinese: what was evaluated, that stand-ins
are stand-ins, or what is missing (the evaluation notebooks' set-up, :mod:`intraskill.pipeline.notebook`, names
it and never words it)."""

from __future__ import annotations

from pathlib import Path

from intraskill.pipeline.notebook import STAND_IN_MARK

MISSING_RUN = {
    "en": "**No co-evolve run at `{run}`.** This section shows the final checkpoint of that run with S₀ and its "
          "final bank once it exists: run `intraskill co-evolve --params {params}` (or notebook 07), then "
          "`make report`. Nothing is shown in its place.",
    "zh": "**`{run}` 下还没有协同演化运行。** 该运行存在后，本节展示其最终检查点在 S₀ 与最终技能库下的结果："
          "先运行 `intraskill co-evolve --params {params}`（或笔记本 07），再运行 `make report`。"
          "在此之前本节不显示任何替代结果。",
}
"""What a report section says instead of its evidence when the co-evolve run does not exist."""


NOT_EVALUATED = {"en": "**Not evaluated:** {missing}. Nothing is shown in its place.",
                 "zh": "**未评估：** {missing}。本节不显示任何替代结果。"}
EVALUATED = {"en": "Evaluated: {labels}.", "zh": "评估对象：{labels}。"}
STAND_INS = {"en": "**Scripted stand-ins, not trained models:** {labels}.",
             "zh": "**脚本替身，不是训练得到的模型：** {labels}。"}


def status_note(missing: str | None, labels: list[str], *, coevolve_dir: str, params_name: str,
                language: str) -> str:
    """The Markdown line that heads an evaluation notebook's results: what was evaluated, that stand-ins are
    stand-ins, or what is missing (for a co-evolve run that does not exist, :data:`MISSING_RUN`)."""
    if language not in MISSING_RUN:
        raise ValueError(f"language: expected one of {sorted(MISSING_RUN)}, got {language!r}")
    if missing is not None:
        if coevolve_dir:
            shown = params_name if Path(params_name).suffix in {".yaml", ".yml"} else f"params/{params_name}.yaml"
            return MISSING_RUN[language].format(run=coevolve_dir, params=shown)
        return NOT_EVALUATED[language].format(missing=missing)
    listed = ", ".join(f"**{label}**" for label in labels)
    return (STAND_INS if any(STAND_IN_MARK in label for label in labels) else EVALUATED)[language].format(
        labels=listed)
