"""Exact plan targets and the additive teacher: teacher laws, soft targets, the soft BC loss, the warm start."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from pathlib import Path

import pytest

from intraskill.agent.env import InProcessEnvironment
from intraskill.agent.runtime import EpisodeJob
from intraskill.layout import WarmstartDir
from intraskill.organism.cloning import BCExample, bc_loss, collate, collate_soft
from intraskill.organism.demos import (
    HABIT_SUPPRESSES,
    S0Error,
    additive_law,
    collect_demonstrations,
    s0_law,
    tokenize_demonstration,
)
from intraskill.organism.plan_targets import demonstration_targets, plan_distribution, plan_soft_targets
from intraskill.params import ParamsError, load_params, params_from_dict
from intraskill.policy.expert_policy import PLAN_WORDS
from intraskill.shop.scripted_expert import Competences
from intraskill.skills.bank import load_skillbank

ROOT = Path(__file__).resolve().parents[1]
S0_PATH = ROOT / "params" / "organism_s0.json"
CI = load_params(ROOT / "params" / "ci.yaml")
WEIGHTS = {"persona-query": 0.3, "persona-options": 0.2, "budget-check": 0.1, "compare-candidates": 0.05,
           "refine-query": 0.05, "page-on": 0.0, "stay-calm": 0.0, "buy-first-result": -0.2}
EVERY_WORD = "Plan: " + ", ".join(PLAN_WORDS.values())


def _s0(p_with: float, p_without: float):
    names = (*Competences.names(), *HABIT_SUPPRESSES)
    return s0_law(load_skillbank(S0_PATH), dict.fromkeys(names, p_with), dict.fromkeys(names, p_without))


@pytest.fixture(scope="module")
def engine(organism_engine):
    return organism_engine


@pytest.fixture(scope="module")
def planned(engine):
    """Plan demonstrations of an independent law (mixed plans) and a tokenizer trained on their text."""
    from intraskill.policy.organism import protocol_corpus, train_tokenizer

    bank = load_skillbank(S0_PATH)
    law = _s0(0.7, 0.4)
    jobs = [EpisodeJob.create(task, 0, 5, tuple(bank.enabled_skills()[:k % 4])) for k, task in
            enumerate(engine.train_ids[:12])]
    demos = collect_demonstrations(lambda: InProcessEnvironment(engine), jobs, law, seed=5, max_turns=30,
                                   max_actions=30, view="compact", plan=True, progress=False)
    return law, demos, train_tokenizer([d.text for d in demos] + protocol_corpus(), 600)


@pytest.mark.parametrize("law", [_s0(0.9, 0.2), additive_law(load_skillbank(S0_PATH), 0.3, WEIGHTS)],
                         ids=["independent", "additive"])
def test_a_laws_distribution_is_the_law_of_its_draws(law) -> None:
    skill_ids = ("persona-query", "budget-check", "buy-first-result")
    distribution = law.distribution(skill_ids)
    assert math.isclose(sum(distribution.values()), 1.0)
    rng = random.Random(11)
    counts = Counter(law.draw(skill_ids, rng) for _ in range(4000))
    assert set(counts) <= set(distribution)
    for used, probability in distribution.items():
        assert abs(counts[used] / 4000 - probability) < 0.03, sorted(used)


def test_the_additive_law_adds_each_chunks_weight() -> None:
    law = additive_law(load_skillbank(S0_PATH), 0.3, WEIGHTS)
    assert math.isclose(law.diligence(()), 0.3)
    assert math.isclose(law.diligence(("persona-query", "buy-first-result")), 0.3 + 0.3 - 0.2)
    every = frozenset(Competences.names())
    assert law.distribution(("persona-query",)) == {every: pytest.approx(0.6),
                                                     frozenset(): pytest.approx(0.4)}
    assert law.distribution(("buy-first-result", "refine-query")) == {every: pytest.approx(0.15),
                                                                       frozenset(): pytest.approx(0.85)}


def test_a_planted_interaction_adds_its_weight_only_when_both_chunks_are_shown() -> None:
    weights = {**WEIGHTS, "persona-query": 0.0, "persona-options": 0.0}
    law = additive_law(load_skillbank(S0_PATH), 0.2, weights, {("persona-query", "persona-options"): 0.4})
    assert math.isclose(law.diligence(("persona-query",)), 0.2)
    assert math.isclose(law.diligence(("persona-options",)), 0.2)
    assert math.isclose(law.diligence(("persona-options", "persona-query", "budget-check")), 0.2 + 0.4 + 0.1)
    assert law.identity["interactions"] == [["persona-query", "persona-options", 0.4]]
    assert "interactions" not in additive_law(load_skillbank(S0_PATH), 0.3, WEIGHTS).identity
    with pytest.raises(S0Error, match=r"warmstart\.interactions: not a chunk of the bank \['no-such'\]"):
        additive_law(load_skillbank(S0_PATH), 0.2, weights, {("persona-query", "no-such"): 0.1})
    with pytest.raises(S0Error, match=r"warmstart\.weights and interactions: .*\[0\.000, 1\.200\]"):
        additive_law(load_skillbank(S0_PATH), 0.2, weights, {("persona-query", "persona-options"): 0.8})


def test_the_interaction_organism_plants_one_complement() -> None:
    from intraskill.organism.demos import teacher_law, teacher_table

    params = load_params(ROOT / "params" / "organism_interaction.yaml")
    bank = load_skillbank(S0_PATH)
    law = teacher_law(bank, params.warmstart)
    pair = ("persona-query", "persona-options")
    both, alone = law.diligence(pair), law.diligence(pair[:1])
    assert math.isclose(both - alone - (law.diligence(pair[1:]) - law.diligence(())), 0.3)
    rows = {row["chunk"]: row for row in teacher_table(bank, params.warmstart)}
    assert rows["persona-query"]["interactions"] == "persona-options +0.30"
    assert rows["page-on"]["interactions"] == ""
    with pytest.raises(ParamsError, match=r"warmstart\.interactions\.0: chunks must name two different chunks"):
        params_from_dict({"experiment": {"name": "x"}, "warmstart": {
            "law": "additive", "interactions": [{"chunks": ["page-on", "page-on"], "weight": 0.1}]}})


def test_the_additive_law_and_its_params_name_bad_fields() -> None:
    bank = load_skillbank(S0_PATH)
    with pytest.raises(S0Error, match=r"warmstart\.weights: missing \['stay-calm'\]"):
        additive_law(bank, 0.3, {k: v for k, v in WEIGHTS.items() if k != "stay-calm"})
    with pytest.raises(S0Error, match=r"within \[0, 1\].*\[0\.100, 1\.300\]"):
        additive_law(bank, 0.3, {**WEIGHTS, "buy-first-result": -0.2, "stay-calm": 0.3})
    with pytest.raises(S0Error, match=r"within \[0, 1\].*\[-0\.100"):
        additive_law(bank, 0.1, WEIGHTS)
    base = {"experiment": {"name": "x"}}
    with pytest.raises(ParamsError, match="weights is not a setting of law: competence"):
        params_from_dict({**base, "warmstart": {"weights": {"stay-calm": 0.1}}})
    with pytest.raises(ParamsError, match="interactions is not a setting of law: competence"):
        params_from_dict({**base, "warmstart": {"interactions": [{"chunks": ["a", "b"], "weight": 0.1}]}})
    with pytest.raises(ParamsError, match="p_with is not a setting of law: additive"):
        params_from_dict({**base, "warmstart": {"law": "additive", "p_with": {"page_on": 1.0},
                                                "p_without": {"page_on": 0.0}}})
    with pytest.raises(ParamsError, match="plan_targets needs plan: true"):
        params_from_dict({**base, "warmstart": {"plan_targets": True}})
    with pytest.raises(ParamsError, match="plan_examples needs plan: true"):
        params_from_dict({**base, "warmstart": {"plan_examples": 10}})


def test_plan_lines_carry_the_laws_probabilities() -> None:
    lines = plan_distribution(additive_law(load_skillbank(S0_PATH), 0.3, WEIGHTS), ["persona-options"])
    assert lines == {EVERY_WORD: pytest.approx(0.5), "Plan: none": pytest.approx(0.5)}
    independent = plan_distribution(_s0(0.9, 0.2), [])
    assert math.isclose(sum(independent.values()), 1.0) and len(independent) == 2 ** len(PLAN_WORDS)


def test_soft_targets_chain_to_each_plans_probability(planned) -> None:
    """Along a demonstrated first reply, the product of the targets' probabilities of its own tokens is
    the law's probability of its plan line; every target is a distribution holding that token."""
    law, demos, tokenizer = planned
    for demo in demos:
        prompt, reply = demo.segments[0]
        lines = plan_distribution(law, demo.skill_ids)
        targets = plan_soft_targets(reply, lines, tokenizer)
        own = tokenizer(reply, add_special_tokens=False)["input_ids"]
        chain = 1.0
        for offset, target in targets:
            assert math.isclose(sum(p for _, p in target), 1.0)
            chain *= dict(target)[own[offset]]
        line = reply[len("<think>"):reply.index("</think>")]
        assert math.isclose(chain, lines[line], rel_tol=1e-9)
        ids, mask = tokenize_demonstration(demo.segments, tokenizer)
        positioned = demonstration_targets(demo.segments, demo.skill_ids, law, tokenizer)
        start = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        assert [p for p, _ in positioned] == [start + o for o, _ in targets]
        assert all(mask[p] == 1 for p, _ in positioned)


