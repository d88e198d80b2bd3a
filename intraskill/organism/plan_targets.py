"""Exact plan targets for behaviour cloning: the teacher's distribution over plan lines, per token.

With ``warmstart.plan`` the expert's first reply opens with the episode's plan line
(:func:`~intraskill.policy.expert_policy.plan_line`), the competences the teacher's law drew given the chunks
in context (:class:`~intraskill.organism.demos.S0Law`, :class:`~intraskill.organism.demos.AdditiveLaw`). A
demonstration shows one sampled line; cloning it teaches each chunk-conditioned probability from a
single draw per episode. The law is known exactly (``distribution``), so the warm start can train
the first reply's plan tokens on the teacher's whole next-token distribution instead
(``warmstart.plan_targets``): every plan line the law could have written, tokenized in place of the
sampled one, forms a prefix tree weighted by its probability; at each token where the tree branches the
target is the normalised weight of its branches, tempered for the sampling temperature
(``sampling.temperature``) so that the clone *samples* each plan with the law's probability. Where the
tree does not branch the target is the demonstrated token, as in ordinary cloning.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from intraskill.chat.chatml import THINK_OPEN
from intraskill.policy.expert_policy import PLAN_LABELS, CompetenceLaw, plan_line, plan_text
from intraskill.shop.scripted_expert import Competences

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

SoftTarget = tuple[int, tuple[tuple[int, float], ...]]
"""``(token offset, ((token id, probability), …))``: the next-token distribution at one offset."""


def plan_distribution(law: CompetenceLaw, skill_ids: Sequence[str],
                      language: str = "en") -> dict[str, float]:
    """Every plan line the law can write with the chunks ``skill_ids`` in context, with its probability.

    >>> from intraskill.policy.expert_policy import SkillConditionedLaw
    >>> law = SkillConditionedLaw({"page_on": "page-on"}, {"page_on": 0.9}, {"page_on": 0.3})
    >>> for line, p in plan_distribution(law, ["page-on"]).items():
    ...     print(line, round(p, 2))
    Plan: profile, refine, compare, options, budget 0.1
    Plan: profile, refine, compare, page, options, budget 0.9
    """
    order = Competences.names()
    lines: dict[str, float] = defaultdict(float)
    for used, probability in law.distribution(tuple(skill_ids)).items():
        lines[plan_line(tuple(name for name in order if name in used), language)] += probability
    return dict(lines)


def plan_block(completion: str, language: str = "en") -> str:
    """The plan line a reply opens with (``ValueError`` when it opens with none)."""
    line = plan_text(completion, language)
    if line is None or not completion.startswith(THINK_OPEN + line):
        raise ValueError(f"reply does not open with a plan line: {completion[:60]!r}")
    return line


def plan_soft_targets(completion: str, lines: Mapping[str, float], tokenizer: PreTrainedTokenizerBase,
                      language: str = "en", temperature: float = 1.0) -> list[SoftTarget]:
    """The teacher's next-token distributions over ``completion``'s tokens where plan lines branch.

    ``completion`` is a reply opening with one of ``lines`` (:func:`plan_distribution`). Offsets index
    ``tokenizer(completion)``'s ids; offsets where every line continues alike are left out. Each
    distribution is raised to the power ``temperature`` and renormalised, so a model that fits it and
    samples at that temperature writes each line with the law's probability.
    """
    if temperature <= 0.0:
        raise ValueError(f"temperature: must be > 0 to sample plans, got {temperature}")
    sampled = plan_block(completion, language)
    if sampled not in lines:
        raise ValueError(f"plan line {sampled!r} has probability 0 under the law")
    rest = completion[len(THINK_OPEN) + len(sampled):]

    texts = [THINK_OPEN + line + rest for line in (sampled, *lines)]
    own, *others = (tuple(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"])
    variants = list(zip(others, lines.values()))
    targets: list[SoftTarget] = []
    alive = variants
    for offset, token in enumerate(own):
        branches: dict[int, float] = defaultdict(float)
        for sequence, probability in alive:
            if len(sequence) > offset:
                branches[sequence[offset]] += probability
        if len(branches) > 1:
            tempered = {t: mass ** temperature for t, mass in branches.items()}
            total = sum(tempered.values())
            targets.append((offset, tuple((t, mass / total) for t, mass in sorted(tempered.items()))))
        alive = [(s, p) for s, p in alive if len(s) > offset and s[offset] == token]
    return targets


def demonstration_targets(segments: Sequence[tuple[str, str]], skill_ids: Sequence[str], law: CompetenceLaw,
                          tokenizer: PreTrainedTokenizerBase, language: str = "en",
                          temperature: float = 1.0) -> tuple[SoftTarget, ...]:
    """The soft targets of a demonstration's first reply, as positions in
    :func:`~intraskill.organism.demos.tokenize_demonstration`'s ids (none when a plan line was already
    shown before it, e.g. a folded slip: the reply then copies that plan)."""
    prompt, completion = segments[0]
    if THINK_OPEN + PLAN_LABELS[language][0] in prompt:
        return ()
    offset = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    lines = plan_distribution(law, skill_ids, language)
    targets = plan_soft_targets(completion, lines, tokenizer, language, temperature)
    return tuple((offset + o, target) for o, target in targets)
