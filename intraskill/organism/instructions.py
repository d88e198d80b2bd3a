"""The reader testbed's instruction language: house-code rules, their wordings, and the banks built from them.

A *rule* says which colour a house code stands for (:mod:`intraskill.shop.house_codes`). It is written by a
*template* of one wording family; every template names the code before the colour, and the teacher reads any
line that names one code and one colour (:func:`~intraskill.shop.house_codes.read_rules`), so what a chunk does
is what it says, whatever the words. Two families:

- ``train``: the words cloning demonstrations use (:data:`TEMPLATES`, :data:`TITLES`, :data:`ADVICE`);
- ``heldout``: words no demonstration uses (no word in common with ``train``, :func:`shared_words`), for the
  paraphrase test: the same rules in words the warm start never read.

A chunk is ``### title`` and one ``- line`` per rule or advice, or the method's chunk template with the lines as
its procedure (:func:`render_chunk`). :func:`demo_chunks` draws
one demonstration's skill block from an episode's own code table; :func:`reader_banks` builds the deployed S₀,
its paraphrase, an irrelevant bank of the same shape and the probe chunks (``docs/testbed.md``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from intraskill.hashing import seed32
from intraskill.shop.house_codes import RULE_TEMPLATE, STORE_COLOURS, HouseCodes
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.render import Chunk
from intraskill.skills.render import render_chunk as render_method_chunk

FAMILIES = ("train", "heldout")
TEMPLATES: dict[str, tuple[str, ...]] = {
    "train": (
        RULE_TEMPLATE,
        "if the profile color is {code}, click {value}",
        "{code} in the profile: choose {value}",
        "when the color reads {code}, pick {value}",
        "color code {code} is the option {value}",
        "for {code} select {value}",
        "{code} = {value}",
        "code {code}: buy it in {value}",
    ),
    "heldout": (
        "{code} denotes {value}",
        "treat {code} as {value}",
        "whenever shoppers show {code}, their shade equals {value}",
        "{code} translates to {value}",
        "anyone marked {code} wants {value}",
    ),
}
"""Rule templates per wording family: the code always comes before the colour."""
TITLES: dict[str, tuple[str, ...]] = {
    "train": ("Color codes", "House codes", "Profile colors", "Codes of the store", "Option colors"),
    "heldout": ("Shade glossary", "Swatch key", "Decoding shopper shades"),
}
ADVICE: dict[str, tuple[str, ...]] = {
    "train": ("read the profile first", "check each option before buying", "compare the price with the budget",
              "open a result that fits the task"),
    "heldout": ("stay calm", "go slowly", "review everything twice", "never rush"),
}
"""Lines that state no rule (an advice chunk, a demonstration's filler)."""
METHOD_FRAME = ("choosing a color option", "the color axis shows the color the rule names", "the first listed color")
"""A ``train`` chunk in the method's template (:func:`~intraskill.skills.render.render_chunk`): its applies-when,
verify and avoid lines around the rules as procedure steps — the form an analyst's chunk takes."""
METHOD_SHARE = 0.25
"""Share of a demonstration's chunks written in the method's template (the rest: ``### title`` and ``- line``)."""
READER_BANK_KIND = "house-code-instructions"
"""``metadata.kind`` of a reader bank: its helpful chunks carry rules, not a competence of the expert."""
_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)


def shared_words() -> set[str]:
    """Words the two families have in common (the ``{code}``/``{value}`` slots aside); must stay empty."""
    def words(family: str) -> set[str]:
        frame = METHOD_FRAME if family == "train" else ()
        text = " ".join((*TEMPLATES[family], *TITLES[family], *ADVICE[family], *frame)).replace("{code}", " ")
        return {w.casefold() for w in _WORD_RE.findall(text.replace("{value}", " "))}
    return words("train") & words("heldout")


def render_rule(code: str, value: str, template: str) -> str:
    """One rule line's text."""
    return template.format(code=code, value=value)


