"""Turning the analysis result objects into plain JSON-ready values."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any


def plain(value: Any) -> Any:
    """Dataclasses and mappings → dicts, tuples → lists, numpy scalars → Python, NaN → ``None``.

    >>> plain({"ci95": (0.1, float("nan"))})
    {'ci95': [0.1, None]}
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {item.name: plain(getattr(value, item.name)) for item in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    return None if isinstance(value, float) and math.isnan(value) else value
