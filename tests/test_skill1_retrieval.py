"""Skill1 retrieval with the real all-MiniLM-L6-v2 encoder from its offline wheel (docs/method.md §10.1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from intraskill.params import Skill1Params
from intraskill.skills.library import SkillLibrary
from intraskill.skills.retrieval import SentenceEncoder, retrieval_identity, retrieve, ucb_score


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    return SentenceEncoder()


def test_paraphrase_ranks_above_unrelated_and_cache_avoids_reencoding(encoder: SentenceEncoder) -> None:
    library = SkillLibrary()
    library.seed("Quarterly tax filing deadlines for small businesses", "pay on time")
    library.seed("Buying running shoes in a specific size and colour", "filter by size, then colour")
    library.seed("Cooking pasta al dente", "taste early")
    query = "purchase sneakers of a given size and color"
    ranked = retrieve(query, library, encoder, Skill1Params(top_k=2))
    assert ranked[0].skill.skill_id == 1  # the paraphrase
    assert ranked[0].similarity > ranked[1].similarity
    assert encoder.encoded == 4
    vectors = encoder.encode([query])
    assert vectors.shape == (1, 384) and float(np.linalg.norm(vectors[0])) == pytest.approx(1.0, abs=1e-5)
    retrieve(query, library, encoder)  # every text is cached
    assert encoder.encoded == 4


def test_empty_library_retrieves_nothing(encoder: SentenceEncoder) -> None:
    assert retrieve("anything", SkillLibrary(), encoder) == ()


def test_ucb_score_hand_computed() -> None:
    # 0.6·0.8 + 0.4·(0.5 + 1.0·sqrt(ln 10 / 2)) = 0.48 + 0.4·(0.5 + 1.072983) = 1.109193
    assert ucb_score(0.8, 0.5, 2, 10, 0.6, 1.0) == pytest.approx(
        0.48 + 0.4 * (0.5 + math.sqrt(math.log(10) / 2))
    )
    assert ucb_score(0.8, 0.5, 0, 10, 0.6, 1.0) == ucb_score(0.8, 0.5, 1, 10, 0.6, 1.0)  # n floored at 1
    assert ucb_score(0.8, 0.5, 0, 0, 0.6, 1.0) == pytest.approx(0.68)  # no uses yet: no bonus


def test_ucb_switch_trades_similarity_for_utility(encoder: SentenceEncoder) -> None:
    library = SkillLibrary()
    library.seed("Buying running shoes in a specific size", "a", utility=0.0, uses=5)
    library.seed("Shopping for sneakers and footwear", "b", utility=1.0, uses=5)
    query = "buy running shoes in size 10"
    cosine = retrieve(query, library, encoder, Skill1Params(top_k=2))
    assert cosine[0].skill.desc.startswith("Buying")
    ucb = retrieve(query, library, encoder, Skill1Params(retrieval="ucb", top_k=2, ucb_min_similarity=0.0))
    by_id = {c.skill.skill_id: c for c in ucb}
    for candidate in ucb:
        skill = candidate.skill
        assert candidate.score == pytest.approx(
            ucb_score(candidate.similarity, skill.utility, 5, 10, 0.6, 1.0)
        )
    assert by_id[1].score > by_id[0].score and ucb[0].skill.skill_id == 1
    strict = retrieve(query, library, encoder, Skill1Params(retrieval="ucb", ucb_min_similarity=0.99))
    assert strict == ()


def test_skill1_params_defaults_and_validation() -> None:
    params = Skill1Params()
    assert (params.capacity, params.ema_rate, params.top_k, params.lambda_rerank, params.lambda_distill) == (
        5000,
        0.05,
        5,
        0.3,
        0.3,
    )
    assert retrieval_identity(Skill1Params(retrieval="ucb", top_k=3)) == {
        "mode": "ucb", "top_k": 3, "ucb_weight": 0.6, "ucb_scale": 1.0, "ucb_min_similarity": 0.4}
    with pytest.raises(ValidationError, match="retrieval"):
        Skill1Params(retrieval="bm25")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="ema_rate"):
        Skill1Params(ema_rate=0.0)
    with pytest.raises(ValidationError, match="unknown"):
        Skill1Params(unknown=1)  # type: ignore[call-arg]
