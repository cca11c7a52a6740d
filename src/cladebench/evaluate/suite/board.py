"""Which number of a suite stands for each benchmark: its headline, one column per benchmark (per challenge group
of a grouped benchmark), and each model's latest row for it.

Why a module of its own: the suite's report (its leaderboard) and ``cladebench results`` (its default pivot) show
the same models × benchmarks table; which rows fill it is decided here, once, from the results table alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cladebench.benchmarks import BENCHMARKS, Benchmark, Headline
from cladebench.evaluate.suite.plan import protocol_name


@dataclass(frozen=True)
class Column:
    """One leaderboard column: a benchmark's headline (one group of it, for a grouped benchmark)."""

    benchmark: str
    group: str | None
    metric: str
    """The full metric name in the run records (``Duska/top1_species``)."""
    protocol: str
    """The protocol run the number comes from (``zeroshot · name_style=sci``)."""

    @property
    def title(self) -> str:
        """``benchmark`` or ``benchmark/group``, as a table names the column."""
        return self.benchmark + (f"/{self.group}" if self.group else "")


def headline(benchmark: Benchmark) -> Headline:
    """The benchmark's headline; without one, its first protocol's first run and the first metric it reports."""
    if benchmark.headline is not None:
        return benchmark.headline
    first = benchmark.protocols[0]
    return Headline(first.task, "", dict(first.runs[0]) if first.runs else {})


def _protocol_of(benchmark: Benchmark, chosen: Headline) -> str:
    run = chosen.run
    if not run:
        protocol = benchmark.protocol(chosen.task)
        run = protocol.runs[0] if protocol.runs else {}
    return protocol_name(chosen.task, run)


def _group_of(metric: str, base: str) -> tuple[bool, str | None]:
    """Whether ``metric`` is the headline ``base`` pooled or for one challenge group (not a breakdown)."""
    if metric == base:
        return True, None
    group, separator, name = metric.rpartition("/")
    if separator and name == base and "=" not in group:
        return True, group
    return False, None


def latest_rows(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str, str], Mapping[str, Any]]:
    """(benchmark, model, protocol, metric) -> the most recently recorded row (a run under other --setting values is
    older or newer; the newest stands for the model). The benchmark is part of the key: the four CrypticBio
    benchmarks share their protocol and metric names, and a column shows its own benchmark's run only. A newest
    row refused as ``unverified`` is the latest too (the caller shows why): an older run never stands in for it."""
    out: dict[tuple[str, str, str, str], Mapping[str, object]] = {}
    rows = [r for r in rows if r.get("status") in ("finished", "unverified") and r.get("metric")]
    for row in sorted(rows, key=lambda r: str(r.get("recorded_at") or "")):
        out[(row["benchmark"], row["model"], row["protocol"], row["metric"])] = row
    return out


def board_columns(rows: Sequence[Mapping[str, Any]],
                  metric: str | None = None) -> tuple[list[Column], list[str], list[str]]:
    """The headline columns of finished ``rows`` (benchmarks in registry order), the models in the order they
    entered the table, and notes on rows of benchmarks this version does not know. With ``metric`` (its own name,
    e.g. ``mistake_severity_species``), that metric instead of each headline: from the headline's protocol where
    it reports it, else from the first of the benchmark's protocols that does."""
    rows = [r for r in rows if r.get("status") == "finished" and r.get("metric")]
    models = list(dict.fromkeys(r["model"] for r in sorted(rows, key=lambda r: str(r.get("recorded_at") or ""))))
    columns: list[Column] = []
    notes: list[str] = []
    known = list(BENCHMARKS)
    for name in sorted(dict.fromkeys(r["benchmark"] for r in rows),
                       key=lambda n: (known.index(n) if n in known else len(known), n)):
        benchmark = BENCHMARKS.get(name)
        if benchmark is None:
            notes.append(f"{name}: no such benchmark in this version of cladebench; left out of the leaderboard")
            continue
        chosen = headline(benchmark)
        protocol = _protocol_of(benchmark, chosen)
        if metric is not None:
            reporting = [r["protocol"] for r in rows if r["benchmark"] == name and _group_of(r["metric"], metric)[0]]
            protocol = protocol if protocol in reporting else next(iter(reporting), protocol)
        mine = [r for r in rows if r["benchmark"] == name and r["protocol"] == protocol]
        base = metric or chosen.metric or (mine[0]["metric"].rpartition("/")[2] if mine else "")
        for reported in dict.fromkeys(r["metric"] for r in mine):
            matches, group = _group_of(reported, base)
            if matches:
                columns.append(Column(benchmark=name, group=group, metric=reported, protocol=protocol))
    return columns, models, notes
