"""The store's page state machine: sessions over a catalogue, private goals and a search index.

``search_home → search_results → product_detail → terminal`` as in ``docs/store.md`` §4.1 and
§4.4. Every ``step`` counts against ``max_actions`` (invalid ones too); reaching the limit without a
purchase ends the episode with ``action_limit`` and reward 0. ``buy now`` scores the purchase with
:func:`intraskill.shop.reward.score_purchase`. The private goal is never part of a page state; it
is revealed in the terminal response only.

The HTTP service adds slot leases around :class:`Session`; the engine itself holds no lease state.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from intraskill.params import StoreParams
from intraskill.shop.actions import (
    InvalidActionError,
    ParsedAction,
    executed_message,
    feedback_message,
    parse_action,
)
from intraskill.shop.budget import BUDGET_PARSER_VERSION
from intraskill.shop.observation import (
    BACK_TO_SEARCH,
    BUY_NOW,
    MAX_PRODUCTS_PER_PAGE,
    NEXT_PAGE,
    OBSERVATION_VERSION,
    PREV_PAGE,
    HomePage,
    PageCache,
    ProductPage,
    ResultsPage,
    TerminalPage,
    last_action_record,
    option_label,
)
from intraskill.shop.price import PRICE_RESOLUTION_VERSION, PriceResolution
from intraskill.shop.reward import REWARD_VERSION, RewardDetail, score_purchase, zero_detail
from intraskill.shop.search import SEARCH_ENGINES, SearchIndex
from intraskill.shop.types import ENVIRONMENT_VERSION, Goal, Product

INTERACTION_MODE = "single_turn"
EXTERNAL_TERMINATIONS = ("action_limit", "generation_length")


_STORE = StoreParams()
"""The store's defaults, written once in :class:`~intraskill.params.StoreParams`."""


@dataclass(frozen=True)
class StoreConfig:
    """Settings of the store (defaults are the reference's frozen contract, §0, as ``store:`` writes them).

    What it adds to the ``store`` section: the engine's own settings, ``persona`` and ``search_engine``, without
    the catalogue's (``scale``, ``seed``, ``source``); engines are built from it without a parameter set (the
    service, benchmarks, tests), so it checks its own values.

    Parameters
    ----------
    page_size : results per page (20; at most 20, the renderer's limit).
    top_k : results kept per query (150).
    max_actions : environment actions per episode before ``action_limit`` (30, single_turn).
    language : "en" or "zh", the language of observations and feedback messages.
    persona : default task mode of ``reset``: persona (``instruction_simple`` + persona) or standard.
    search_engine : "fast" (precomputed BM25 matrix) or "fts5" (SQLite's ``bm25()``); same ranking.
    """

    page_size: int = _STORE.page_size
    top_k: int = _STORE.top_k
    max_actions: int = _STORE.max_actions
    language: str = _STORE.language
    persona: bool = True
    search_engine: str = "fast"

    def __post_init__(self) -> None:
        if not 1 <= self.page_size <= MAX_PRODUCTS_PER_PAGE:
            raise ValueError(f"StoreConfig.page_size must be in 1..{MAX_PRODUCTS_PER_PAGE}, got {self.page_size}")
        if self.top_k < 1:
            raise ValueError(f"StoreConfig.top_k must be >= 1, got {self.top_k}")
        if self.max_actions < 1:
            raise ValueError(f"StoreConfig.max_actions must be >= 1, got {self.max_actions}")
        if self.language not in ("en", "zh"):
            raise ValueError(f"StoreConfig.language must be 'en' or 'zh', got {self.language!r}")
        if self.search_engine not in SEARCH_ENGINES:
            raise ValueError(f"StoreConfig.search_engine must be one of {SEARCH_ENGINES}, got {self.search_engine!r}")


class UnknownTaskError(LookupError):
    """The task id is not active (absent, or its goal has no target attributes)."""


class EpisodeFinishedError(RuntimeError):
    """The session's episode has ended; reset it before stepping again."""


