"""The engine's precomputed pages equal the reference state builders and renderer, byte for byte.

Every product of the small store (and hand-built edge cases: duplicate click values, option text
with action syntax, no options) is shown as a product page under several selections and as a
results page, in both languages, and compared with ``product_state`` / ``results_state`` and
``render_observation``.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from shop_fixtures import catalogue

from intraskill.shop.data import Catalog
from intraskill.shop.observation import (
    HomePage,
    PageCache,
    ProductPage,
    ResultsPage,
    TerminalPage,
    home_state,
    last_action_record,
    product_state,
    render_observation,
    results_state,
    terminal_state,
)
from intraskill.shop.price import resolve_price
from intraskill.shop.search import SearchIndex
from intraskill.shop.types import Product

RECORDS = (
    last_action_record("click[x]", "executed", "option selected"),
    last_action_record("click[buy now]", "incomplete_options", "select every option: a / b", ["a", "b"]),
)
EDGE_PRODUCTS = (
    Product(asin="900000000001", title="twin  labels\tclick[ here", brand="", category="a›b",
            options={"a": ("b=c", "x"), "a=b": ("c", "search[y] [SEP]")}, pricing=(5.0, 9.0)),
    Product(asin="900000000002", title="no options", brand="b", category="c", pricing=(3.0,)),
)


def _selections(rng: random.Random, product: Product) -> list[dict[str, str]]:
    full = {axis: rng.choice(values) for axis, values in product.options.items()}
    partial = dict(list(full.items())[:1])
    return [{}, partial, full]


def _check_product(cache: PageCache, product: Product, selected: dict[str, str]) -> None:
    page = ProductPage(cache.parts(product.asin), cache.parts(product.asin).detail.selection(selected, cache.labels),
                       cache)
    price = resolve_price(product, selected)
    assert page.price == price
    for record in RECORDS:
        expected = product_state(product, selected, price.price, record)
        assert page.state(record) == expected and list(page.state(record)) == list(expected)
        assert page.actions == expected["actions"]
        assert page.text(record) == render_observation(expected, cache.language)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_product_pages_equal_the_reference(small_store: tuple[Catalog, SearchIndex, Any], language: str) -> None:
    catalog = small_store[0]
    products = {**catalog.products, **{p.asin: p for p in EDGE_PRODUCTS}, **{p.asin: p for p in catalogue()}}
    cache, rng = PageCache(products, language), random.Random(3)
    for product in products.values():
        for selected in _selections(rng, product):
            _check_product(cache, product, selected)
            _check_product(cache, product, selected)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_results_home_and_terminal_pages_equal_the_reference(small_store: tuple[Catalog, SearchIndex, Any],
                                                             language: str) -> None:
    catalog = small_store[0]
    asins = sorted(catalog.products)[:47] + [EDGE_PRODUCTS[0].asin]
    products = {**catalog.products, EDGE_PRODUCTS[0].asin: EDGE_PRODUCTS[0]}
    cache = PageCache(products, language)
    for page_number in (1, 2, 3):
        page = ResultsPage(cache, "a  click[b]", "a click[b]", asins, page_number, 20)
        for record in RECORDS:
            expected = results_state("a  click[b]", "a click[b]", asins, products, page_number, 20, record)
            assert page.state(record) == expected and page.actions == expected["actions"]
            assert page.text(record) == render_observation(expected, language)
    empty = ResultsPage(cache, "q", "q", [], 1, 20)
    assert empty.text(RECORDS[0]) == render_observation(results_state("q", "q", [], products, 1, 20, RECORDS[0]),
                                                        language)
    with pytest.raises(ValueError, match="page must be in 1..3"):
        ResultsPage(cache, "q", "q", asins, 4, 20)
    for record in RECORDS:
        assert HomePage(cache).state(record) == home_state(record)
        assert HomePage(cache).text(record) == render_observation(home_state(record), language)
        assert TerminalPage(cache).text(record) == render_observation(terminal_state(record), language)


def test_page_states_are_fresh_copies() -> None:
    product = EDGE_PRODUCTS[0]
    cache = PageCache({product.asin: product}, "en")
    page = ProductPage(cache.parts(product.asin), cache.parts(product.asin).detail.selection({}, cache.labels), cache)
    first = page.state(RECORDS[1])
    first["actions"].clear()
    first["available_options"]["a"].append("z")
    first["product"]["key_attributes"].append("z")
    first["last_action"]["missing_option_axes"].append("z")
    assert page.state(RECORDS[1]) == product_state(product, {}, None, RECORDS[1])
    assert RECORDS[1]["missing_option_axes"] == ["a", "b"]
