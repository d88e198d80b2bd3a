"""The page parser: every page type rendered in every view and language parses back to its fields."""

from __future__ import annotations

import pytest

from intraskill.agent.pages import latest_page_text, page_language, parse_page, result_ranks
from intraskill.agent.views import VIEWS, page_text
from intraskill.shop.engine import ShopEngine, StoreConfig
from intraskill.shop.scripted_expert import Competences, ScriptedExpert, run_expert_episode

HINTS = ("Check the budget", "Pick profile options")


def _printed(value) -> str:
    return " ".join(str(value).split())


def _payloads(small_store, language: str) -> list[dict]:
    """Reset and step payloads of real expert episodes, one invalid action and the terminal page."""
    catalog, index, _ = small_store
    engine = ShopEngine(catalog.products, catalog.goals, index, StoreConfig(language=language))
    payloads = []
    for task_id in list(catalog.task_ids("val"))[:4]:
        session = engine.new_session()
        payloads.append(session.reset(task_id))
        run_expert_episode(session, ScriptedExpert(Competences()), catalog.task(task_id),
                           on_step=lambda _action, response: payloads.append(response))
    session = engine.new_session()
    session.reset(catalog.task_ids("val")[0])
    payloads.append(session.step("click[buy now]"))
    return payloads


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("language", ["en", "zh"])
def test_every_rendered_page_parses_back(small_store, language: str, view: str) -> None:
    payloads = _payloads(small_store, language)
    states = [p["observation_state"] for p in payloads]
    assert {s["page_type"] for s in states} == {"search_home", "search_results", "product_detail", "terminal"}
    assert any(not s["last_action"].get("valid", True) for s in states)
    assert any(s["page_type"] == "product_detail" and s["selected_options"] for s in states)
    for payload, state in zip(payloads, states):
        text = page_text(payload, view, language, HINTS if view == "compact_hints" else ())
        assert page_language(text) == language
        page = parse_page(text)
        assert page["page_type"] == state["page_type"]
        if state["page_type"] == "search_results":
            rendered = ["rank", "asin", "title", "price"]
            if view == "standard":
                rendered += ["brand", "category"]
            expected = [{key: p[key] if key == "rank" else _printed(p.get(key, "")) for key in rendered}
                        for p in state["products"]]
            assert [{key: p[key] for key in rendered} for p in page["products"]] == expected
            if view == "standard":
                assert [p["key_attributes"] for p in page["products"]] == [
                    [str(a) for a in p["key_attributes"]] for p in state["products"]]
            assert result_ranks(text) == {p["asin"]: p["rank"] for p in state["products"]}
        elif state["page_type"] == "product_detail":
            assert page["product"]["asin"] == state["product"]["asin"]
            assert page["product"]["title"] == _printed(state["product"]["title"])
            for key in ("available_options", "selected_options", "missing_option_axes"):
                assert page[key] == state[key], key
            if state["missing_option_axes"] or state["selected_price"] is None:
                assert page["selected_price"] is None
            else:
                assert page["selected_price"] == pytest.approx(state["selected_price"])
        if state["page_type"] != "search_results":
            assert result_ranks(text) == {}


def test_the_latest_page_and_texts_that_are_no_page() -> None:
    messages = [
        {"role": "system", "content": "Page: search home"},
        {"role": "user", "content": "Task: buy a mug\n\nPage: search home"},
        {"role": "assistant", "content": "<tool_call>{}</tool_call>"},
        {"role": "tool", "content": "Page: search results\n2. B01 | Blue mug | 5.0"},
        {"role": "assistant", "content": "Page: product detail"},
    ]
    assert latest_page_text(messages) == "Page: search results\n2. B01 | Blue mug | 5.0"
    assert latest_page_text(messages[:2]) == "Page: search home"
    with pytest.raises(ValueError, match="no rendered page"):
        latest_page_text(messages[:1])
    with pytest.raises(ValueError, match="no page header"):
        page_language("Products:\n21. Blue mug")
    with pytest.raises(ValueError, match="unknown page"):
        parse_page("Page: checkout")
    assert result_ranks(None) == result_ranks("Page: checkout") == {}