def render_chunk(title: str, lines: Sequence[str], method: bool = False) -> str:
    """A chunk's content: ``### title`` and one ``- line`` each, or with ``method`` the method's template with the
    lines as procedure steps (:data:`METHOD_FRAME`)."""
    if not lines:
        raise ValueError("render_chunk: a chunk needs at least one line")
    if method:
        return render_method_chunk(Chunk(title, METHOD_FRAME[0], tuple(lines), *METHOD_FRAME[1:]))
    return "\n".join([f"### {title}", *(f"- {line}" for line in lines)])


@dataclass(frozen=True)
class ChunkSpec:
    """What a chunk says, before wording: ``rules`` (code, colour) in order, or ``advice`` lines (indices into
    :data:`ADVICE`); ``role`` as S₀ chunks record it."""

    skill_id: str
    role: str
    rules: tuple[tuple[str, str], ...] = ()
    advice: tuple[int, ...] = ()

    def render(self, family: str, rng: random.Random) -> str:
        """The chunk in ``family``'s words (templates and title drawn from ``rng``)."""
        lines = [render_rule(code, value, rng.choice(TEMPLATES[family])) for code, value in self.rules]
        lines += [ADVICE[family][i % len(ADVICE[family])] for i in self.advice]
        return render_chunk(rng.choice(TITLES[family]), lines)


def demo_chunks(rng: random.Random, codes: HouseCodes, episode_seed: int, colour: str | None, *,
                cover: float, max_chunks: int, max_lines: int, stray: float) -> tuple[Skill, ...]:
    """One demonstration's skill block (1–``max_chunks`` chunks of 1–``max_lines`` lines, ``train`` words) from the
    episode's own table: with probability ``cover`` one line states the profile colour's rule, else no line names
    its code; each other line is a rule of another colour, or with probability ``stray`` of a code no profile
    carries; one line in six is advice; a chunk in :data:`METHOD_SHARE` is in the method's template. No code is
    stated twice."""
    table = codes.table(episode_seed)
    unused = list(codes.unused(episode_seed))
    others = [c for c in STORE_COLOURS if c != colour]
    rng.shuffle(others)
    rng.shuffle(unused)
    shape = [rng.randint(1, max_lines) for _ in range(rng.randint(1, max_chunks))]
    slots = [(k, j) for k, n in enumerate(shape) for j in range(n)]
    covered = slots[rng.randrange(len(slots))] if colour in table and rng.random() < cover else None
    chunks: list[list[str]] = [[] for _ in shape]
    for slot in slots:
        k = slot[0]
        if slot == covered:
            chunks[k].append(render_rule(table[str(colour)], str(colour), rng.choice(TEMPLATES["train"])))
        elif rng.random() < 1 / 6:
            chunks[k].append(rng.choice(ADVICE["train"]))
        elif rng.random() < stray and unused:
            chunks[k].append(render_rule(unused.pop(), rng.choice(STORE_COLOURS), rng.choice(TEMPLATES["train"])))
        elif others:
            other = others.pop()
            chunks[k].append(render_rule(table[other], other, rng.choice(TEMPLATES["train"])))
        else:
            chunks[k].append(rng.choice(ADVICE["train"]))
    return tuple(Skill(f"note-{k + 1}", render_chunk(rng.choice(TITLES["train"]), lines,
                                                     method=rng.random() < METHOD_SHARE), version="demo")
                 for k, lines in enumerate(chunks))


S0_GROUPS: tuple[tuple[str, ...], ...] = (
    ("white", "green"), ("black", "blue"), ("beige", "grey"), ("red", "purple"), ("yellow", "silver"))
"""The deployed S₀'s helpful chunks: the colours each translates (graded by how many profiles carry them)."""
HARMFUL: Mapping[str, str] = {"pink": "red", "navy": "black"}
"""The harmful chunk's false rules: a colour no helpful chunk names → the wrong colour it states."""
NEW_COLOURS = ("pink", "navy", "brown", "orange", "gold")
"""Colours no S₀ chunk translates correctly: the new-chunk probe's rules."""
SWAP: Mapping[str, str] = {"white": "black", "green": "blue"}
"""The swap probe: S₀'s first chunk with its colours replaced (the behaviour should follow the words)."""


