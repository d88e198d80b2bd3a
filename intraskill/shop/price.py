"""SKU price resolution (``variant-price-paper-v2``, ``docs/store.md`` §5.4).

Only the price of the selected variant counts against a budget. An axis is *price-affecting* when
its options carry more than one distinct price; the catalogue filter keeps at most one such axis.

Resolution rules, in order:

- two or more price-affecting axes → unverifiable (``multiple_price_axes``);
- exactly one → the price of the value selected on that axis (``selected_price_axis``); an
  unselected axis or an unpriced value is unverifiable;
- none, and every option value carries the same price → that price (``uniform_option_price``);
- no options at all and a single listing price → that price (``single_listing_price``);
- anything else → unverifiable.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from intraskill.shop.types import Product

PRICE_RESOLUTION_VERSION = "variant-price-paper-v2"
PASS = "pass"
UNVERIFIABLE = "unverifiable"


@dataclass(frozen=True)
class PriceResolution:
    """The resolved SKU price of a product with some options selected.

    ``status`` is ``"pass"`` (``price`` is a number) or ``"unverifiable"`` (``price`` is ``None``);
    ``method`` names the rule that decided; ``evidence`` holds the axis/value/prices it used.
    """

    status: str
    price: float | None
    method: str
    evidence: dict[str, Any] = field(default_factory=dict)
    version: str = PRICE_RESOLUTION_VERSION

    @property
    def verified(self) -> bool:
        return self.status == PASS

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "price": self.price, "version": self.version,
                "method": self.method, "evidence": dict(self.evidence)}


def normalize_option_text(text: str) -> str:
    """Option text for matching: NFKC, casefold, '/' → '|', all whitespace removed.

    >>> normalize_option_text("白色 / 标准版")
    '白色|标准版'
    """
    folded = unicodedata.normalize("NFKC", str(text)).casefold().replace("/", "|")
    return "".join(folded.split())


def price_affecting_axes(product: Product) -> list[str]:
    """Axes (in catalogue order) whose option values carry more than one distinct price."""
    axes = []
    for axis in product.options:
        prices = {p for p in product.option_prices.get(axis, {}).values() if p is not None}
        if len(prices) > 1:
            axes.append(axis)
    return axes


def _unverifiable(method: str, **evidence: Any) -> PriceResolution:
    return PriceResolution(UNVERIFIABLE, None, method, evidence)


def _selected_value_price(product: Product, axis: str, selected: Mapping[str, str]) -> PriceResolution:
    if axis not in selected:
        return _unverifiable("price_axis_unselected", axis=axis)
    wanted = normalize_option_text(selected[axis])
    for value, price in product.option_prices.get(axis, {}).items():
        if normalize_option_text(value) == wanted:
            if price is None:
                return _unverifiable("price_axis_value_unpriced", axis=axis, value=selected[axis])
            return PriceResolution(PASS, float(price), "selected_price_axis",
                                   {"axis": axis, "value": selected[axis], "price": float(price)})
    return _unverifiable("price_axis_value_unknown", axis=axis, value=selected[axis])


def resolve_price(product: Product, selected_options: Mapping[str, str]) -> PriceResolution:
    """Resolve the SKU price of ``product`` given ``selected_options`` (axis → value).

    The axis name must match exactly; option values are compared after
    :func:`normalize_option_text`.
    """
    axes = price_affecting_axes(product)
    if len(axes) >= 2:
        return _unverifiable("multiple_price_axes", axes=axes)
    if len(axes) == 1:
        return _selected_value_price(product, axes[0], selected_options)
    if product.options:
        prices = [product.option_prices.get(axis, {}).get(value) for axis, values in product.options.items()
                  for value in values]
        distinct = set(prices)
        if prices and None not in distinct and len(distinct) == 1:
            price = float(prices[0])
            return PriceResolution(PASS, price, "uniform_option_price", {"price": price})
        return _unverifiable("option_prices_missing_or_mixed", prices=sorted({p for p in prices if p is not None}))
    listing = sorted({float(p) for p in product.pricing[:2]})
    if len(listing) == 1:
        return PriceResolution(PASS, listing[0], "single_listing_price", {"pricing": listing})
    return _unverifiable("listing_price_range", pricing=listing)