class SessionNotStartedError(RuntimeError):
    """``step``/``terminate`` was called before ``reset``."""


class ShopEngine:
    """Products, goals and the search index shared by every session (thread-safe to share)."""

    def __init__(
        self,
        products: Mapping[str, Product] | Sequence[Product],
        goals: Mapping[int, Goal],
        index: SearchIndex,
        config: StoreConfig | None = None,
    ) -> None:
        self.products: dict[str, Product] = (
            dict(products) if isinstance(products, Mapping) else {p.asin: p for p in products}
        )
        self.goals: dict[int, Goal] = dict(goals)
        self.index = index
        self.config = config or StoreConfig()
        self._filter_results = True
        """Whether search results may name products outside ``products`` (checked per result when so)."""
        if self.config.search_engine == "fast":
            indexed = index.bm25().asins  # built now, not inside the first search step
            self._filter_results = not self.products.keys() >= set(indexed)
        self._counter = itertools.count(1)
        self._counter_lock = threading.Lock()
        self.pages = PageCache(self.products, self.config.language)
        """Per-product page parts: the result-list parts built here, the product pages on first use (a product
        must not be replaced under its ASIN)."""
        self.pages.warm()
        self.home_page = HomePage(self.pages)
        self.terminal_page = TerminalPage(self.pages)

    def active_goal(self, task_id: int) -> Goal:
        """The goal of an active task; raises :class:`UnknownTaskError` otherwise."""
        if not self.has_task(task_id):
            raise UnknownTaskError(f"task_id {task_id!r} is not an active task")
        return self.goals[task_id]

    def has_task(self, task_id: int) -> bool:
        """True when ``task_id`` is an active task (present, with target attributes)."""
        goal = self.goals.get(task_id)
        return goal is not None and bool(goal.attributes)

    def versions(self) -> dict[str, str]:
        """The contract versions this engine implements (reported by ``/healthz``)."""
        return {
            "environment_version": ENVIRONMENT_VERSION,
            "search": str(self.index.manifest["version"]),
            "option_document": str(self.index.manifest["option_document_version"]),
            "reward": REWARD_VERSION,
            "budget_parser": BUDGET_PARSER_VERSION,
            "variant_price": PRICE_RESOLUTION_VERSION,
            "observation": OBSERVATION_VERSION,
        }

    def search(self, query: str) -> list[str]:
        """Result ASINs of a query (those present in the catalogue), at most ``top_k``."""
        found = self.index.search(query, k=self.config.top_k, engine=self.config.search_engine)
        return [a for a in found if a in self.products] if self._filter_results else found

    def fresh(self) -> ShopEngine:
        """An engine over the same catalogue, index and page cache whose session ids start again at ``session-1``
        (what a newly built one would do), without rebuilding any of them."""
        engine = copy.copy(self)
        engine._counter = itertools.count(1)
        engine._counter_lock = threading.Lock()
        return engine

    def new_session(self, session_id: str | None = None) -> Session:
        """A fresh session; ids default to ``session-1``, ``session-2``, … in creation order."""
        if session_id is None:
            with self._counter_lock:
                session_id = f"session-{next(self._counter)}"
        return Session(self, session_id)


