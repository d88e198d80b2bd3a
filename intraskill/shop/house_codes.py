"""The store's house codes: a profile's colour recorded as a code word that only skills translate.

The reader testbed (``params/organism_reader.yaml``, ``docs/testbed.md``) hides one piece of information the
shopper needs: the profile's ``preferences.color`` is shown as a house code (``"color": "vobek"``) while the
store's option buttons carry colour words. Which colour a code stands for is the store's convention, stated only
by instructions in skill chunks (``vobek means navy``), so a skill can carry information the bare policy lacks.

- :data:`CODE_POOL`: the code words, drawn once from a fixed seed and kept apart from every word the catalogue
  uses (no code is a colour, brand, size or material).
- :class:`HouseCodes`: the colour → code table of the store (one table from ``seed``), or with ``per_episode``
  a fresh table per episode (the cloning demonstrations: no table can be memorised, only read).
- :func:`read_rules`: what a skill text *says*, independent of its wording: every line that names exactly one
  code and exactly one colour is the rule "code → colour" (the first rule for a code wins).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from intraskill.hashing import seed32
from intraskill.shop import vocab

CODED_KEY = "color"
"""The profile preference shown as a house code (and the option axis it decides)."""
STORE_COLOURS: tuple[str, ...] = tuple(sorted({c for domain in vocab.DOMAINS for c in domain.colors}))
"""Every colour the catalogue offers."""
POOL_SIZE = 60
POOL_SEED = 20261207
_CONSONANTS, _VOWELS = "bdfgklmnprstvz", "aeiou"
_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)


def _catalogue_words() -> set[str]:
    words: set[str] = {w.casefold() for w in vocab.BRANDS}
    for domain in vocab.DOMAINS:
        words.update(domain.colors + domain.sizes)
        for sub in domain.subcategories:
            for text in (*sub.materials, *sub.features, sub.name, *(t.name for t in sub.types)):
                words.update(_WORD_RE.findall(text.casefold()))
    return words


def _code_pool() -> tuple[str, ...]:
    """:data:`POOL_SIZE` distinct consonant-vowel words (CVCVC), none a catalogue word, from :data:`POOL_SEED`."""
    rng, banned, pool = random.Random(POOL_SEED), _catalogue_words(), []
    while len(pool) < POOL_SIZE:
        word = "".join(rng.choice(_CONSONANTS if i % 2 == 0 else _VOWELS) for i in range(5))
        if word not in banned and word not in pool:
            pool.append(word)
    return tuple(pool)


CODE_POOL: tuple[str, ...] = _code_pool()
"""The house-code words (lower-case, five letters)."""
RULE_TEMPLATE = "profile color {code} means {value}"
"""One wording of a rule (the analyst's; the reader testbed's instruction language has more)."""


@dataclass(frozen=True)
class HouseCodes:
    """The store's colour → code convention.

    ``seed`` fixes the store's one table; with ``per_episode`` each episode seed draws its own table from the
    same pool (so a demonstration's codes carry no fixed meaning).
    """

    seed: int
    per_episode: bool = False

    def table(self, episode_seed: int) -> dict[str, str]:
        """Colour → code for an episode (``episode_seed`` is ignored unless ``per_episode``)."""
        key = f"{self.seed}:house-codes:{episode_seed}" if self.per_episode else f"{self.seed}:house-codes"
        codes = random.Random(seed32(key)).sample(CODE_POOL, len(STORE_COLOURS))
        return dict(zip(STORE_COLOURS, codes))

    def unused(self, episode_seed: int) -> tuple[str, ...]:
        """The pool's codes no colour has in this episode's table (codes no profile carries)."""
        used = set(self.table(episode_seed).values())
        return tuple(code for code in CODE_POOL if code not in used)

    def encode(self, persona: Mapping[str, Any], episode_seed: int) -> dict[str, Any]:
        """``persona`` with ``preferences.color`` replaced by its code (unchanged when it has none)."""
        prefs = persona.get("preferences")
        if not isinstance(prefs, Mapping) or str(prefs.get(CODED_KEY, "")).casefold() not in STORE_COLOURS:
            return dict(persona)
        code = self.table(episode_seed)[str(prefs[CODED_KEY]).casefold()]
        return {**persona, "preferences": {**prefs, CODED_KEY: code}}

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "per_episode": self.per_episode}


def read_rules(texts: Iterable[str]) -> dict[str, str]:
    """Code → colour stated by ``texts``: each line naming exactly one code of :data:`CODE_POOL` and exactly
    one colour of :data:`STORE_COLOURS` is a rule, whatever its other words; the first rule for a code wins.

    >>> read_rules(["### Colour codes\\n- fatef means navy", "fatef stands for red", "- sikid or baruv: blue"])
    {'fatef': 'navy'}
    """
    return {code: colour for code, (colour, _) in rule_lines(texts).items()}


def rule_lines(texts: Iterable[str]) -> dict[str, tuple[str, str]]:
    """Code → (colour, the line that states it), read as :func:`read_rules` reads.

    >>> rule_lines(["- for fatef select navy"])
    {'fatef': ('navy', '- for fatef select navy')}
    """
    pool, colours, rules = set(CODE_POOL), set(STORE_COLOURS), {}
    for text in texts:
        for line in str(text).splitlines():
            words = [w.casefold() for w in _WORD_RE.findall(line)]
            codes = [w for w in words if w in pool]
            named = [w for w in words if w in colours]
            if len(codes) == 1 and len(named) == 1:
                rules.setdefault(codes[0], (named[0], line))
    return rules
