"""Title sensitivity: how much a model's cloned replies depend on each chunk being in its prompt.

For an expert demonstration played with the chunk set ``M`` and a chunk ``j`` in ``M``::

    delta_j = log p(replies | prompt with M) - log p(replies | prompt with M minus j)

teacher-forced over the demonstration's assistant tokens (the expert's replies, made with ``j``
shown). A model that has cloned the chunk-conditioned expert puts more mass on the expert's
``j``-gated choices when ``j`` is shown, so ``delta_j > 0``; a model blind to ``j``'s title scores
``delta_j`` near 0, or the same for every chunk (what the skill block's header alone does, when
``j`` was the only chunk). It needs forward passes only, so it reads in a minute what the
chunk-alone ground truth (``warmstart.ground_truth``) reads in ten, and it can follow a run of
behaviour cloning checkpoint by checkpoint.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from intraskill.agent.views import hints_line, view_hints, view_skills
from intraskill.organism.demos import Demonstration, tokenize_demonstration
from intraskill.skills.bank import Skill
from intraskill.skills.render import render_skill_block

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def drop_chunk(segments: Sequence[tuple[str, str]], shown: Sequence[Skill], chunk_id: str,
               language: str = "en", view: str = "standard") -> list[tuple[str, str]]:
    """A demonstration's ``(prompt, reply)`` segments with ``chunk_id`` taken out of what its prompts show.

    The chunk leaves the first prompt's skill block (the whole block if it was the only chunk) and,
    in the ``compact_hints`` view, every page's hints line (the line if it was the only title). ``shown`` are
    the chunks as the prompt renders them (bank order, after the view). The first prompt becomes
    exactly the one the runtime renders for the remaining chunks; the replies are kept.
    """
    rest = [skill for skill in shown if skill.skill_id != chunk_id]
    if len(rest) == len(shown):
        raise ValueError(f"chunk_id: {chunk_id!r} is not among the shown chunks")
    (first, reply), *later = segments
    block = render_skill_block(shown, language)
    if first.count(block) != 1:
        raise ValueError("prompt: its skill block is not the block of the shown chunks")
    if rest:
        first = first.replace(block, render_skill_block(rest, language))
    else:
        first = first.replace("\n\n" + block, "")  # the block goes with the blank line before it
    old = hints_line(view_hints(shown, view), language)
    new = hints_line(view_hints(rest, view), language)

    def unhinted(prompt: str) -> str:
        return prompt.replace(f"\n{old}\n", f"\n{new}\n" if new else "\n") if old else prompt

    return [(unhinted(first), reply), *((unhinted(prompt), text) for prompt, text in later)]


def reply_logprob(model: PreTrainedModel, input_ids: Sequence[int], loss_mask: Sequence[int]) -> float:
    """The summed log-probability of the tokens where ``loss_mask`` is 1, each given its prefix."""
    # deferred: torch is heavy to import
    import torch

    ids = torch.tensor([list(input_ids)], device=next(model.parameters()).device)
    with torch.inference_mode():
        logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
    targets = ids[0, 1:]
    chosen = logp.gather(-1, targets[:, None]).squeeze(-1)
    mask = torch.tensor(list(loss_mask[1:]), dtype=torch.bool, device=chosen.device)
    return float(chosen[mask].sum())


@dataclass(frozen=True)
class ChunkSensitivity:
    """``delta_j`` over the demonstrations that showed chunk ``j``: mean and standard error, in nats."""

    chunk_id: str
    demos: int
    mean_nats: float
    sem_nats: float

    def to_dict(self) -> dict[str, Any]:
        return {"chunk_id": self.chunk_id, "demos": self.demos, "mean_nats": round(self.mean_nats, 6),
                "sem_nats": round(self.sem_nats, 6)}


def title_sensitivity(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    demos: Sequence[Demonstration],
    skills: Sequence[Skill],
    view: str,
    language: str = "en",
    progress: bool = True,
) -> list[ChunkSensitivity]:
    """``delta_j`` for every chunk of ``skills`` (the bank, in order) over ``demos``.

    Each demonstration's first prompt segment must hold its chunks' skill block as ``view`` renders
    it (:func:`drop_chunk` also takes the chunk out of the ``compact_hints`` pages' hints lines); a chunk no
    demonstration showed gets ``demos == 0`` and NaN statistics.
    """
    deltas: dict[str, list[float]] = {skill.skill_id: [] for skill in skills}
    for demo in tqdm(demos, desc="title sensitivity", disable=not progress):
        unknown = sorted(set(demo.skill_ids) - set(deltas))
        if unknown:
            raise ValueError(f"demonstration {demo.episode_id}: skill_ids {unknown} are not in the bank")
        shown = view_skills([skill for skill in skills if skill.skill_id in demo.skill_ids], view)
        with_all = reply_logprob(model, *tokenize_demonstration(demo.segments, tokenizer))
        for skill in shown:
            dropped = drop_chunk(demo.segments, shown, skill.skill_id, language, view)
            deltas[skill.skill_id].append(with_all - reply_logprob(model, *tokenize_demonstration(dropped, tokenizer)))
    return [_summary(chunk_id, values) for chunk_id, values in deltas.items()]


def _summary(chunk_id: str, values: Sequence[float]) -> ChunkSensitivity:
    n = len(values)
    mean = statistics.fmean(values) if n else math.nan
    sem = statistics.stdev(values) / math.sqrt(n) if n > 1 else math.nan
    return ChunkSensitivity(chunk_id, n, mean, sem)
