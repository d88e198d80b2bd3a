"""Report tables: a DataFrame as a readable, bilingual pandas ``Styler``.

:func:`format_table` shows integer-valued columns as integers, fractions as percentages, an estimate and
its CI bounds as one ``x [lo, hi]`` column, values within rounding of zero as ``0`` (never ``1.1e-16``) unless a
column is asked for in scientific notation, lists as comma-separated items, two-level column names as
``outer: inner``, and translates headers (``LABELS["col_<name>"]``) and chosen values (``LABELS[<prefix><value>]``) into the
page's language; mathtext in a label (``$S_0$``) becomes HTML sub/superscripts. The Styler renders its cells as
HTML without escaping, so every other text cell and header (run data: names, statuses) is HTML-escaped here.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from intraskill.hashing import sha256_text
from intraskill.plots.labels import LABELS, label

if TYPE_CHECKING:
    import pandas as pd
    from pandas.io.formats.style import Styler

MATHTEXT = re.compile(r"\$(?P<base>[^$_^]+)(?P<kind>[_^])\{?(?P<script>[^$}]+)\}?\$")
TABLE_STYLES = [
    {"selector": "", "props": "border-collapse: collapse; font-size: 0.85em;"},
    {"selector": "th", "props": "text-align: center; padding: 0.2em 0.6em; white-space: normal;"},
    {"selector": "td", "props": "text-align: right; padding: 0.2em 0.6em; white-space: nowrap;"},
]


def html_label(text: str) -> str:
    """A label with its mathtext (``$S_0$``, ``$S_{T}$``) as HTML ``<sub>`` / ``<sup>``."""
    def replace(match: re.Match[str]) -> str:
        tag = "sub" if match.group("kind") == "_" else "sup"
        return f"{match.group('base')}<{tag}>{match.group('script')}</{tag}>"

    return MATHTEXT.sub(replace, text)


def header(name: Any, language: str) -> str:
    """The column header of ``name``: ``LABELS["col_<name>"]`` in ``language``, else the name itself."""
    key = f"col_{name}"
    return html_label(label(key, language)) if key in LABELS else html.escape(str(name))


PERCENT = {"en": " %", "zh": "%"}
"""Suffix of a percentage; a signed percent column (a difference, in points) has none: its header says so."""


def _number(value: Any, decimals: int, percent: bool, signed: bool) -> str:
    # deferred: pandas is heavy to import
    import pandas as pd

    if pd.isna(value):
        return "—"
    scaled = float(value) * (100.0 if percent else 1.0)
    places = 2 if percent else decimals
    if abs(scaled) < 0.5 * 10 ** -places:
        scaled = 0.0
    return f"{scaled:+,.{places}f}" if signed and scaled != 0.0 else f"{scaled:,.{places}f}"


def _unit(percent: bool, signed: bool, language: str) -> str:
    return PERCENT[language] if percent and not signed else ""


def _text(value: Any) -> str:
    """A text cell, HTML-escaped: a list or tuple as its items joined by commas, a missing value as ``—``."""
    # deferred: pandas is heavy to import
    import pandas as pd

    if isinstance(value, (list, tuple)):
        return html.escape(", ".join(str(item) for item in value)) or "—"
    return "—" if pd.api.types.is_scalar(value) and pd.isna(value) else html.escape(str(value))


def _is_integral(column: pd.Series) -> bool:
    # deferred: pandas is heavy to import
    import pandas as pd

    if pd.api.types.is_bool_dtype(column) or not pd.api.types.is_numeric_dtype(column):
        return False
    values = column.dropna()
    return pd.api.types.is_integer_dtype(column) or bool(len(values) and (values == values.round()).all())


def format_table(
    frame: pd.DataFrame,
    language: str = "en",
    *,
    percent: Sequence[str] = (),
    signed: Sequence[str] = (),
    ci: Mapping[str, tuple[str, str]] | None = None,
    values: Mapping[str, str] | None = None,
    decimals: int = 3,
    hide: Sequence[str] = (),
    plain: Sequence[str] = (),
    scientific: Sequence[str] = (),
) -> Styler:
    """``frame`` as a formatted Styler in ``language``.

    Parameters
    ----------
    frame : the table; a named index is kept as the first column.
    percent : columns of fractions shown as percentages (``0.5175`` → ``51.75 %``; signed: ``+51.75``, points).
    signed : columns shown with an explicit sign (differences).
    ci : ``{estimate: (low, high)}``: the bounds join the estimate as ``x [lo, hi]`` and are dropped.
    values : ``{column: label prefix}``: cells translated through ``LABELS[prefix + value]`` when present.
    decimals : places of the other non-integer numbers.
    hide : columns left out.
    plain : integer columns shown without thousands separators (seeds, identifiers).
    scientific : columns of small or widely ranging numbers shown as ``1.28e-16``.
    """
    # deferred: pandas is heavy to import
    import pandas as pd

    if language not in ("en", "zh"):
        raise ValueError(f"language must be 'en' or 'zh', got {language!r}")
    table = frame.reset_index() if any(name is not None for name in frame.index.names) else frame.copy()
    if isinstance(table.columns, pd.MultiIndex):
        table.columns = [": ".join(str(part) for part in column if part != "") for column in table.columns]
    table = table.drop(columns=list(hide))
    bounds = dict(ci or {})
    missing = sorted({c for pair in bounds.items() for c in (pair[0], *pair[1])} - set(table.columns))
    if missing:
        raise KeyError(f"format_table: no column(s) {missing} in the table")
    shown = pd.DataFrame(index=table.index)
    dropped = {column for low_high in bounds.values() for column in low_high}
    for column in table.columns:
        if column in dropped:
            continue
        series = table[column]
        is_percent, is_signed = column in percent, column in signed
        unit = _unit(is_percent, is_signed, language)
        if column in bounds:
            low, high = bounds[column]
            cell = [f"{_number(x, decimals, is_percent, is_signed)} [{_number(lo, decimals, is_percent, is_signed)}, "
                    f"{_number(hi, decimals, is_percent, is_signed)}]{unit}"
                    for x, lo, hi in zip(series, table[low], table[high])]
        elif column in scientific:
            cell = ["—" if pd.isna(x) else f"{float(x):.2e}" for x in series]
        elif _is_integral(series) and not is_percent:
            spec = ("+" if is_signed else "") + ("d" if column in plain else ",d")
            cell = ["—" if pd.isna(x) else format(int(x), spec if x else "d") for x in series]
        elif pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
            cell = [_number(x, decimals, is_percent, is_signed) + ("" if pd.isna(x) else unit) for x in series]
        else:
            prefix = (values or {}).get(column) or ("bool_" if pd.api.types.is_bool_dtype(series) else None)
            cell = [html_label(label(f"{prefix}{x}", language)) if prefix and f"{prefix}{x}" in LABELS
                    else _text(x) for x in series]
        shown[header(column, language)] = cell
    styler = shown.style.hide(axis="index").set_table_styles(TABLE_STYLES)
    return styler.set_uuid(sha256_text(f"{language}:{shown.to_json()}")[:8])  # stable HTML ids across builds


def settings_table(settings: Mapping[str, Any]) -> Styler:
    """A notebook's settings as one compact two-column table (``setting``, ``value``): nested mappings (and lists
    of them) flattened to dotted names (``round.q``, ``runs[0].label``), other lists joined with commas, ``None``
    as ``—``; names and values HTML-escaped (the Styler renders its cells as they are)."""
    # deferred: pandas is heavy to import
    import pandas as pd

    def flat(prefix: str, value: Any) -> list[tuple[str, str]]:
        if isinstance(value, Mapping) and value:
            return [row for key, item in value.items() for row in flat(f"{prefix}.{key}" if prefix else str(key), item)]
        if isinstance(value, (list, tuple)) and any(isinstance(item, Mapping) for item in value):
            return [row for index, item in enumerate(value) for row in flat(f"{prefix}[{index}]", item)]
        if isinstance(value, (list, tuple)):
            return [(prefix, ", ".join(str(item) for item in value) or "—")]
        return [(prefix, "—" if value is None or value == {} else str(value))]

    rows = [(html.escape(name), html.escape(value)) for name, value in flat("", settings)]
    frame = pd.DataFrame(rows, columns=["setting", "value"])
    styler = frame.style.hide(axis="index").set_table_styles(TABLE_STYLES)
    return styler.set_uuid(sha256_text(frame.to_json())[:8])
