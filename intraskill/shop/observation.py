"""Structured page states and their text rendering (``shopping-observation-v7``, §4.1, §4.3).

``observation_state`` is the single public source of what the agent sees; :func:`render_observation`
turns it into text deterministically and refuses any state that carries private fields (goal,
reward, answer), more than 20 products, or products that are not the page's clickable ASINs.
The text never shows ``search[…]``/``click[…]`` syntax or ``[SEP]``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from intraskill.shop.types import Product

OBSERVATION_VERSION = "shopping-observation-v7"
MAX_PRODUCTS_PER_PAGE = 20
MAX_OPTION_VALUES = 100
BACK_TO_SEARCH = "back to search"
PREV_PAGE = "< prev"
NEXT_PAGE = "next >"
BUY_NOW = "buy now"
NAVIGATION_LABELS = (BACK_TO_SEARCH, PREV_PAGE, NEXT_PAGE, BUY_NOW)
PAGE_TYPES = ("search_home", "search_results", "product_detail", "terminal")
FORBIDDEN_KEYS = frozenset({"goal", "reward", "reward_detail", "target_asin", "answer"})
_ACTION_SYNTAX_RE = re.compile(r"(search|click)\s*\[", re.IGNORECASE)
_SEP_RE = re.compile(r"\[sep\]", re.IGNORECASE)


class ObservationError(ValueError):
    """A state the renderer refuses to show to the agent."""


def option_label(axis: str, value: str) -> str:
    """The click value of one option: the raw axis name, '=', the (lower-cased) value."""
    return f"{axis}={value}"


def last_action_record(action: str, reason: str, message: str,
                       missing_option_axes: Sequence[str] | None = None) -> dict[str, Any]:
    """The ``last_action`` block: ``{action, valid, reason, message[, missing_option_axes]}``."""
    record: dict[str, Any] = {"action": action, "valid": reason == "executed", "reason": reason, "message": message}
    if missing_option_axes:
        record["missing_option_axes"] = list(missing_option_axes)
    return record


def _common(page_type: str, search_available: bool, actions: list[str], last_action: Mapping[str, Any]) -> dict[str, Any]:
    return {"observation_version": OBSERVATION_VERSION, "page_type": page_type,
            "search_available": search_available, "actions": actions, "last_action": dict(last_action)}


def home_state(last_action: Mapping[str, Any]) -> dict[str, Any]:
    """The search home page: search is the only capability, nothing is clickable."""
    return _common("search_home", True, [], last_action)


def terminal_state(last_action: Mapping[str, Any]) -> dict[str, Any]:
    """The page after the episode ended: no actions."""
    return _common("terminal", False, [], last_action)


def results_state(search_text: str, normalized_search_text: str, asins: Sequence[str],
                  products: Mapping[str, Product], page: int, page_size: int,
                  last_action: Mapping[str, Any]) -> dict[str, Any]:
    """Page ``page`` (1-based) of a result list ``asins``, ``page_size`` products per page."""
    total = len(asins)
    total_pages = max(1, -(-total // page_size))
    if not 1 <= page <= total_pages:
        raise ValueError(f"page must be in 1..{total_pages}, got {page}")
    start = (page - 1) * page_size
    shown = list(asins[start : start + page_size])
    actions = [BACK_TO_SEARCH]
    if page > 1:
        actions.append(PREV_PAGE)
    if page < total_pages:
        actions.append(NEXT_PAGE)
    state = _common("search_results", False, actions + shown, last_action)
    state.update({
        "search_text": search_text,
        "normalized_search_text": normalized_search_text,
        "page": page,
        "total_pages": total_pages,
        "total_results": total,
        "rank_start": start + 1 if shown else 0,
        "rank_end": start + len(shown),
        "products": [{**products[asin].summary(), "rank": start + i + 1} for i, asin in enumerate(shown)],
    })
    return state


def product_state(product: Product, selected_options: Mapping[str, str], selected_price: float | None,
                  last_action: Mapping[str, Any]) -> dict[str, Any]:
    """A product page: summary, option axes (≤100 values each), what is missing, and the clicks.

    One ``axis=value`` click per shown value except the value already selected on that axis;
    ``buy now`` only when every axis is selected.
    """
    available = {axis: list(values[:MAX_OPTION_VALUES]) for axis, values in product.options.items()}
    selected = {axis: selected_options[axis] for axis in product.options if axis in selected_options}
    missing = [axis for axis in product.options if axis not in selected]
    actions = [BACK_TO_SEARCH, PREV_PAGE]
    actions += [option_label(axis, value) for axis, values in available.items() for value in values
                if selected.get(axis) != value]
    if not missing:
        actions.append(BUY_NOW)
    state = _common("product_detail", False, list(dict.fromkeys(actions)), last_action)
    state.update({
        "product": product.summary(),
        "selected_options": selected,
        "available_options": available,
        "missing_option_axes": missing,
        "options_complete": not missing,
        "selected_price": selected_price,
    })
    return state


PAGE_LABELS: dict[str, dict[str, str]] = {
    "zh": {
        "sep": "：", "list_sep": "；", "axis_sep": "、", "page": "页面", "search_home": "搜索首页",
        "search_results": "搜索结果", "product_detail": "商品详情", "features": "页面能力", "can_search": "支持商品搜索",
        "query": "搜索词", "results": "结果", "results_line": "第 {page}/{total_pages} 页，共 {total_results} 项，当前显示排名 {rank_start}-{rank_end}",
        "products": "商品列表", "no_results": "无结果", "price": "价格", "brand": "品牌", "category": "类别",
        "key_attributes": "关键属性", "product": "商品", "title": "标题", "options": "规格选择",
        "selected": "已选择 {value}", "unselected": "尚未选择", "values": "可选值", "no_options": "此商品没有规格选项",
        "missing": "仍需选择", "complete": "所有规格均已选择，可以购买", "last_action": "上次交互结果",
        "outcome": "结果", "success": "成功", "invalid": "无效", "message": "说明", "reason": "原因代码",
        "clickables": "可点击元素", "none": "无", "missing_field": "未提供",
        "terminal": "页面：任务已结束\n无需进一步操作",
    },
    "en": {
        "sep": ": ", "list_sep": "; ", "axis_sep": ", ", "page": "Page", "search_home": "search home",
        "search_results": "search results", "product_detail": "product detail", "features": "Page features",
        "can_search": "product search", "query": "Search", "results": "Results",
        "results_line": "page {page}/{total_pages}, {total_results} items, showing ranks {rank_start}-{rank_end}",
        "products": "Products", "no_results": "no results", "price": "Price", "brand": "Brand", "category": "Category",
        "key_attributes": "Key attributes", "product": "Product", "title": "Title", "options": "Options",
        "selected": "selected {value}", "unselected": "not selected", "values": "Values",
        "no_options": "this product has no options", "missing": "Still to select",
        "complete": "All options selected; ready to buy", "last_action": "Last action", "outcome": "Result",
        "success": "success", "invalid": "invalid", "message": "Message", "reason": "Reason code",
        "clickables": "Clickable elements", "none": "none", "missing_field": "not provided",
        "terminal": "Page: task ended\nNo further actions.",
    },
}


def _clean(value: Any, missing: str) -> str:
    text = " ".join(str(value).split()) if value not in (None, "") else missing
    return _SEP_RE.sub("SEP", _ACTION_SYNTAX_RE.sub(lambda m: f"{m.group(1)} (", text))


def _check_public(state: Any, path: str = "state") -> None:
    if isinstance(state, Mapping):
        for key, value in state.items():
            if key in FORBIDDEN_KEYS:
                raise ObservationError(f"observation state must not contain {key!r} (at {path})")
            _check_public(value, f"{path}.{key}")
    elif isinstance(state, (list, tuple)):
        for i, value in enumerate(state):
            _check_public(value, f"{path}[{i}]")


def validate_state(state: Mapping[str, Any]) -> None:
    """Raise :class:`ObservationError` unless ``state`` is a public, consistent page state."""
    _check_public(state)
    if state.get("page_type") not in PAGE_TYPES:
        raise ObservationError(f"unknown page_type {state.get('page_type')!r}")
    products = state.get("products", [])
    if len(products) > MAX_PRODUCTS_PER_PAGE:
        raise ObservationError(f"a page shows at most {MAX_PRODUCTS_PER_PAGE} products, got {len(products)}")
    if state["page_type"] == "search_results":
        clickable = [a for a in state["actions"] if a not in NAVIGATION_LABELS]
        shown = [p["asin"] for p in products]
        if clickable != shown:
            raise ObservationError(f"product ASINs {shown} differ from clickable ASINs {clickable}")


def _summary_lines(product: Mapping[str, Any], labels: dict[str, str], indent: str) -> list[str]:
    sep, miss = labels["sep"], labels["missing_field"]
    lines = [f"{indent}ASIN{sep}{_clean(product.get('asin'), miss)}"]
    for key in ("price", "brand", "category"):
        lines.append(f"{indent}{labels[key]}{sep}{_clean(product.get(key), miss)}")
    attributes = [str(a) for a in product.get("key_attributes") or []]
    if attributes:
        lines.append(f"{indent}{labels['key_attributes']}{sep}{_clean(labels['list_sep'].join(attributes), miss)}")
    return lines


def _results_lines(state: Mapping[str, Any], labels: dict[str, str]) -> list[str]:
    sep = labels["sep"]
    lines = [f"{labels['query']}{sep}{_clean(state['search_text'], labels['missing_field'])}",
             f"{labels['results']}{sep}{labels['results_line'].format(**state)}",
             f"{labels['products']}{sep.rstrip()}" if state["products"] else f"{labels['products']}{sep}{labels['no_results']}"]
    for product in state["products"]:
        lines.append(f"{product['rank']}. {_clean(product.get('title'), labels['missing_field'])}")
        lines.extend(_summary_lines(product, labels, "   "))
    return lines


def _product_lines(state: Mapping[str, Any], labels: dict[str, str]) -> list[str]:
    sep, miss = labels["sep"], labels["missing_field"]
    product = dict(state["product"])
    if state.get("selected_price") is not None:
        product["price"] = state["selected_price"]
    lines = [f"{labels['product']}{sep.rstrip()}", f"- {labels['title']}{sep}{_clean(product.get('title'), miss)}"]
    lines += [f"- {line}" for line in _summary_lines(product, labels, "")]
    available, selected = state["available_options"], state["selected_options"]
    if not available:
        lines.append(f"{labels['options']}{sep}{labels['no_options']}")
    else:
        lines.append(f"{labels['options']}{sep.rstrip()}")
        for axis, values in available.items():
            status = (labels["selected"].format(value=_clean(selected[axis], miss)) if axis in selected
                      else labels["unselected"])
            lines.append(f"- {_clean(axis, miss)}{sep}{status}")
            lines.append(f"  {labels['values']}{sep}{_clean(' / '.join(map(str, values)), miss)}")
    if state["missing_option_axes"]:
        missing = labels["axis_sep"].join(_clean(a, miss) for a in state["missing_option_axes"])
        lines.append(f"{labels['missing']}{sep}{missing}")
    else:
        lines.append(labels["complete"])
    return lines


def _footer_lines(state: Mapping[str, Any], labels: dict[str, str], language: str) -> list[str]:
    sep, last = labels["sep"], state["last_action"]
    outcome = labels["success"] if last.get("valid") else labels["invalid"]
    reason = last.get("reason", "executed")
    if language == "zh":
        lines = [f"{labels['last_action']}{sep}", f"- {labels['outcome']}{sep}{outcome}",
                 f"- {labels['message']}{sep}{_clean(last.get('message'), labels['missing_field'])}"]
        if reason != "executed":
            lines.append(f"- {labels['reason']}{sep}{reason}")
    else:
        lines = [f"{labels['last_action']}{sep}{outcome}",
                 f"{labels['message']}{sep}{_clean(last.get('message'), labels['missing_field'])}"]
        if reason != "executed":
            lines.append(f"{labels['reason']}{sep}{reason}")
    actions = state["actions"]
    if not actions:
        lines.append(f"{labels['clickables']}{sep}{labels['none']}")
    else:
        lines.append(f"{labels['clickables']}{sep.rstrip()}")
        lines += [f"- {_clean(a, labels['missing_field'])}" for a in actions]
    return lines


def render_observation(state: Mapping[str, Any], language: str = "en") -> str:
    """Render a page state as text in ``language`` ("en" or "zh"); raises :class:`ObservationError`
    for states that :func:`validate_state` refuses."""
    if language not in PAGE_LABELS:
        raise ValueError(f"language must be one of {tuple(PAGE_LABELS)}, got {language!r}")
    validate_state(state)
    labels = PAGE_LABELS[language]
    page_type = state["page_type"]
    if page_type == "terminal":
        return labels["terminal"]
    lines = [f"{labels['page']}{labels['sep']}{labels[page_type]}"]
    if page_type == "search_home":
        lines += [f"{labels['features']}{labels['sep'].rstrip()}", f"- {labels['can_search']}"]
    elif page_type == "search_results":
        lines += _results_lines(state, labels)
    else:
        lines += _product_lines(state, labels)
    return "\n".join(lines + _footer_lines(state, labels, language))