def _bank(version: str, specs: Sequence[ChunkSpec], family: str, seed: int, description: str) -> SkillBank:
    """A reader bank; each chunk's words drawn from its ID and ``family`` alone, so chunks of one ID and shape
    read alike in every bank of a family."""
    skills = tuple(Skill(spec.skill_id, spec.render(family, random.Random(seed32(f"{seed}:{family}:{spec.skill_id}"))),
                         version=version, metadata={"role": spec.role}) for spec in specs)
    return SkillBank(version, skills, {"kind": READER_BANK_KIND, "wording": family, "description": description,
                                       "role_key": "role"})


def s0_specs(codes: HouseCodes) -> list[ChunkSpec]:
    """S₀ of the reader testbed: five helpful rule chunks, a neutral chunk of codes no profile carries, a
    neutral advice chunk and a harmful chunk of false rules (:data:`HARMFUL`)."""
    table, unused = codes.table(0), codes.unused(0)
    specs = [ChunkSpec(f"house-codes-{i + 1}", "helpful", tuple((table[c], c) for c in group))
             for i, group in enumerate(S0_GROUPS)]
    specs.append(ChunkSpec("unused-codes", "neutral", ((unused[0], "green"), (unused[1], "white"))))
    specs.append(ChunkSpec("shop-advice", "neutral", advice=(0, 1)))
    specs.append(ChunkSpec("false-codes", "harmful", tuple((table[c], wrong) for c, wrong in HARMFUL.items())))
    return specs


def irrelevant_specs(codes: HouseCodes) -> list[ChunkSpec]:
    """S₀ with every rule's code replaced by a code no profile carries (the same words otherwise)."""
    unused = iter(codes.unused(0)[2:])
    return [ChunkSpec(s.skill_id, s.role, tuple((next(unused), colour) for _, colour in s.rules), s.advice)
            for s in s0_specs(codes)]


def reader_banks(codes: HouseCodes, seed: int) -> dict[str, SkillBank]:
    """The reader testbed's banks: ``s0``, ``s0_paraphrased`` (the same rules in ``heldout`` words),
    ``irrelevant`` (:func:`irrelevant_specs`), ``probe_new`` (one chunk translating :data:`NEW_COLOURS`) and
    ``probe_swap`` (one chunk with :data:`SWAP`'s false rules)."""
    table = codes.table(0)
    s0 = s0_specs(codes)
    new = [ChunkSpec("new-codes", "helpful", tuple((table[c], c) for c in NEW_COLOURS))]
    swap = [ChunkSpec("swapped-codes", "harmful", tuple((table[c], wrong) for c, wrong in SWAP.items()))]
    return {
        "s0": _bank("reader-s0-v1", s0, "train", seed, "S0 of the reader testbed (docs/testbed.md)."),
        "s0_paraphrased": _bank("reader-s0-paraphrased-v1", s0, "heldout", seed,
                                "S0's rules in words no cloning demonstration uses."),
        "irrelevant": _bank("reader-irrelevant-v1", irrelevant_specs(codes), "train", seed,
                            "S0's shape; every rule names a code no profile carries."),
        "probe_new": _bank("reader-probe-new-v1", new, "train", seed,
                           "Rules for the colours no S0 chunk translates."),
        "probe_swap": _bank("reader-probe-swap-v1", swap, "train", seed,
                            "S0's first chunk with false colours: behaviour should follow the words."),
    }


READER_BANK_FILES: Mapping[str, str] = {
    "s0": "params/organism_reader_s0.json", "s0_paraphrased": "params/organism_reader_s0_paraphrased.json",
    "irrelevant": "params/organism_reader_irrelevant.json", "probe_new": "params/organism_reader_probe_new.json",
    "probe_swap": "params/organism_reader_probe_swap.json"}
"""Where :func:`reader_banks` are shipped (``benchmarks/probe_reader.py banks`` writes them)."""
