"""The browse filters: query parameters in, one read-only SQL filter for Lance out.

Every filter of the grid is a query parameter, so a filtered page is a link that can be shared or reloaded:
a value of any ``*_group`` column, a name at any rank (several ranks narrow down the taxonomy tree), the license,
the source, whether any model saw the image in training, and a free ``where`` filter. The free filter passes the
project's own checks (:func:`cladebench.store.check_filter`: one expression, no ``;``) and Lance's planner on this
dataset before a row is read; Lance's filters are expressions over rows and cannot write. Values chosen from the
page are written as SQL literals (:func:`cladebench.store.sql_literal`), never pasted in.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from cladebench.errors import UsageError
from cladebench.store import check_filter, group_columns, sql_identifier, sql_literal
from cladebench.taxonomy import RANK_COLUMNS

if TYPE_CHECKING:
    import lance

SEEN_CHOICES = ("any", "seen", "unseen")
"""``seen``: the image is in some model's training data; ``unseen``: in none that the dataset records."""
PAGE_SIZE = 100
"""Thumbnails per page of the grid."""


@dataclass(frozen=True)
class Filters:
    """What the grid shows: each field one query parameter."""

    groups: tuple[tuple[str, str], ...] = ()
    """(``*_group`` column, value) pairs."""
    ranks: tuple[tuple[str, str], ...] = ()
    """(rank column, name) pairs, kingdom first: the node of the taxonomy tree and its ancestors chosen."""
    license: str | None = None
    """``license_name`` value."""
    source: str | None = None
    """``source_dataset`` value."""
    seen: str = "any"
    """One of :data:`SEEN_CHOICES`."""
    where: str | None = None
    """Free SQL filter, as typed."""
    extra: tuple[tuple[str, str], ...] = field(default=())
    """Other query parameters an area keeps in its links (``sort``, ``run``), untouched here."""

    @classmethod
    def from_query(cls, query: Mapping[str, str], columns: list[str], keep: tuple[str, ...] = ()) -> Filters:
        """The filters named in ``query``; an unknown column or a bad value is a :class:`UsageError`."""
        schema_groups = [c for c in columns if c.endswith("_group")]
        groups = tuple((c, query[c]) for c in schema_groups if query.get(c))
        ranks = tuple((r, query[r]) for r in RANK_COLUMNS if query.get(r) and r in columns)
        seen = query.get("seen") or "any"
        if seen not in SEEN_CHOICES:
            raise UsageError(f"seen must be one of {', '.join(SEEN_CHOICES)}, got {seen!r}")
        where = (query.get("where") or "").strip() or None
        return cls(groups=groups, ranks=ranks, license=query.get("license") or None,
                   source=query.get("source") or None, seen=seen, where=where,
                   extra=tuple((k, query[k]) for k in keep if query.get(k)))

    def params(self, **changes: object) -> list[tuple[str, str]]:
        """The query parameters of these filters, with ``changes`` (a value of None drops the parameter)."""
        values: dict[str, str | None] = {**dict(self.groups), **dict(self.ranks)}
        values.update(license=self.license, source=self.source, seen=None if self.seen == "any" else self.seen,
                      where=self.where, **dict(self.extra))
        for key, value in changes.items():
            values[key] = None if value is None else str(value)
        return [(k, v) for k, v in values.items() if v not in (None, "")]

    def link(self, path: str = "/", **changes: object) -> str:
        """``path`` with these filters (and ``changes``) as its query."""
        query = urlencode(self.params(**changes))
        return f"{path}?{query}" if query else path

    def link_without(self, *names: str, path: str = "/") -> str:
        """``path`` with these filters but the parameters ``names`` (and the page)."""
        return self.link(path, page=None, **dict.fromkeys(names))

    def sql(self, columns: list[str], lists: frozenset[str] = frozenset()) -> str | None:
        """The whole filter as one SQL expression for Lance, or None when nothing is filtered. A group column in
        ``lists`` holds a list per row (CrypticBio's ``cryptic_group``): its value selects the rows whose list
        holds it, as its facet counts them."""
        parts = []
        for column, value in (*self.groups, *self.ranks):
            if column in lists:
                parts.append(f"array_has({sql_identifier(column)}, {sql_literal(value)})")
            else:
                parts.append(f"{sql_identifier(column)} = {sql_literal(value)}")
        if self.license is not None:
            parts.append(f"license_name = {sql_literal(self.license)}")
        if self.source is not None:
            parts.append(f"source_dataset = {sql_literal(self.source)}")
        if self.seen != "any":
            if "seen_in_training" not in columns:
                if self.seen == "seen":
                    parts.append("false")
            elif self.seen == "seen":
                parts.append("array_length(seen_in_training) > 0")
            else:
                parts.append("(seen_in_training IS NULL OR array_length(seen_in_training) = 0)")
        where = check_filter(self.where, option="where")
        if where is not None:  # the line break ends a trailing ``--`` comment before the closing parenthesis
            parts.append(f"({where}\n)")
        return " AND ".join(parts) or None

    @property
    def chosen(self) -> list[tuple[str, str, str]]:
        """(label, value, link without it) of each filter set, for the chips above the grid."""
        chips = [(c, v, self.link("/", **{c: None})) for c, v in self.groups]
        chips += [(r, v, self.link("/", **{r: None, **{d: None for d in RANK_COLUMNS[RANK_COLUMNS.index(r) + 1:]}}))
                  for r, v in self.ranks]
        if self.license:
            chips.append(("license", self.license, self.link(license=None)))
        if self.source:
            chips.append(("source", self.source, self.link(source=None)))
        if self.seen != "any":
            chips.append(("training", self.seen, self.link(seen=None)))
        if self.where:
            chips.append(("where", self.where, self.link(where=None)))
        return chips


def view_link(path: str, params: list[tuple[str, str]], view: str) -> str:
    """``path`` with a grid's query (its page left out) and ``view=`` naming the grid (``browse``, ``runs``): an
    image page opened through it steps through that grid, in its order."""
    query = urlencode([*(kv for kv in params if kv[0] not in ("page", "view")), ("view", view)])
    return f"{path}?{query}"


@contextlib.contextmanager
def filter_errors(where: str | None) -> Iterator[None]:
    """Lance's errors while a free filter runs, as one :class:`UsageError` line shown on the page.

    A filter that plans can still fail on a row (``1/0 = 1``, a cast of a value that does not convert); with no free
    filter an error is not the user's and goes on as it is."""
    try:
        yield
    except (OSError, ValueError, RuntimeError) as exc:
        if where is None:
            raise
        reason = str(exc).split(", /")[0].removeprefix("Invalid user input: ").splitlines()[0]
        raise UsageError(f"where {where!r}: {reason}") from None


def group_columns_of(dataset: lance.LanceDataset) -> list[str]:
    """The dataset's ``*_group`` columns."""
    return group_columns(dataset.schema)


def list_columns_of(dataset: lance.LanceDataset) -> frozenset[str]:
    """The dataset's columns that hold a list per row: faceted and filtered by their elements."""
    import pyarrow as pa

    return frozenset(f.name for f in dataset.schema if pa.types.is_list(f.type) or pa.types.is_large_list(f.type))