def test_tempered_targets_sample_the_laws_distribution(planned) -> None:
    """Targets tempered for temperature T, sampled at T (probabilities to the power 1/T), give the law's."""
    _, _, tokenizer = planned
    lines = {EVERY_WORD: 0.8, "Plan: none": 0.2}
    reply = f"<think>{EVERY_WORD}</think>\n<tool_call>{{}}</tool_call>"
    (_, plain), = plan_soft_targets(reply, lines, tokenizer)
    (_, tempered), = plan_soft_targets(reply, lines, tokenizer, temperature=0.6)
    assert sorted(p for _, p in plain) == pytest.approx([0.2, 0.8])
    sampled = [p ** (1 / 0.6) for _, p in tempered]
    assert sorted(p / sum(sampled) for p in sampled) == pytest.approx([0.2, 0.8])
    with pytest.raises(ValueError, match="has probability 0"):
        plan_soft_targets(reply.replace(EVERY_WORD, "Plan: profile"), lines, tokenizer)


def test_the_soft_loss_is_cross_entropy_against_the_target(planned) -> None:
    import torch

    from intraskill.policy.organism import OrganismConfig, build_organism

    law, demos, tokenizer = planned
    config = OrganismConfig(vocab_size=len(tokenizer), hidden_size=32, num_layers=1, num_heads=2,
                            num_kv_heads=1, intermediate_size=64, max_position=4096)
    model = build_organism(config, tokenizer)
    demo = next(d for d in demos if demonstration_targets(d.segments, d.skill_ids, law, tokenizer))
    ids, mask = tokenize_demonstration(demo.segments[:1], tokenizer)
    soft = demonstration_targets(demo.segments[:1], demo.skill_ids, law, tokenizer)
    hard = BCExample(ids, mask)
    one_hot = BCExample(ids, mask, tuple((p, ((ids[p], 1.0),)) for p, _ in soft))
    batch_ids, labels = collate([hard], 0)
    with torch.no_grad():
        plain = float(bc_loss(model, batch_ids, labels))
        assert collate_soft([hard]) is None
        one_hot_loss = float(bc_loss(model, batch_ids, labels, collate_soft([one_hot])))
        assert math.isclose(one_hot_loss, plain, rel_tol=1e-5)
        exact = float(bc_loss(model, batch_ids, labels, collate_soft([BCExample(ids, mask, soft)])))
        log_probs = torch.log_softmax(model(input_ids=batch_ids).logits[0].float(), dim=-1)
    supervised = sum(mask[1:])
    expected = plain * supervised
    for position, target in soft:
        expected += float(log_probs[position - 1, ids[position]])
        expected -= sum(p * float(log_probs[position - 1, t]) for t, p in target)
    assert math.isclose(exact, expected / supervised, rel_tol=1e-5)
    with pytest.raises(ValueError, match="outside the supervised tokens"):
        BCExample(ids, mask, ((1, ((ids[1], 1.0),)),))


