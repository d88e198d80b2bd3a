"""Reading rendered pages back: the one parser of the page text the agent is shown.

It inverts :func:`intraskill.shop.observation.render_observation` (the ``standard`` view) and
:func:`intraskill.agent.views.render_compact` (``compact`` and ``compact_hints``) on the fields a
reader needs, with the renderers' own labels (:data:`~intraskill.shop.observation.PAGE_LABELS`,
:data:`~intraskill.agent.views.HINT_LABELS`, :data:`~intraskill.agent.views.FIELD_SEP`). Its readers
are the scripted expert's chat policy and the behaviour analysis (the printed rank of an opened result).

A parsed page is a dict with ``page_type`` and, per page type:

* ``search_results``: ``products``, each ``{rank, asin, title, price, key_attributes}`` (plus ``brand``
  and ``category`` in the standard view; values as printed, ``""`` for a field the page marks missing);
* ``product_detail``: ``product`` (the same summary fields, no rank), ``available_options``,
  ``selected_options``, ``missing_option_axes`` and ``selected_price`` (the printed price once every
  axis is selected, else ``None``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from intraskill.agent.views import FIELD_SEP, HINT_LABELS
from intraskill.chat.chatml import message_text
from intraskill.shop.observation import PAGE_LABELS

_RANKED_RE = re.compile(r"^(\d+)\. (.*)$")
_SUMMARY_KEYS = ("asin", "price", "brand", "category", "key_attributes", "title")


def page_language(text: str) -> str:
    """The language whose page header (``Page: `` / ``页面：``) opens ``text``; ``ValueError`` if none."""
    for language, labels in PAGE_LABELS.items():
        if text.startswith(labels["page"] + labels["sep"]):
            return language
    raise ValueError(f"observation: no page header at the start of {text[:40]!r}")


def parse_page(text: str, language: str | None = None) -> dict[str, Any]:
    """The page fields of a rendered page (either view; ``language`` read from the header when ``None``).

    >>> parse_page("Page: search results\\n3. B01 | Blue mug | 5.0")["products"][0]["rank"]
    3
    """
    language = language or page_language(text)
    labels = PAGE_LABELS[language]
    lines = text.split("\n")
    if text == labels["terminal"]:
        return {"page_type": "terminal"}
    page_name = lines[0][len(labels["page"] + labels["sep"]):]
    page_types = {labels[key]: key for key in ("search_home", "search_results", "product_detail")}
    if page_name not in page_types:
        raise ValueError(f"observation: unknown page {page_name!r}")
    page: dict[str, Any] = {"page_type": page_types[page_name]}
    body = _body_lines(lines[1:], labels, HINT_LABELS[language])
    standard_heads = {"search_results": labels["query"] + labels["sep"], "product_detail": labels["product"]}
    head = standard_heads.get(page["page_type"])
    if head is not None and not (body and body[0].startswith(head)):
        page.update(_compact_page(page["page_type"], body, labels))
    elif page["page_type"] == "search_results":
        page["products"] = _result_products(body, labels)
    elif page["page_type"] == "product_detail":
        page.update(_product_page(body, labels))
    return page


def result_ranks(text: str | None) -> dict[str, int]:
    """ASIN → printed rank of a rendered results page (either view and language; ``{}`` for any other
    text). An ASIN listed twice keeps its first rank.

    >>> result_ranks("Page: search results\\nSearch: mug\\nProducts:\\n21. Blue mug\\n   ASIN: B01")
    {'B01': 21}
    """
    try:
        page = parse_page(text or "")
    except ValueError:
        return {}
    ranks: dict[str, int] = {}
    for product in page.get("products", []):
        ranks.setdefault(product["asin"], product["rank"])
    return ranks


def latest_page_text(messages: Sequence[Mapping[str, Any]], language: str = "en") -> str:
    """The newest rendered page among the user / tool messages (the first user message's tail too)."""
    header = PAGE_LABELS[language]["page"] + PAGE_LABELS[language]["sep"]
    for message in reversed(messages):
        if message.get("role") not in ("user", "tool"):
            continue
        text = message_text(message)
        tail = text[text.rindex("\n\n") + 2:] if "\n\n" in text else text
        if tail.startswith(header):
            return tail
    raise ValueError("messages: no rendered page observation found")


def _body_lines(lines: list[str], labels: dict[str, str], hint_label: str) -> list[str]:
    """The page lines before the footer (``Last action…``) or the compact view's hints line."""
    footers = (labels["last_action"] + labels["sep"], hint_label + labels["sep"])
    for index, line in enumerate(lines):
        if line.startswith(footers):
            return lines[:index]
    return lines


def _compact_product(row: str) -> dict[str, Any]:
    asin, title, price = (row.split(FIELD_SEP, 2) + ["", ""])[:3]
    return {"asin": asin, "title": title, "price": price, "key_attributes": []}


def _selected_value(status: str, labels: dict[str, str]) -> str | None:
    """The value of an axis status ``selected {value}``; ``None`` when the axis is not selected."""
    head, tail = labels["selected"].split("{value}")
    if status == labels["unselected"] or not status.startswith(head):
        return None
    return status[len(head):len(status) - len(tail) or None]


def _compact_page(page_type: str, body: list[str], labels: dict[str, str]) -> dict[str, Any]:
    """The page fields of a :func:`intraskill.agent.views.render_compact` page body."""
    if page_type == "search_results":
        rows = [match.groups() for match in map(_RANKED_RE.match, body) if match]
        products = [{"rank": int(rank), **_compact_product(row)} for rank, row in rows]
        return {"products": [p for p in products if p["asin"]]}
    product = _compact_product(body[0]) if body else {}
    sep = labels["sep"]
    available: dict[str, list[str]] = {}
    selected: dict[str, str] = {}
    for line in body[1:]:
        if FIELD_SEP not in line or sep not in line:
            continue
        axis, rest = line.split(sep, 1)
        status, values = rest.split(FIELD_SEP, 1)
        available[axis] = values.split(" / ")
        value = _selected_value(status, labels)
        if value is not None:
            selected[axis] = value
    return _product_fields(product, available, selected)


def _field(line: str, labels: dict[str, str], key: str, prefix: str) -> str | None:
    head = prefix + (labels[key] if key != "asin" else "ASIN") + labels["sep"]
    if not line.startswith(head):
        return None
    value = line[len(head):]
    return "" if value == labels["missing_field"] else value


def _summary(lines: list[str], labels: dict[str, str], prefix: str) -> dict[str, Any]:
    product: dict[str, Any] = {"key_attributes": []}
    for line in lines:
        for key in _SUMMARY_KEYS:
            value = _field(line, labels, key, prefix)
            if value is not None:
                product[key] = value.split(labels["list_sep"]) if key == "key_attributes" else value
                break
    return product


def _result_products(body: list[str], labels: dict[str, str]) -> list[dict[str, Any]]:
    products: list[dict[str, Any]] = []
    block: list[str] = []
    rank, title = 0, ""
    for line in body + ["0. "]:
        match = _RANKED_RE.match(line)
        if match is None:
            block.append(line)
            continue
        if block and title:
            products.append({"rank": rank, **_summary(block, labels, "   "), "title": title})
        rank, title, block = int(match.group(1)), match.group(2), []
    return [p for p in products if p.get("asin")]


def _product_page(body: list[str], labels: dict[str, str]) -> dict[str, Any]:
    sep = labels["sep"]
    index = next((i for i, line in enumerate(body) if line.startswith(labels["options"])), len(body))
    product = _summary(body[:index], labels, "- ")
    available: dict[str, list[str]] = {}
    selected: dict[str, str] = {}
    values_head = "  " + labels["values"] + sep
    axis = None
    for line in body[index + 1:]:
        if line.startswith(values_head) and axis is not None:
            available[axis] = line[len(values_head):].split(" / ")
        elif line.startswith("- ") and sep in line:
            axis, status = line[2:].split(sep, 1)
            value = _selected_value(status, labels)
            if value is not None:
                selected[axis] = value
    return _product_fields(product, available, selected)


def _product_fields(product: dict[str, Any], available: dict[str, list[str]],
                    selected: dict[str, str]) -> dict[str, Any]:
    missing = [axis for axis in available if axis not in selected]
    price: float | None = None
    if not missing:
        try:
            price = float(product.get("price", ""))
        except ValueError:
            price = None
    return {"product": product, "available_options": available, "selected_options": selected,
            "missing_option_axes": missing, "selected_price": price}
