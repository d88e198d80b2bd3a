"""The compact view: pages rendered from the public state, the persona and chunks cut, runs that use it."""

from __future__ import annotations

import pytest

from intraskill.agent import (
    EpisodeJob,
    InProcessEnvironment,
    RuntimeConfig,
    run_episodes,
    scan_prompts_for_gold,
)
from intraskill.agent.views import (
    page_text,
    render_compact,
    store_action,
    view_actions,
    view_hints,
    view_persona,
    view_skills,
)
from intraskill.policy.expert_policy import ExpertPolicy, page_state
from intraskill.shop.engine import ShopEngine, StoreConfig
from intraskill.shop.observation import ObservationError
from intraskill.skills.bank import Skill

CHUNK = "### Check the budget\n\n- Applies when: options are selected\n- Procedure:\n  1. Compare\n- Verify: ok\n- Avoid: no"


def _engine(small_store, language: str = "en") -> ShopEngine:
    catalog, index, _ = small_store
    return ShopEngine(catalog.products, catalog.goals, index, StoreConfig(language=language))


@pytest.mark.parametrize("language", ["en", "zh"])
def test_pages_are_short_and_carry_what_the_expert_reads(small_store, language: str) -> None:
    catalog = small_store[0]
    session = _engine(small_store, language).new_session()
    task_id = catalog.task_ids("val")[0]
    home = session.reset(task_id)
    assert page_text(home, "standard", language) == home["observation"]
    assert render_compact(home["observation_state"], language).count("\n") == 0
    results = session.step(f"search[{catalog.task(task_id).instruction_simple}]")
    text = render_compact(results["observation_state"], language)
    products = results["observation_state"]["products"]
    assert len(text) < len(results["observation"]) / 2
    assert text.split("\n")[1] == f"1. {products[0]['asin']} | {products[0]['title']} | {products[0]['price']}"
    parsed = page_state(text, [], language)
    assert [p["asin"] for p in parsed["products"]] == [p["asin"] for p in products]
    detail = session.step(f"click[{products[0]['asin']}]")
    parsed = page_state(render_compact(detail["observation_state"], language), [], language)
    state = detail["observation_state"]
    assert parsed["available_options"] == state["available_options"]
    assert parsed["missing_option_axes"] == state["missing_option_axes"]
    assert parsed["product"]["asin"] == state["product"]["asin"]


def test_results_are_clicked_by_rank_and_resolved_to_store_actions(small_store) -> None:
    catalog = small_store[0]
    session = _engine(small_store).new_session()
    task_id = catalog.task_ids("val")[0]
    home = session.reset(task_id)
    assert view_actions(home["observation_state"], "compact") == (home["observation_state"], {})
    state = session.step(f"search[{catalog.task(task_id).instruction_simple}]")["observation_state"]
    assert view_actions(state, "standard") == (state, {})
    offered, aliases = view_actions(state, "compact")
    asins = [p["asin"] for p in state["products"]]
    assert [a for a in offered["actions"] if a.isdigit()] == [str(r) for r in range(1, len(asins) + 1)]
    assert [a for a in offered["actions"] if not a.isdigit()] == [a for a in state["actions"] if a not in asins]
    assert store_action("click[2]", aliases) == f"click[{asins[1]}]"
    assert store_action("click[next >]", aliases) == "click[next >]"
    assert store_action("search[2]", aliases) == "search[2]"


def test_an_invalid_action_is_reported_and_private_fields_are_refused(small_store) -> None:
    catalog = small_store[0]
    session = _engine(small_store).new_session()
    home = session.reset(catalog.task_ids("val")[0])
    invalid = session.step("click[nothing-here]")
    text = render_compact(invalid["observation_state"])
    assert "Last action: invalid" in text and "Reason code: " in text
    assert "Last action" not in render_compact(home["observation_state"])
    with pytest.raises(ObservationError, match="goal"):
        render_compact({**home["observation_state"], "goal": {"asin": "x"}})


