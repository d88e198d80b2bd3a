"""The reader testbed's teacher: the scripted expert that translates the profile's house code by the rules in
its skill block (``docs/testbed.md``).

The profile shows its colour as a house code (:mod:`intraskill.shop.house_codes`). :class:`ReaderExpertPolicy`
reads every rule line of the skill chunks in its system message (:func:`~intraskill.shop.house_codes.read_rules`:
content, not wording) and shops with the colour the rule states. With no rule for its code it does not know the
colour and keeps the scripted expert's fallback, the first listed colour (never the goal's in this store), except
that with probability ``explore`` it clicks one of the other offered colours at random (seeded per session): a bare
episode succeeds rarely, so groups are often all wrong and rewards alone teach the codes slowly. Every other
competence is on.

With a ``note`` its first reply opens with a reasoning note, ``<think>CODE: ?</think>`` when no rule names the
code, else in one of two forms: ``value``, ``<think>CODE: color=VALUE</think>`` (the clone copies the code from the
profile, then must look up the value on the line that names it); ``line``, ``<think>CODE REST; color=VALUE</think>``
where REST is the rest of that rule line, verbatim (the clone copies the code, then continues copying from the
code's occurrence in the skill block: a lookup turned into a copy), and VALUE repeats the line's last colour in the
form the click takes. Either way it later clicks ``color=VALUE`` by copying ``color=VALUE`` from its own note.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace
from typing import Any

from intraskill.chat.base import ChatRequest, Generation
from intraskill.chat.chatml import THINK_CLOSE, THINK_OPEN
from intraskill.policy.expert_policy import (
    DEFAULT_MAX_ACTIONS,
    ExpertPolicy,
    _LawfulExpert,
    persona_in,
    read_task_messages,
)
from intraskill.shop.house_codes import CODE_POOL, CODED_KEY, rule_lines
from intraskill.skills.render import skill_entries

UNKNOWN = "?"
NOTES = ("none", "value", "line")
"""The first reply's note: none, ``<think>CODE: color=VALUE</think>``, or
``<think>CODE REST-OF-RULE-LINE; color=VALUE</think>``."""


def decoded(system: str, language: str = "en") -> tuple[dict[str, Any], str | None, tuple[str, str] | None]:
    """``(persona as the expert knows it, the profile's code, (the colour the rules give it, the line saying so))``:
    the code replaced by its colour, or the colour dropped when no rule names the code; ``(persona, None, None)``
    without a code."""
    persona = persona_in(system, language)
    prefs = persona.get("preferences")
    code = str(prefs.get(CODED_KEY, "")).casefold() if isinstance(prefs, dict) else ""
    if code not in CODE_POOL:
        return persona, None, None
    rule = rule_lines(content for _, content in skill_entries(system)).get(code)
    known = {k: v for k, v in prefs.items() if k != CODED_KEY} | ({CODED_KEY: rule[0]} if rule else {})
    return {**persona, "preferences": known}, code, rule


def note_text(code: str, value: str | None, line: str | None = None) -> str:
    """The first reply's note: ``<think>CODE: ?</think>`` without a rule; with the rule's ``line``, the code, the
    rest of that line verbatim and ``; color=VALUE``; else ``<think>CODE: color=VALUE</think>``.

    >>> note_text("fatef", "navy", "- for fatef select navy")
    '<think>fatef select navy; color=navy</think>'
    >>> note_text("fatef", "navy"), note_text("fatef", None)
    ('<think>fatef: color=navy</think>', '<think>fatef: ?</think>')
    """
    if value is None:
        return f"{THINK_OPEN}{code}: {UNKNOWN}{THINK_CLOSE}"
    if line is not None:
        end = re.search(rf"(?<![^\W_]){re.escape(code)}(?![^\W_])", line, re.IGNORECASE).end()
        return f"{THINK_OPEN}{code}{line[end:].rstrip()}; {CODED_KEY}={value}{THINK_CLOSE}"
    return f"{THINK_OPEN}{code}: {CODED_KEY}={value}{THINK_CLOSE}"


class _GuessingExpert(_LawfulExpert):
    """On the coded axis, with the profile's colour unknown: the first listed value, or with probability ``explore``
    a random other one."""

    def __init__(self, *args: Any, explore: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.explore = explore

    def _choose(self, episode: Any, axis: str, values: list[str]) -> str:
        if axis.casefold() == CODED_KEY and CODED_KEY not in episode.options and len(values) > 1:
            return self.rng.choice(values[1:]) if self.rng.random() < self.explore else values[0]
        return super()._choose(episode, axis, values)


class ReaderExpertPolicy(ExpertPolicy):
    """The scripted expert that reads house-code rules (every competence on; ``explore``: the chance of a random
    other colour when the code is unknown; ``note``: the first reply's note, one of :data:`NOTES`)."""

    def __init__(self, seed: int = 0, language: str = "en", max_actions: int = DEFAULT_MAX_ACTIONS, slip_rate: float = 0.0,
                 explore: float = 1.0, note: str = "none") -> None:
        if not 0.0 <= explore <= 1.0:
            raise ValueError(f"explore: expected a probability in [0, 1], got {explore!r}")
        if note not in NOTES:
            raise ValueError(f"note: expected one of {', '.join(NOTES)}, got {note!r}")
        super().__init__(seed=seed, language=language, max_actions=max_actions, slip_rate=slip_rate)
        self.explore = explore
        self.note = note

    @property
    def identity(self) -> dict[str, Any]:
        return {**super().identity, "reader": {"explore": self.explore, "note": self.note}}

    def _new_expert(self, rng: random.Random, skill_ids: tuple[str, ...], system: str) -> _LawfulExpert:
        return _GuessingExpert(self.competences, rng, self.max_actions, None, skill_ids, explore=self.explore)

    def _persona(self, system: str) -> dict[str, Any]:
        return decoded(system, self.language)[0]

    def _reply(self, request: ChatRequest) -> Generation:
        first = request.session_id not in self._sessions
        generation = super()._reply(request)
        if self.note == "none" or not first:
            return generation
        _, code, rule = decoded(read_task_messages(request.messages, self.language)[0], self.language)
        if code is None:
            return generation
        value, line = rule if rule is not None else (None, None)
        return replace(generation, text=note_text(code, value, line if self.note == "line" else None) + "\n"
                       + generation.text)