class Session:
    """One simulated browser: the page state of the current episode (use from one thread)."""

    def __init__(self, engine: ShopEngine, session_id: str) -> None:
        self.engine = engine
        self.session_id = session_id
        self.goal: Goal | None = None
        self.done = False
        self.action_count = 0
        self.termination_reason: str | None = None
        self._language = engine.config.language
        self._page = "search_home"
        self._search_text = ""
        self._query_key = ""
        self._results_page = 1
        self._cache: dict[str, list[str]] = {}
        self._result_pages: dict[tuple[str, str, int], ResultsPage] = {}
        self._asin: str | None = None
        self._selected: dict[str, str] = {}
        self._price: PriceResolution | None = None
        self._view: HomePage | ResultsPage | ProductPage | TerminalPage = engine.home_page
        self._record: dict[str, Any] = {}

    # ---- public API -------------------------------------------------------------------------

    @property
    def state(self) -> dict[str, Any]:
        """The current public ``observation_state`` (a fresh copy)."""
        return self._view.state(self._record)

    def reset(self, task_id: int, persona: bool | None = None) -> dict[str, Any]:
        """Start the episode of ``task_id`` on the search home page; returns the reset payload.

        ``persona=None`` uses ``StoreConfig.persona``. Persona mode (when the task has a persona)
        shows ``instruction_simple`` and the persona without ``__reasoning__``; standard mode shows
        the full instruction and an empty persona.
        """
        goal = self.engine.active_goal(task_id)
        use_persona = self.engine.config.persona if persona is None else persona
        task_mode = "persona" if use_persona and goal.user_persona else "standard"
        self.goal, self.done, self.action_count, self.termination_reason = goal, False, 0, None
        self._cache.clear()
        self._result_pages.clear()
        self._go_home()
        message = executed_message("reset", self._language)
        self._view, self._record = self.engine.home_page, last_action_record("reset", "executed", message)
        public = goal.public_task()
        return {
            "task_instruction": public.instruction_simple if task_mode == "persona" else goal.instruction_text,
            "observation": self._view.text(self._record),
            "observation_state": self.state,
            "user_persona": public.user_persona if task_mode == "persona" else {},
            "idx": task_id,
            "task_mode": task_mode,
            "interaction_mode": INTERACTION_MODE,
            "environment_version": ENVIRONMENT_VERSION,
            "message": "Environment reset",
        }

    def step(self, action: str) -> dict[str, Any]:
        """Apply one canonical action; every call uses one of ``max_actions``."""
        self._require_live()
        self.action_count += 1
        try:
            event, detail = self._apply(parse_action(action))
            record = last_action_record(str(action), "executed", executed_message(event, self._language))
            if detail is not None:
                return self._finish("purchase", detail, self._purchase_record(), record)
        except InvalidActionError as error:
            message = feedback_message(error.code, self._language, error.missing_option_axes)
            record = last_action_record(str(action), error.code, message, error.missing_option_axes)
        self._render_current(record)
        if self.action_count >= self.engine.config.max_actions:
            return self._finish("action_limit", zero_detail("action_limit"), None, record)
        return self._response(record)

    def terminate(self, reason: str) -> dict[str, Any]:
        """End the episode with zero reward (``action_limit`` or ``generation_length``).

        A finished episode (a purchase included) cannot be overwritten: raises
        :class:`EpisodeFinishedError`.
        """
        if reason not in EXTERNAL_TERMINATIONS:
            raise ValueError(f"termination_reason must be one of {EXTERNAL_TERMINATIONS}, got {reason!r}")
        self._require_live()
        record = last_action_record("terminate", "executed", executed_message("terminate", self._language))
        return self._finish(reason, zero_detail(reason), None, record)

    # ---- transitions --------------------------------------------------------------------------

    def _apply(self, parsed: ParsedAction) -> tuple[str, RewardDetail | None]:
        if parsed.name == "search":
            if self._page != "search_home":
                raise InvalidActionError("search_unavailable")
            return self._search(parsed.argument), None
        value = parsed.argument
        if self._page == "search_results":
            return self._click_results(value), None
        if self._page == "product_detail":
            return self._click_product(value)
        raise InvalidActionError("unavailable_action")

    def _search(self, query: str) -> str:
        key = self.engine.index.normalize(query)
        if key not in self._cache:
            self._cache[key] = self.engine.search(query)
        self._search_text, self._query_key = " ".join(query.split()), key
        self._page, self._results_page = "search_results", 1
        return "search"

    def _click_results(self, value: str) -> str:
        if value not in self._view.actions:
            raise InvalidActionError("unavailable_action")
        if value == BACK_TO_SEARCH:
            self._go_home()
            return "back_to_search"
        if value in (NEXT_PAGE, PREV_PAGE):
            self._results_page += 1 if value == NEXT_PAGE else -1
            return "next_page" if value == NEXT_PAGE else "prev_page"
        self._page, self._asin, self._selected = "product_detail", value, {}
        return "open_product"

    def _click_product(self, value: str) -> tuple[str, RewardDetail | None]:
        product = self.engine.products[self._asin or ""]
        if value not in self._view.actions:
            if value == BUY_NOW:
                missing = tuple(a for a in product.options if a not in self._selected)
                raise InvalidActionError("incomplete_options", missing)
            if value in {option_label(a, v) for a, v in self._selected.items()}:
                raise InvalidActionError("already_selected")
            raise InvalidActionError("unavailable_action")
        if value == BACK_TO_SEARCH:
            self._go_home()
            return "back_to_search", None
        if value == PREV_PAGE:
            self._page, self._asin, self._selected, self._price = "search_results", None, {}, None
            return "back_to_results", None
        if value == BUY_NOW:
            detail = score_purchase(product, self._selected, None, self._require_goal())
            return "purchase", detail
        axis, option = self.engine.pages.parts(product.asin).detail.labels[value]
        self._selected[axis] = option
        return "select_option", None

    def _go_home(self) -> None:
        self._page, self._search_text, self._query_key, self._results_page = "search_home", "", "", 1
        self._asin, self._selected, self._price = None, {}, None

    # ---- states and responses -----------------------------------------------------------------

    def _render_current(self, record: dict[str, Any]) -> None:
        self._record = record
        if self._page == "search_home":
            self._view = self.engine.home_page
        elif self._page == "search_results":
            key = (self._search_text, self._query_key, self._results_page)
            page = self._result_pages.get(key)
            if page is None:
                page = self._result_pages[key] = ResultsPage(
                    self.engine.pages, self._search_text, self._query_key, self._cache[self._query_key],
                    self._results_page, self.engine.config.page_size)
            self._view = page
        else:
            pages = self.engine.pages
            parts = pages.parts(self._asin or "")
            self._view = ProductPage(parts, parts.detail.selection(self._selected, pages.labels), pages)
            self._price = self._view.price

    def _response(self, record: dict[str, Any]) -> dict[str, Any]:
        return {
            "done": self.done,
            "reward": 0.0,
            "observation": self._view.text(record),
            "observation_state": self._view.state(record),
            "action_feedback": dict(record),
            "message": "Continue interaction" if record["valid"] else "Invalid action",
            "idx": self.session_id,
        }

    def _purchase_record(self) -> dict[str, Any]:
        product, goal = self.engine.products[self._asin or ""], self._require_goal()
        return {
            "asin": product.asin,
            "category": product.category,
            "name": product.title,
            "product_category": product.product_category,
            "instruction_text": goal.instruction_text,
            "attributes": list(product.attributes),
            "price": self._price.price if self._price else None,
            "options": dict(self._selected),
        }

    def _finish(self, reason: str, detail: RewardDetail, purchase: dict[str, Any] | None,
                record: dict[str, Any]) -> dict[str, Any]:
        self.done, self.termination_reason = True, reason
        self._go_home()
        self._page = "terminal"
        self._view, self._record = self.engine.terminal_page, record
        response = self._response(record)
        response.update({
            "reward": detail.reward,
            "reward_detail": detail.to_dict(),
            "purchase": purchase,
            "goal": self._require_goal().to_dict(),
            "termination_reason": reason,
        })
        return response

    def _require_goal(self) -> Goal:
        if self.goal is None:
            raise SessionNotStartedError(f"session {self.session_id} has no task; call reset(task_id) first")
        return self.goal

    def _require_live(self) -> None:
        self._require_goal()
        if self.done:
            raise EpisodeFinishedError(
                f"session {self.session_id}: the episode ended ({self.termination_reason}); call reset first"
            )

