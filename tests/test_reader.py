"""The reader testbed: house codes, the instruction grammar, the generated demonstrations, the reader teacher and
the shipped banks (docs/testbed.md)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from intraskill.agent.env import InProcessEnvironment
from intraskill.agent.runtime import EpisodeJob, RuntimeConfig
from intraskill.organism.demos import chunk_roles, collect_demonstrations, reader_jobs
from intraskill.organism.instructions import (
    ADVICE,
    FAMILIES,
    NEW_COLOURS,
    READER_BANK_FILES,
    S0_GROUPS,
    TEMPLATES,
    demo_chunks,
    reader_banks,
    render_rule,
    shared_words,
)
from intraskill.organism.truth import run_arm
from intraskill.params import ParamsError, load_params, params_from_dict
from intraskill.policy.reader_expert import ReaderExpertPolicy, note_text
from intraskill.shop.build import open_store
from intraskill.shop.house_codes import CODE_POOL, CODED_KEY, STORE_COLOURS, HouseCodes, _catalogue_words, read_rules
from intraskill.skills.bank import load_skillbank
from intraskill.skills.render import parse_chunk

ROOT = Path(__file__).resolve().parents[1]
READER = load_params(ROOT / "params" / "organism_reader.yaml")
CODES = HouseCodes(READER.model.house_codes)
_CLICK_COLOUR = re.compile(r'"value":"color=([^"]+)"')


def test_codes_are_no_catalogue_word_and_each_table_is_a_bijection() -> None:
    assert len(set(CODE_POOL)) == len(CODE_POOL) and not set(CODE_POOL) & _catalogue_words()
    table = CODES.table(0)
    assert sorted(table) == sorted(STORE_COLOURS) and len(set(table.values())) == len(STORE_COLOURS)
    assert CODES.table(1) == table, "the store has one table"
    per_episode = HouseCodes(CODES.seed, per_episode=True)
    assert per_episode.table(1) != per_episode.table(2) and per_episode.table(1) == per_episode.table(1)
    assert set(per_episode.unused(1)) == set(CODE_POOL) - set(per_episode.table(1).values())


def test_encode_hides_the_colour_and_keeps_the_rest() -> None:
    persona = {"preferences": {"brand": "Orrin", CODED_KEY: "navy", "size": "large"}}
    coded = CODES.encode(persona, 0)
    assert coded["preferences"] == {"brand": "Orrin", CODED_KEY: CODES.table(0)["navy"], "size": "large"}
    assert persona["preferences"][CODED_KEY] == "navy", "the task's persona is not changed"
    assert CODES.encode({"preferences": {"brand": "Orrin"}}, 0) == {"preferences": {"brand": "Orrin"}}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_template_states_its_rule_whatever_the_words(family: str) -> None:
    code = CODE_POOL[3]
    for template in TEMPLATES[family]:
        assert template.index("{code}") < template.index("{value}"), template
        assert read_rules([render_rule(code, "navy", template)]) == {code: "navy"}, template


def test_rules_read_content_lines_only_and_the_first_rule_wins() -> None:
    a, b = CODE_POOL[:2]
    text = f"### Color codes\n- {a} means navy\n- {a} = red\n- {a} or {b}: blue\n- {b} is red or blue\n- read"
    assert read_rules([text, f"- {b} = white"]) == {a: "navy", b: "white"}


def test_heldout_wording_shares_no_word_with_training() -> None:
    assert shared_words() == set()


def test_banks_state_the_promised_rules() -> None:
    banks = reader_banks(CODES, READER.warmstart.seed)
    table = CODES.table(0)
    colour_of = {code: colour for colour, code in table.items()}
    s0 = read_rules(s.content for s in banks["s0"].enabled_skills())
    assert read_rules(s.content for s in banks["s0_paraphrased"].enabled_skills()) == s0
    helpful = {c for group in S0_GROUPS for c in group}
    assert {colour_of[c] for c, v in s0.items() if c in colour_of and colour_of[c] == v} == helpful
    assert not read_rules(s.content for s in banks["irrelevant"].enabled_skills()).keys() & set(colour_of)
    assert read_rules(s.content for s in banks["probe_new"].enabled_skills()) == {table[c]: c for c in NEW_COLOURS}
    for original, paraphrase in zip(banks["s0"].enabled_skills(), banks["s0_paraphrased"].enabled_skills()):
        assert original.content.count("\n") == paraphrase.content.count("\n") and original.content != paraphrase.content
    shapes = [s.content.count("\n") for s in banks["s0"].enabled_skills()]
    assert [s.content.count("\n") for s in banks["irrelevant"].enabled_skills()] == shapes
    for name, bank in banks.items():
        assert json.loads((ROOT / READER_BANK_FILES[name]).read_text(encoding="utf-8")) == bank.to_dict(), name
    assert [r.role for r in chunk_roles(banks["s0"])].count("harmful") == 1


@pytest.mark.parametrize("cover", [0.0, 1.0])
def test_demo_chunks_state_the_profile_code_exactly_when_covered(cover: float) -> None:
    codes = HouseCodes(7, per_episode=True)
    method = 0
    for seed in range(30):
        table = codes.table(seed)
        chunks = demo_chunks(random.Random(seed), codes, seed, "navy", cover=cover, max_chunks=4, max_lines=3,
                             stray=0.3)
        lines = [re.sub(r"^  \d+\. ", "- ", line) for chunk in chunks for line in chunk.content.splitlines()[1:]
                 if not line.startswith(("- Applies when: ", "- Procedure:", "- Verify: ", "- Avoid: ")) and line]
        rules = read_rules(chunk.content for chunk in chunks)
        named = [line for line in lines if table["navy"] in re.findall(r"\w+", line)]
        assert len(named) == int(cover) and (rules.get(table["navy"]) == "navy") == bool(cover)
        codes_stated = [c for line in lines for c in re.findall(r"\w+", line) if c in CODE_POOL]
        assert len(codes_stated) == len(set(codes_stated)), "no code twice"
        assert all(line.startswith("- ") and line[2:] in ADVICE["train"] or read_rules([line]) for line in lines)
        for chunk in chunks:
            if "- Procedure:" in chunk.content:
                method += 1
                assert read_rules([chunk.content]) == read_rules(parse_chunk(chunk.content).procedure)
    assert method, "some chunks take the method's template"


def test_params_refuse_a_reader_without_house_codes() -> None:
    data = READER.model_dump(mode="json")
    data["model"]["house_codes"] = None
    with pytest.raises(ParamsError, match="house_codes"):
        params_from_dict(data)
    data["model"].update(house_codes=3, view="compact")
    with pytest.raises(ParamsError, match="house_codes"):
        params_from_dict(data)
    data = READER.model_dump(mode="json")
    data["warmstart"]["plan"] = True
    with pytest.raises(ParamsError, match="plan is not a setting of law: reader"):
        params_from_dict(data)
    data = load_params(ROOT / "params" / "organism.yaml").model_dump(mode="json")
    data["warmstart"]["explore"] = 0.5
    with pytest.raises(ParamsError, match="explore is a setting of law: reader"):
        params_from_dict(data)


@pytest.fixture(scope="module")
def store(organism_engine, small_store_root):
    catalog = open_store(small_store_root)[0]
    colours = {t: str(catalog.task(t).user_persona["preferences"][CODED_KEY]) for t in organism_engine.train_ids}
    return organism_engine, colours


def test_the_teacher_shops_with_the_colour_its_rules_state(store) -> None:
    """With S₀ the reader clicks the colour a rule gives the profile's code (its note says so); a false rule is
    followed as written; with no rule its note says it does not know."""
    engine, colours = store
    config = RuntimeConfig(max_turns=30, temperature=0.0, view="reader", house_codes=CODES)
    banks = reader_banks(CODES, 1)
    policy = ReaderExpertPolicy(seed=2, note="value")
    tasks = [t for t in engine.train_ids if colours[t] in {"white", "green", "navy"}][:8]
    table = CODES.table(0)
    followed_false = 0
    for name in ("s0", "bare", "probe_swap"):
        skills = banks[name].enabled_skills() if name != "bare" else ()
        for result in run_arm(policy, lambda: InProcessEnvironment(engine), tasks, skills, 5, config, 8):
            code = table[colours[result.task_id]]
            stated = read_rules(s.content for s in skills).get(code)
            first = result.trace.turns[0].raw_output
            assert first.startswith(note_text(code, stated)), (name, first)
            clicked = [m.group(1) for t in result.trace.turns if (m := _CLICK_COLOUR.search(t.raw_output))]
            if name == "s0" and stated is not None:
                assert set(clicked) == {stated} and result.reward.r_success, (clicked, stated)
            if name == "probe_swap" and stated is not None and clicked == [stated]:
                followed_false += 1
                assert not result.reward.r_success
    assert followed_false, "the swap probe's false colours were never clicked: no evidence either way"


def test_without_a_rule_the_teacher_keeps_the_first_colour_unless_it_explores(store) -> None:
    """The first listed colour is never the goal's in this store: with ``explore`` 0 a bare teacher never succeeds,
    with 1 it sometimes does."""
    engine, _ = store
    config = RuntimeConfig(max_turns=30, temperature=0.0, view="reader", house_codes=CODES)
    tasks = engine.train_ids[:12]
    won = {explore: sum(r.reward.r_success for r in run_arm(ReaderExpertPolicy(seed=4, explore=explore),
                                                              lambda: InProcessEnvironment(engine), tasks, (), 5,
                                                              config, 12))
           for explore in (0.0, 1.0)}
    assert won[0.0] == 0 and won[1.0] > 0
    with pytest.raises(ValueError, match="explore"):
        ReaderExpertPolicy(explore=1.5)


def test_reader_demonstrations_show_codes_and_whole_chunks(store) -> None:
    engine, colours = store
    codes = HouseCodes(CODES.seed, per_episode=True)
    jobs = reader_jobs(colours, engine.train_ids, 8, codes, 11, READER.warmstart)
    assert any(not job.skills for job in jobs) and any(job.skills for job in jobs)
    demos = collect_demonstrations(lambda: InProcessEnvironment(engine), jobs, None, seed=11, max_turns=30,
                                   max_actions=30, view="reader", house_codes=codes, note="line", progress=False)
    assert len(demos) == len(jobs)
    copied = 0
    for job, demo in zip(jobs, demos):
        prompt = demo.segments[0][0]
        persona = json.loads(prompt.split("User profile document:\n", 1)[1].split("\n", 1)[0])
        code = codes.table(job.seed)[colours[job.task_id]]
        assert persona["preferences"][CODED_KEY] == code
        assert all(skill.content in prompt for skill in job.skills)
        stated = read_rules(s.content for s in job.skills).get(code)
        note = demo.segments[0][1].split("\n", 1)[0]
        if stated is None:
            assert note == note_text(code, None)
        else:  # the code and the rest of its rule line (one span of the prompt, ending in the colour), then the click's form
            body, _, click = note.removeprefix("<think>").removesuffix("</think>").partition("; ")
            assert body.startswith(code) and body.endswith(stated) and body in prompt, (note, stated)
            assert click == f"{CODED_KEY}={stated}", note
            copied += 1
    assert copied, "no demonstration had a rule for its code: nothing checked"
    with pytest.raises(ValueError, match="note"):
        ReaderExpertPolicy(note="lookup")


def test_runtime_codes_the_persona_only_with_house_codes(store) -> None:
    engine, colours = store
    task = engine.train_ids[0]
    jobs = [EpisodeJob.create(task, 0, 1)]
    for codes, expected in ((None, colours[task]), (CODES, CODES.table(0)[colours[task]])):
        demo = collect_demonstrations(lambda: InProcessEnvironment(engine), jobs, None, seed=1, max_turns=30,
                                      max_actions=30, view="reader", house_codes=codes, progress=False)[0]
        persona = json.loads(demo.segments[0][0].split("User profile document:\n", 1)[1].split("\n", 1)[0])
        assert persona["preferences"][CODED_KEY] == expected
        config = RuntimeConfig(view="reader", house_codes=codes)
        assert ("house_codes" in config.to_dict()) == (codes is not None)


def test_shipped_reader_banks_load() -> None:
    for path in READER_BANK_FILES.values():
        assert load_skillbank(ROOT / path).enabled_skills()


def test_the_rule_analyst_proposes_the_house_code_rule_a_failure_lacked(store) -> None:
    """A bare reader clicks the first listed colour (never the goal's); with the store's house codes the analyst's
    validated colour repair becomes the rule for the profile's code, which the teacher then reads; without them it
    is the generic option chunk. Colours of six letters or more are gold options to the firewall."""
    from intraskill.trace2skill.queue import AnalysisItem
    from intraskill.trace2skill.rule_analyst import RuleAnalyst

    engine, colours = store
    config = RuntimeConfig(max_turns=30, temperature=0.0, view="reader", house_codes=CODES)
    tasks = engine.train_ids[:16]
    failed = [r for r in run_arm(ReaderExpertPolicy(seed=4, explore=0.0), lambda: InProcessEnvironment(engine),
                                 tasks, (), 5, config, 16) if r.scored and not r.reward.r_success]
    bank = reader_banks(CODES, 1)["irrelevant"]
    decoded, screened = 0, set()
    for result in failed:
        item = AnalysisItem(result.episode_id, 0, result.task_id, "train", True, result.trace)
        card = RuleAnalyst(engine, house_codes=CODES).analyze(item, bank)
        plain = RuleAnalyst(engine).analyze(item, bank)
        content = card.deployable_abstraction.proposed_content
        if card.deployable_abstraction.failure_mechanism.startswith("decode_option:"):
            decoded += 1
            colour = colours[result.task_id]
            assert read_rules([content]) == {CODES.table(0)[colour]: colour}
            assert card.eligible_for_consolidation == (len(colour) < 6), (colour, card.firewall_findings)
            screened.add(card.eligible_for_consolidation)
            assert plain.deployable_abstraction.failure_mechanism == "option_selection"
            assert not read_rules([plain.deployable_abstraction.proposed_content])
    assert decoded >= 4 and screened == {True, False}, (decoded, screened)


def test_plans_name_house_codes_only_where_set() -> None:
    """Plans written before house codes existed stay valid: the default model section plans as it did."""
    from intraskill.params import plan_dump

    assert "house_codes" not in plan_dump(load_params(ROOT / "params" / "organism.yaml"))["model"]
    assert plan_dump(READER)["model"]["house_codes"] == READER.model.house_codes
