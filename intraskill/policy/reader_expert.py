"""The reader testbed's teacher: the scripted expert that translates the profile's house code by the rules in
its skill block (``docs/testbed.md``).

The profile shows its colour as a house code (:mod:`intraskill.shop.house_codes`). :class:`ReaderExpertPolicy`
reads every rule line of the skill chunks in its system message (:func:`~intraskill.shop.house_codes.read_rules`:
content, not wording) and shops with the colour the rule states; with no rule for its code it does not know the
colour and picks one of the offered colours at random (seeded per session), so a bare demonstration explores.
Every other competence is on.

With ``note`` its first reply opens with a reasoning note, ``<think>CODE: color=VALUE</think>`` (or
``<think>CODE: ?</think>`` with no rule): the clone copies the code from the profile, then the value from the
rule that names it, one copy at a time, and later clicks ``color=VALUE`` by copying its own note.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from intraskill.chat.base import ChatRequest, Generation
from intraskill.chat.chatml import THINK_CLOSE, THINK_OPEN
from intraskill.policy.expert_policy import ExpertPolicy, _LawfulExpert, persona_in, read_task_messages
from intraskill.shop.house_codes import CODE_POOL, CODED_KEY, read_rules
from intraskill.skills.render import skill_entries

UNKNOWN = "?"


def decoded(system: str, language: str = "en") -> tuple[dict[str, Any], str | None, str | None]:
    """``(persona as the expert knows it, the profile's code, the colour the rules give it)``: the code replaced by
    its colour, or the colour dropped when no rule names the code; ``(persona, None, None)`` without a code."""
    persona = persona_in(system, language)
    prefs = persona.get("preferences")
    code = str(prefs.get(CODED_KEY, "")).casefold() if isinstance(prefs, dict) else ""
    if code not in CODE_POOL:
        return persona, None, None
    value = read_rules(content for _, content in skill_entries(system)).get(code)
    known = {k: v for k, v in prefs.items() if k != CODED_KEY} | ({CODED_KEY: value} if value else {})
    return {**persona, "preferences": known}, code, value


def note_text(code: str, value: str | None) -> str:
    """The first reply's note: ``<think>CODE: color=VALUE</think>`` or ``<think>CODE: ?</think>``."""
    return f"{THINK_OPEN}{code}: {f'{CODED_KEY}={value}' if value else UNKNOWN}{THINK_CLOSE}"


class _GuessingExpert(_LawfulExpert):
    """Chooses a random offered value on the coded axis when the profile's colour is unknown."""

    def _choose(self, episode: Any, axis: str, values: list[str]) -> str:
        if axis.casefold() == CODED_KEY and CODED_KEY not in episode.options:
            return self.rng.choice(values)
        return super()._choose(episode, axis, values)


class ReaderExpertPolicy(ExpertPolicy):
    """The scripted expert that reads house-code rules (every competence on; ``note``: the first reply's note)."""

    def __init__(self, seed: int = 0, language: str = "en", max_actions: int = 30, slip_rate: float = 0.0,
                 note: bool = False) -> None:
        super().__init__(seed=seed, language=language, max_actions=max_actions, slip_rate=slip_rate)
        self.note = note

    @property
    def identity(self) -> dict[str, Any]:
        return {**super().identity, "reader": True, **({"note": True} if self.note else {})}

    def _new_expert(self, rng: random.Random, skill_ids: tuple[str, ...], system: str) -> _LawfulExpert:
        return _GuessingExpert(self.competences, rng, self.max_actions, None, skill_ids)

    def _persona(self, system: str) -> dict[str, Any]:
        return decoded(system, self.language)[0]

    def _reply(self, request: ChatRequest) -> Generation:
        first = request.session_id not in self._sessions
        generation = super()._reply(request)
        if not (self.note and first):
            return generation
        _, code, value = decoded(read_task_messages(request.messages, self.language)[0], self.language)
        return generation if code is None else replace(generation, text=note_text(code, value) + "\n" + generation.text)