@pytest.mark.e2e
def test_an_additive_warm_start_clones_exact_plans_with_extra_first_replies(tmp_path: Path) -> None:
    from intraskill.organism.warmstart import bc_identity, run_warmstart

    weights = {**dict.fromkeys(WEIGHTS, 0.0), "persona-query": 0.6, "budget-check": 0.1,
               "buy-first-result": -0.2}
    ws = {**CI.warmstart.model_dump(), "law": "additive", "p_with": {}, "p_without": {}, "base": 0.2,
          "weights": weights, "plan": True, "plan_targets": True, "plan_examples": 5}
    params = params_from_dict({**CI.model_dump(), "model": {**CI.model.model_dump(), "view": "compact"},
                               "warmstart": ws})
    manifest = run_warmstart(params, out_dir=tmp_path, progress=False)
    firsts = [json.loads(line) for line in WarmstartDir(tmp_path).plan_demos.read_text().splitlines()]
    assert len(firsts) == manifest.demos["plan_examples"] == 5
    assert all(len(d["segments"]) == 1 and d["segments"][0][1].startswith("<think>Plan: ") for d in firsts)
    assert manifest.demos["soft_targets"] > 0
    assert "plan_demos_sha256" in bc_identity(tmp_path, params)
    assert manifest.params["warmstart"]["law"] == "additive"


def test_the_teacher_table_shows_each_chunks_law_setting() -> None:
    from intraskill.organism.demos import teacher_table

    bank = load_skillbank(S0_PATH)
    settings = {"law": "additive", "base": 0.3, "weights": WEIGHTS}
    additive = params_from_dict({"experiment": {"name": "x"}, "warmstart": settings}).warmstart
    rows = {row["chunk"]: row for row in teacher_table(bank, additive)}
    assert rows["buy-first-result"]["weight"] == -0.2 and rows["buy-first-result"]["role"] == "harmful"
    assert rows["persona-query"]["title"] == "Search with the profile"
    assert "p_with" not in rows["persona-query"]
    competence = {row["chunk"]: row for row in teacher_table(bank, CI.warmstart)}
    assert competence["persona-query"]["p_with"] == CI.warmstart.p_with["read_persona"]
    assert competence["stay-calm"]["p_with"] is None and "weight" not in competence["stay-calm"]
