"""What a JSON document holds, as a type: run records, cards, ``build.json`` and the other files read with ``json``.

A value read from such a file is one of these until the code reading it has checked which (``isinstance``); the
checker then knows what each branch holds, where an unchecked type would let any use through.
"""

from __future__ import annotations

JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]
"""One JSON value: null, a boolean, a number, a string, an array or an object."""

JsonObject = dict[str, JsonValue]
"""A JSON object: what ``json.load`` gives for a file holding ``{...}``."""
