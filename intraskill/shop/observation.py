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

from intraskill.shop.price import resolve_price
from intraskill.shop.types import Product

OBSERVATION_VERSION = "shopping-observation-v7"
MAX_PRODUCTS_PER_PAGE = 20
MAX_OPTION_VALUES = 100
MAX_CACHED_SELECTIONS = 64
"""Selections per product whose page parts the engine keeps (the rest are built per step)."""
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


def _results_window(asins: Sequence[str], page: int, page_size: int) -> tuple[int, int, list[str], list[str]]:
    """Page ``page`` of ``asins``: its first index, the page count, the navigation actions and the ASINs shown."""
    total_pages = max(1, -(-len(asins) // page_size))
    if not 1 <= page <= total_pages:
        raise ValueError(f"page must be in 1..{total_pages}, got {page}")
    start = (page - 1) * page_size
    actions = [BACK_TO_SEARCH]
    if page > 1:
        actions.append(PREV_PAGE)
    if page < total_pages:
        actions.append(NEXT_PAGE)
    return start, total_pages, actions, list(asins[start : start + page_size])


def results_state(search_text: str, normalized_search_text: str, asins: Sequence[str],
                  products: Mapping[str, Product], page: int, page_size: int,
                  last_action: Mapping[str, Any]) -> dict[str, Any]:
    """Page ``page`` (1-based) of a result list ``asins``, ``page_size`` products per page."""
    total = len(asins)
    start, total_pages, actions, shown = _results_window(asins, page, page_size)
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
    if "[" not in text:
        return text
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


def _last_action_lines(last: Mapping[str, Any], labels: dict[str, str], language: str) -> list[str]:
    sep = labels["sep"]
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
    return lines


def _clickable_lines(actions: Sequence[str], labels: dict[str, str]) -> list[str]:
    if not actions:
        return [f"{labels['clickables']}{labels['sep']}{labels['none']}"]
    return [f"{labels['clickables']}{labels['sep'].rstrip()}"] + [f"- {_clean(a, labels['missing_field'])}"
                                                                 for a in actions]


def _footer_lines(state: Mapping[str, Any], labels: dict[str, str], language: str) -> list[str]:
    return _last_action_lines(state["last_action"], labels, language) + _clickable_lines(state["actions"], labels)


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


# ---- precomputed page parts: the engine's hot path ------------------------------------------------
#
# The engine builds its pages from these trusted parts instead of validating and rendering a state
# dict on every step. Each page's ``state`` equals the matching ``*_state`` function's result and its
# ``text`` equals ``render_observation`` of that state, byte for byte.


def _copy_last_action(last_action: Mapping[str, Any]) -> dict[str, Any]:
    record = dict(last_action)
    if "missing_option_axes" in record:
        record["missing_option_axes"] = list(record["missing_option_axes"])
    return record


def _state_head(page_type: str, actions: list[str], last_action: Mapping[str, Any]) -> dict[str, Any]:
    return {"observation_version": OBSERVATION_VERSION, "page_type": page_type, "search_available": False,
            "actions": actions, "last_action": _copy_last_action(last_action)}


_NAVIGATION_CLICK_LINES = {language: {label: f"- {_clean(label, labels['missing_field'])}" for label in NAVIGATION_LABELS}
                           for language, labels in PAGE_LABELS.items()}


class ProductParts:
    """The parts of one product's pages in one language, computed once (read-only afterwards).

    The result-list parts are built on construction; the product-page parts (:attr:`detail`)
    on first use.
    """

    def __init__(self, product: Product, language: str) -> None:
        labels = PAGE_LABELS[language]
        self.product = product
        self.language = language
        self.summary = product.summary()
        self.key_attributes = tuple(self.summary["key_attributes"])
        self._listed = {**self.summary, "rank": 0}
        self.title_text = _clean(self.summary.get("title"), labels["missing_field"])
        self.summary_lines = tuple(_summary_lines(self.summary, labels, ""))
        self.result_text = "\n".join(f"   {line}" for line in self.summary_lines)
        self.click_line = f"- {_clean(product.asin, labels['missing_field'])}"
        self._detail: ProductDetailParts | None = None

    def summary_state(self) -> dict[str, Any]:
        """A fresh copy of the product's public summary."""
        summary = self.summary.copy()
        summary["key_attributes"] = list(self.key_attributes)
        return summary

    def listed_state(self, rank: int) -> dict[str, Any]:
        """A fresh copy of the summary with the product's ``rank`` on a results page."""
        listed = self._listed.copy()
        listed["key_attributes"] = list(self.key_attributes)
        listed["rank"] = rank
        return listed

    @property
    def detail(self) -> ProductDetailParts:
        """The product-page parts (built on first use; a race builds two equal copies, one wins)."""
        if self._detail is None:
            self._detail = ProductDetailParts(self)
        return self._detail


class ProductDetailParts:
    """The product page's fixed parts: header lines, option axes, option clicks and their text."""

    def __init__(self, parts: ProductParts) -> None:
        labels = PAGE_LABELS[parts.language]
        sep, miss = labels["sep"], labels["missing_field"]
        product = parts.product
        summary_lines = parts.summary_lines
        self.head = "\n".join([f"{labels['page']}{sep}{labels['product_detail']}", f"{labels['product']}{sep.rstrip()}",
                               f"- {labels['title']}{sep}{parts.title_text}", f"- {summary_lines[0]}"])
        self.price_prefix = f"- {labels['price']}{sep}"
        self.listing_price_line = f"- {summary_lines[1]}"
        self.tail = "\n".join(f"- {line}" for line in summary_lines[2:])
        self.available = tuple((axis, tuple(values[:MAX_OPTION_VALUES])) for axis, values in product.options.items())
        self.axis_text = {axis: _clean(axis, miss) for axis in product.options}
        self.values_lines = {axis: f"  {labels['values']}{sep}{_clean(' / '.join(map(str, values)), miss)}"
                             for axis, values in self.available}
        self.options_line = (f"{labels['options']}{sep.rstrip()}" if self.available
                             else f"{labels['options']}{sep}{labels['no_options']}")
        clicks = [(axis, value, option_label(axis, value)) for axis, values in self.available for value in values]
        self.clicks = tuple((axis, value, label, f"- {_clean(label, miss)}") for axis, value, label in clicks)
        """(axis, value, click value, its clickable line) of every shown option value."""
        self.distinct_clicks = len({label for _, _, label in clicks}) == len(clicks)
        self.navigation_lines = _NAVIGATION_CLICK_LINES[parts.language]
        self.product = product
        self._labels: dict[str, tuple[str, str]] | None = None
        self._selections: dict[tuple[tuple[str, str], ...], SelectionParts] = {}

    @property
    def labels(self) -> dict[str, tuple[str, str]]:
        """Click value → (axis, value) over every option value (built on the first selection)."""
        if self._labels is None:
            self._labels = {option_label(a, v): (a, v) for a, values in self.product.options.items() for v in values}
        return self._labels

    def selection(self, selected_options: Mapping[str, str], labels: dict[str, str]) -> SelectionParts:
        """The page parts with ``selected_options`` chosen (the first :data:`MAX_CACHED_SELECTIONS`
        distinct selections are kept)."""
        key = tuple((axis, selected_options[axis]) for axis in self.axis_text if axis in selected_options)
        parts = self._selections.get(key)
        if parts is None:
            parts = SelectionParts(self, dict(key), labels)
            if len(self._selections) < MAX_CACHED_SELECTIONS:
                parts = self._selections.setdefault(key, parts)
        return parts


class SelectionParts:
    """One selection's product page: selected and missing axes, clicks, the SKU price, and the
    text around the last-action block."""

    def __init__(self, detail: ProductDetailParts, selected: dict[str, str], labels: dict[str, str]) -> None:
        sep, miss = labels["sep"], labels["missing_field"]
        self.selected = selected
        self.missing = tuple(axis for axis in detail.axis_text if axis not in selected)
        self.price = resolve_price(detail.product, selected)
        clicks = [c for c in detail.clicks if selected.get(c[0]) != c[1]] if selected else detail.clicks
        navigation = [BACK_TO_SEARCH, PREV_PAGE]
        actions = navigation + [label for _, _, label, _ in clicks] + ([] if self.missing else [BUY_NOW])
        if detail.distinct_clicks:
            click_lines = [line for _, _, _, line in clicks]
        else:
            actions = list(dict.fromkeys(actions))
            lines_of = {label: line for _, _, label, line in clicks}
            click_lines = [lines_of[label] for label in actions if label in lines_of]
        self.actions = actions
        price = (detail.listing_price_line if self.price.price is None
                 else f"{detail.price_prefix}{_clean(self.price.price, miss)}")
        lines = [detail.head, price, detail.tail, detail.options_line]
        for axis, _ in detail.available:
            status = (labels["selected"].format(value=_clean(selected[axis], miss)) if axis in selected
                      else labels["unselected"])
            lines += [f"- {detail.axis_text[axis]}{sep}{status}", detail.values_lines[axis]]
        if self.missing:
            missing = labels["axis_sep"].join(detail.axis_text[a] for a in self.missing)
            lines.append(f"{labels['missing']}{sep}{missing}")
        else:
            lines.append(labels["complete"])
        self.head = "\n".join(lines)
        nav_lines = [detail.navigation_lines[label] for label in navigation]
        buy_line = [] if self.missing else [detail.navigation_lines[BUY_NOW]]
        self.clickables = "\n".join([f"{labels['clickables']}{sep.rstrip()}", *nav_lines, *click_lines, *buy_line])


class PageCache:
    """Lazily built :class:`ProductParts` of a catalogue in one language, shared by sessions.

    Lookups and inserts are single dict operations (atomic under the GIL); two threads that miss
    the same product at once build equal parts and one of them is kept.
    """

    def __init__(self, products: Mapping[str, Product], language: str) -> None:
        if language not in PAGE_LABELS:
            raise ValueError(f"language must be one of {tuple(PAGE_LABELS)}, got {language!r}")
        self.products = products
        self.language = language
        self.labels = PAGE_LABELS[language]
        self._parts: dict[str, ProductParts] = {}
        self._footers: dict[tuple[Any, Any, Any], str] = {}

    def parts(self, asin: str) -> ProductParts:
        """The parts of the catalogue product ``asin``."""
        parts = self._parts.get(asin)
        if parts is None:
            parts = self._parts.setdefault(asin, ProductParts(self.products[asin], self.language))
        return parts

    def warm(self) -> None:
        """Build every product's result-list parts now (about 45 µs a product), so that no results page
        pays for a product it shows for the first time; the product-page parts stay lazy."""
        for asin in self.products:
            self.parts(asin)

    def footer(self, last_action: Mapping[str, Any]) -> str:
        """The text of the last-action block (cached per outcome, reason and message)."""
        key = (last_action.get("valid"), last_action.get("reason", "executed"), last_action.get("message"))
        text = self._footers.get(key)
        if text is None:
            text = self._footers.setdefault(key, "\n".join(_last_action_lines(last_action, self.labels, self.language)))
        return text


class HomePage:
    """The search home page."""

    actions: tuple[str, ...] = ()

    def __init__(self, cache: PageCache) -> None:
        labels = cache.labels
        self.cache = cache
        self.head = "\n".join([f"{labels['page']}{labels['sep']}{labels['search_home']}",
                               f"{labels['features']}{labels['sep'].rstrip()}", f"- {labels['can_search']}"])
        self.clickables = "\n".join(_clickable_lines((), labels))

    def state(self, last_action: Mapping[str, Any]) -> dict[str, Any]:
        return {**_state_head("search_home", [], last_action), "search_available": True}

    def text(self, last_action: Mapping[str, Any]) -> str:
        return f"{self.head}\n{self.cache.footer(last_action)}\n{self.clickables}"


class TerminalPage:
    """The page after the episode ended."""

    actions: tuple[str, ...] = ()

    def __init__(self, cache: PageCache) -> None:
        self.cache = cache

    def state(self, last_action: Mapping[str, Any]) -> dict[str, Any]:
        return _state_head("terminal", [], last_action)

    def text(self, last_action: Mapping[str, Any]) -> str:
        return self.cache.labels["terminal"]


class ResultsPage:
    """Page ``page`` (1-based) of a result list, as :func:`results_state` describes it."""

    def __init__(self, cache: PageCache, search_text: str, normalized_search_text: str, asins: Sequence[str],
                 page: int, page_size: int) -> None:
        total = len(asins)
        start, total_pages, actions, shown = _results_window(asins, page, page_size)
        self.cache = cache
        self.actions = actions + shown
        self.parts = [cache.parts(asin) for asin in shown]
        self.fields = {"search_text": search_text, "normalized_search_text": normalized_search_text, "page": page,
                       "total_pages": total_pages, "total_results": total,
                       "rank_start": start + 1 if shown else 0, "rank_end": start + len(shown)}
        labels, sep = cache.labels, cache.labels["sep"]
        lines = [f"{labels['page']}{sep}{labels['search_results']}",
                 f"{labels['query']}{sep}{_clean(search_text, labels['missing_field'])}",
                 f"{labels['results']}{sep}{labels['results_line'].format(**self.fields)}",
                 f"{labels['products']}{sep.rstrip()}" if shown else f"{labels['products']}{sep}{labels['no_results']}"]
        for i, parts in enumerate(self.parts):
            lines += [f"{start + i + 1}. {parts.title_text}", parts.result_text]
        self.head = "\n".join(lines)
        nav = _clickable_lines(actions, labels)
        self.clickables = "\n".join(nav + [parts.click_line for parts in self.parts])

    def state(self, last_action: Mapping[str, Any]) -> dict[str, Any]:
        state = _state_head("search_results", list(self.actions), last_action)
        state.update(self.fields)
        start = state["rank_start"]
        state["products"] = [parts.listed_state(start + i) for i, parts in enumerate(self.parts)]
        return state

    def text(self, last_action: Mapping[str, Any]) -> str:
        return f"{self.head}\n{self.cache.footer(last_action)}\n{self.clickables}"


class ProductPage:
    """A product page with some options selected, as :func:`product_state` describes it."""

    def __init__(self, parts: ProductParts, selection: SelectionParts, cache: PageCache) -> None:
        self.parts, self.selection, self.cache = parts, selection, cache
        self.actions = selection.actions
        self.price = selection.price

    def state(self, last_action: Mapping[str, Any]) -> dict[str, Any]:
        selection = self.selection
        state = _state_head("product_detail", list(selection.actions), last_action)
        state.update({
            "product": self.parts.summary_state(),
            "selected_options": dict(selection.selected),
            "available_options": {axis: list(values) for axis, values in self.parts.detail.available},
            "missing_option_axes": list(selection.missing),
            "options_complete": not selection.missing,
            "selected_price": selection.price.price,
        })
        return state

    def text(self, last_action: Mapping[str, Any]) -> str:
        return f"{self.selection.head}\n{self.cache.footer(last_action)}\n{self.selection.clickables}"
