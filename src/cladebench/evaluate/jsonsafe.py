"""JSON that every parser reads: no bare ``NaN`` or ``Infinity`` in a record, and a note where one was.

Python's ``json`` writes a non-finite float as the bare token ``NaN``, which is not JSON: ``jq``,
JavaScript's ``JSON.parse`` and most other readers reject the whole file. A record is written with
``allow_nan=False`` after every non-finite number has been replaced by ``null``; what was replaced,
and why, is listed beside it, so a null is never mistaken for "not computed".

Example:
    >>> finite_json({"metrics": {"top1": {"value": 0.5, "std": float("nan")}}, "sizes": [1.0, float("inf")]})
    ({'metrics': {'top1': {'value': 0.5, 'std': None}}, 'sizes': [1.0, None]}, \
{'metrics.top1.std': 'NaN', 'sizes[1]': 'Infinity'})
"""

from __future__ import annotations

import json
import math
from typing import Any

NON_FINITE_KEY = "non_finite_values"
"""Where a record lists the values written as null: path -> what the value was (NaN, Infinity, -Infinity)."""


def _describe(value: float) -> str:
    return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")


def finite_json(value: object, path: str = "") -> tuple[Any, dict[str, str]]:
    """``value`` with every non-finite float (numpy's too) replaced by None, and the paths replaced."""
    replaced: dict[str, str] = {}

    def walk(item: Any, where: str) -> object:
        if isinstance(item, dict):
            return {key: walk(v, f"{where}.{key}" if where else str(key)) for key, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v, f"{where}[{i}]") for i, v in enumerate(item)]
        kind = getattr(getattr(item, "dtype", None), "kind", None)
        if kind in ("f", "i", "u", "b") and getattr(item, "ndim", 1) == 0:
            item = item.item()  # numpy scalars: json cannot write them, and float32 NaN would become "nan"
        if isinstance(item, float) and not math.isfinite(item):
            replaced[where] = _describe(item)
            return None
        return item

    return walk(value, path), replaced


def record_json(record: dict[str, object]) -> str:
    """A run record as JSON text: non-finite numbers written as null and listed under the provenance's
    ``non_finite_values`` with what they were; the text is checked to hold no bare NaN or Infinity."""
    data, replaced = finite_json(record)
    if replaced:
        provenance = data.setdefault("provenance", {})
        provenance[NON_FINITE_KEY] = {path: f"{what}, written as null (not a JSON number)"
                                      for path, what in replaced.items()}
    return json.dumps(data, indent=2, default=str, ensure_ascii=False, allow_nan=False) + "\n"
