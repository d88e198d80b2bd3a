"""The line that heads an evaluation notebook's results, in English or Chinese: what was evaluated, that stand-ins
are stand-ins, or what is missing (the evaluation notebooks' set-up, :mod:`intraskill.pipeline.notebook`, names
it and never words it); and the evaluated models' and conditions' names in the page's language."""

from __future__ import annotations

import re
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


MODEL_WORDS = {
    "en": (),
    "zh": ((re.compile(r"\bco-evolve round (\d+)\b"), r"协同演化第 \1 轮"), (re.compile(r"\bwarm start\b"), "热启动"),
           (re.compile(r"^start \(([^)]*)\)"), r"起点（\1）"), (re.compile(r"\bno skill\b"), "无技能"),
           (re.compile(r"^base\b"), "基座"), (re.compile(r"^trained\b"), "训练后")),
}
"""The words of the models' labels that :mod:`intraskill.pipeline.notebook` gives (``warm start``, ``co-evolve round
1``, ``… + no skill``, ``base``, ``trained``), per language; a model id or checkpoint in a label stays as it is."""
CONDITION = {"en": ("{model} + {bank}", "{model}, no skill"), "zh": ("{model} + {bank}", "{model}·无技能")}
"""A condition's name: a model with a skill bank, and a model without skills."""
LIST_SEPARATOR = {"en": ", ", "zh": "、"}


def _language(language: str) -> str:
    if language not in MISSING_RUN:
        raise ValueError(f"language: expected one of {sorted(MISSING_RUN)}, got {language!r}")
    return language


def model_name(label: str, language: str) -> str:
    """An evaluated model's (or arm's) label in ``language``."""
    for pattern, words in MODEL_WORDS[_language(language)]:
        label = pattern.sub(words, label)
    return label


def condition_name(model_label: str, bank: str | None, language: str) -> str:
    """A condition's name: the model (:func:`model_name`) with its skill bank, or without skills."""
    with_bank, bare = CONDITION[_language(language)]
    model = model_name(model_label, language)
    return with_bank.format(model=model, bank=bank) if bank else bare.format(model=model)


def status_note(missing: str | None, labels: list[str], *, coevolve_dir: str, params_name: str,
                language: str) -> str:
    """The Markdown line that heads an evaluation notebook's results: what was evaluated, that stand-ins are
    stand-ins, or what is missing (for a co-evolve run that does not exist, :data:`MISSING_RUN`)."""
    _language(language)
    if missing is not None:
        if coevolve_dir:
            shown = params_name if Path(params_name).suffix in {".yaml", ".yml"} else f"params/{params_name}.yaml"
            return MISSING_RUN[language].format(run=coevolve_dir, params=shown)
        return NOT_EVALUATED[language].format(missing=missing)
    listed = LIST_SEPARATOR[language].join(f"**{model_name(label, language)}**" for label in labels)
    return (STAND_INS if any(STAND_IN_MARK in label for label in labels) else EVALUATED)[language].format(
        labels=listed)