def test_persona_and_chunks_are_cut_and_views_are_checked() -> None:
    persona = {"preferences": {"brand": "Kestrel"}, "behaviour": {"device": "tablet"}}
    assert view_persona(persona, "compact") == {"preferences": {"brand": "Kestrel"}}
    assert view_persona(persona, "standard") is persona
    [short] = view_skills([Skill("budget-check", CHUNK, version="3")], "compact")
    assert (short.skill_id, short.version, short.content) == ("budget-check", "3", "### Check the budget")
    assert view_hints([Skill("budget-check", CHUNK), Skill("x", "###  Two\twords ")], "compact_hints") == (
        "Check the budget", "Two words")
    assert view_hints([Skill("budget-check", CHUNK)], "compact") == view_hints([], "compact_hints") == ()
    with pytest.raises(ValueError, match="view: expected one of"):
        view_skills([], "tiny")
    with pytest.raises(ValueError, match="view: expected one of"):
        RuntimeConfig(view="tiny")


class _Recording(ExpertPolicy):
    """The expert, keeping the last request of every session."""

    def __init__(self) -> None:
        super().__init__()
        self.last: dict[str, list] = {}

    def generate(self, requests):
        self.last.update({request.session_id: request.messages for request in requests})
        return super().generate(requests)


def test_compact_runs_prompt_short_pages_without_gold(small_store) -> None:
    catalog = small_store[0]
    engine = _engine(small_store)
    skills = (Skill("budget-check", CHUNK, version="1"),)
    jobs = [EpisodeJob.create(task_id, 0, 5, skills) for task_id in catalog.task_ids("val")[:6]]
    policies = {"standard": _Recording(), "compact": _Recording(), "compact_hints": _Recording()}
    results = {view: run_episodes(policy, lambda: InProcessEnvironment(engine), jobs, RuntimeConfig(view=view),
                                  progress=False) for view, policy in policies.items()}
    for view in ("compact", "compact_hints"):
        assert [r.reward for r in results[view]] == [r.reward for r in results["standard"]]
        for result in results[view]:
            assert result.trace.provenance["runtime"]["view"] == view
            assert [t.action for t in result.trace.turns] == [t.action for t in next(
                r for r in results["standard"] if r.episode_id == result.episode_id).trace.turns]
            messages = policies[view].last[result.episode_id]
            assert scan_prompts_for_gold(messages, result.trace.private_goal) == []
            standard = policies["standard"].last[result.episode_id]
            assert len(str(messages)) < len(str(standard)) / 2
        system = messages[0]["content"]
        assert "### Check the budget\n</skill>" in system and "Applies when" not in system
        assert '"behaviour"' not in system and '"preferences"' in system
        assert "Clickable elements" not in "".join(str(m.get("content")) for m in messages)
        pages = [str(m["content"]) for m in messages if m["role"] in ("user", "tool")]
        reminded = [page.endswith("\nHints: Check the budget") for page in pages]
        assert len(pages) > 2 and reminded == [view == "compact_hints"] * len(pages)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_hints_line_ends_every_page_and_leaves_the_page_state_alone(small_store, language: str) -> None:
    catalog = small_store[0]
    session = _engine(small_store, language).new_session()
    task_id = catalog.task_ids("val")[0]
    session.reset(task_id)
    results = session.step(f"search[{catalog.task(task_id).instruction_simple}]")
    asin = results["observation_state"]["products"][0]["asin"]
    hints = ("Check the budget", "Pick profile options")
    for payload in (results, session.step(f"click[{asin}]")):
        bare = page_text(payload, "compact", language)
        reminded = page_text(payload, "compact_hints", language, hints)
        separator = "；" if language == "zh" else "; "
        assert reminded == bare + "\n" + ("提示：" if language == "zh" else "Hints: ") + separator.join(hints)
        assert page_state(reminded, [], language) == page_state(bare, [], language)
        assert page_text(payload, "standard", language, hints) == payload["observation"]
