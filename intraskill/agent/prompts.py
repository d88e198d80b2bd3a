"""The shopping agent's system prompt, persona block and first user message.

Reference: docs/store.md §4.2 (conversation layout: system = prompt + persona block + optional
skill chunks; first user = task label + instruction + blank line + home observation) and
docs/method.md §1.6 (sections joined with blank lines; prompt identity = prompt_version,
system-prompt SHA-256, skill_renderer_version). The base prompt states the reference rules: exactly
one tool call per turn, ``search`` only when offered, ``click`` values copied verbatim, every option
axis chosen before buying, no partly fitting purchase, no visible text. It is short on purpose (a
tiny model reads it). English is the default; the Chinese text is its faithful twin.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from intraskill.hashing import sha256_text
from intraskill.shop.actions import LANGUAGES
from intraskill.skills.bank import Skill
from intraskill.skills.render import SKILL_RENDERER_VERSION, render_skill_block

PROMPT_VERSION = "intraskill-shopping-agent-tools-v1"

SYSTEM_PROMPTS: dict[str, str] = {
    "en": (
        "You are a shopping agent in an online store. Buy the one product that fits the shopping task "
        "and the user profile.\n"
        "Rules:\n"
        "- Every turn, call exactly one of the provided tools. Write no visible text.\n"
        "- Use search only when it is offered; to search again, click \"back to search\" first.\n"
        "- For click, copy one value verbatim from the current options.\n"
        "- Select a value on every option axis before clicking \"buy now\".\n"
        "- Do not buy a product that fits the task only partly."
    ),
    "zh": (
        "你是网上商店里的购物助手。请买下符合购物任务和用户个人文档的那一件商品。\n"
        "规则：\n"
        "- 每一轮只调用一个提供的工具，不要输出任何可见文字。\n"
        "- 只有在提供 search 时才能搜索；要重新搜索，先点击 \"back to search\"。\n"
        "- 使用 click 时，从当前可选项中原样复制一个值。\n"
        "- 点击 \"buy now\" 之前，先为每个规格选好一个值。\n"
        "- 不要购买只部分符合任务的商品。"
    ),
}

COMPACT_SYSTEM_PROMPTS: dict[str, str] = {
    "en": "You are a shopping agent. Buy the one product that fits the shopping task and the user profile.",
    "zh": "你是购物助手。请买下符合购物任务和用户个人文档的那一件商品。",
}
"""The compact view's base prompt (:mod:`intraskill.agent.views`): the tool rules travel with the tools."""

PERSONA_LABELS = {"en": "User profile document:", "zh": "用户个人文档："}
TASK_LABELS = {"en": "Shopping task: ", "zh": "购物任务："}
PRIVATE_PERSONA_KEYS = ("__reasoning__",)


def _check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise ValueError(f"language: expected one of {LANGUAGES}, got {language!r}")


def system_prompt(language: str = "en", view: str = "standard") -> str:
    """The base system prompt text in ``language`` (``"en"`` or ``"zh"``) for ``view``."""
    _check_language(language)
    return SYSTEM_PROMPTS[language] if view == "standard" else COMPACT_SYSTEM_PROMPTS[language]


def persona_block(persona: Mapping[str, Any], language: str = "en") -> str:
    """The persona label and the persona as JSON (sorted keys, non-ASCII kept); ``""`` when empty.

    Private keys (``__reasoning__``) are dropped: the agent never sees them.
    """
    _check_language(language)
    public = {key: value for key, value in persona.items() if key not in PRIVATE_PERSONA_KEYS}
    if not public:
        return ""
    return f"{PERSONA_LABELS[language]}\n{json.dumps(public, ensure_ascii=False, sort_keys=True)}"


def build_system_message(
    persona: Mapping[str, Any], skills: Sequence[Skill] = (), language: str = "en", view: str = "standard"
) -> dict[str, str]:
    """The system message: base prompt, persona block and skill block (if any), joined by blank lines."""
    sections = [
        system_prompt(language, view),
        persona_block(persona, language),
        render_skill_block(skills, language),
    ]
    return {"role": "system", "content": "\n\n".join(section for section in sections if section)}


def build_first_user_message(instruction: str, observation: str, language: str = "en") -> dict[str, str]:
    """The first user message: task label + instruction, a blank line, the home-page observation."""
    _check_language(language)
    if not instruction.strip():
        raise ValueError("task_instruction: must be non-empty")
    return {"role": "user", "content": f"{TASK_LABELS[language]}{instruction.strip()}\n\n{observation}"}


@dataclass(frozen=True)
class PromptIdentity:
    """What identifies the prompt a trace was produced with."""

    prompt_version: str
    language: str
    system_prompt_sha256: str
    skill_renderer_version: str

    def to_dict(self) -> dict[str, str]:
        return {
            "prompt_version": self.prompt_version,
            "language": self.language,
            "system_prompt_sha256": self.system_prompt_sha256,
            "skill_renderer_version": self.skill_renderer_version,
        }


def prompt_identity(language: str = "en", view: str = "standard") -> PromptIdentity:
    """The prompt identity of ``language``'s base prompt in ``view`` (the SHA-256 covers its text)."""
    digest = sha256_text(system_prompt(language, view))
    return PromptIdentity(PROMPT_VERSION, language, digest, SKILL_RENDERER_VERSION)
