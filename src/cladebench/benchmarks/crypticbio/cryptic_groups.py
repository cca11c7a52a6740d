"""Cryptic species groups: mined from identification histories, read from published pair lists, summarised.

CrypticBio (Manolache et al., 2025) calls species *cryptic* when people confuse them: on iNaturalist,
an observation whose community settled on species A often carries an identification of species B,
made by someone who saw B in the photo. This module turns such identification histories into
directed pairs ``A -> B`` with their evidence, and pairs into groups (``A``'s group is ``A`` and the
species it is confused with), the form :func:`cladebench.benchmarks.crypticbio.source.read_cryptic_lookup` reads.

**The rule.** For every observation whose community taxon is ``A``, the identifications of another
taxon ``B`` are evidence that ``A`` looks like ``B``. ``B`` joins ``A``'s group when

- at least ``min_observations`` (N) distinct observations of ``A`` carry an identification of ``B``
  (an observation counts once, however many people suggested ``B`` on it), and
- those observations are at least ``min_fraction`` (f) of all observations of ``A``.

Both thresholds guard against a different failure: N against chance (one careless click on a rare
species makes a 100% fraction), f against volume (a species with a million observations collects a
few dozen stray identifications of almost anything).

**What counts as evidence.**

- Identifications of ``A`` itself on an observation of ``A`` are agreement, not confusion: excluded.
- Withdrawn identifications (``current`` false) count by default (``count_withdrawn``). Someone who
  suggested ``B`` and withdrew it once the community said ``A`` was confused exactly the way a
  benchmark of cryptic species wants to measure; dropping withdrawn IDs would erase most corrected
  mistakes, which are the clearest evidence there is. Set ``count_withdrawn`` false to count only
  identifications still standing.
- Observations without a community taxon, identifications of observations the observations table
  does not list, and identifications without a taxon are not evidence; each is counted by reason.

The relation is directed: ``B`` in ``A``'s group does not put ``A`` in ``B``'s (a rare species is
often mistaken for a common one, rarely the other way round). The real
``small_lookup_cryptic_group.tsv`` shows the same asymmetry: of its 1,769 pairs whose confusable is
itself an anchor, 1,420 are listed in both directions.

**Taxa are compared as text**: names (``"Podarcis muralis"``) or ids (``"36514"``), as long as the
identifications and the community taxa use the same kind. The observation ids of the two tables
are joined as they are when their types agree, as text otherwise.

Example:
    >>> import pyarrow as pa
    >>> identifications = pa.table({
    ...     "observation_id": [1, 1, 2, 2, 3],
    ...     "taxon": ["A", "B", "A", "B", "A"],
    ...     "current": [True, False, True, True, True],
    ... })
    >>> observations = pa.table({"observation_id": [1, 2, 3], "community_taxon": ["A", "A", "A"]})
    >>> mined = mine_cryptic_pairs(identifications, observations, MiningConfig(min_observations=2,
    ...                                                                         min_fraction=0.5))
    >>> mined.pairs.to_pylist()  # doctest: +NORMALIZE_WHITESPACE
    [{'anchor': 'A', 'confusable': 'B', 'n_observations_with_confusable_id': 2,
      'n_observations_of_anchor': 3, 'fraction': 0.6666666666666666}]
    >>> groups_from_pairs(mined.pairs)
    {'A': ('A', 'B')}
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cladebench.errors import CladebenchError, SchemaError, UsageError, reading

IDENTIFICATION_COLUMNS: tuple[str, ...] = ("observation_id", "taxon", "current")
"""Columns of an identifications table: the observation, the taxon suggested, whether the ID still stands."""
OBSERVATION_COLUMNS: tuple[str, ...] = ("observation_id", "community_taxon")
"""Columns of an observations table: the observation and the taxon its community agreed on (null if none)."""

PAIRS_SCHEMA = pa.schema([
    pa.field("anchor", pa.string(), nullable=False),
    pa.field("confusable", pa.string(), nullable=False),
    pa.field("n_observations_with_confusable_id", pa.int64()),
    pa.field("n_observations_of_anchor", pa.int64()),
    pa.field("fraction", pa.float64()),
])
"""Directed cryptic pairs ``anchor -> confusable`` with their evidence (null when read from a plain pair list)."""

IDENTIFICATION_FATES: tuple[str, ...] = (
    "unknown_observation", "no_community_taxon", "missing_taxon", "own_taxon", "withdrawn_ignored", "evidence",
)
"""Where each identification ends up, in the order the checks apply; every identification lands in exactly one."""


@dataclass(frozen=True)
class MiningConfig:
    """Thresholds of the cryptic-pair rule (see the module docstring)."""

    min_observations: int = 5
    """N: at least this many distinct observations of A must carry an identification of B."""
    min_fraction: float = 0.01
    """f: and they must be at least this fraction of all observations of A (0 to 1)."""
    count_withdrawn: bool = True
    """Count withdrawn identifications as evidence (a corrected mistake is still a confusion)."""

    def __post_init__(self) -> None:
        if isinstance(self.min_observations, bool) or self.min_observations < 1:
            raise UsageError(f"min_observations must be at least 1, got {self.min_observations}")
        if not 0.0 <= self.min_fraction <= 1.0:
            raise UsageError(f"min_fraction is a fraction in [0, 1], got {self.min_fraction}")


@dataclass(frozen=True)
class MinedPairs:
    """The pairs that passed both thresholds, and how every identification and candidate pair was used."""

    pairs: pa.Table
    """Pairs passing both thresholds (:data:`PAIRS_SCHEMA`), sorted by anchor, fraction (descending), confusable."""
    identifications: dict[str, int]
    """Identifications by fate (:data:`IDENTIFICATION_FATES`); they add up to the identifications read."""
    candidates: int
    """Pairs with at least one observation of evidence, before the thresholds."""
    below_min_observations: int
    """Candidate pairs left out for fewer than N observations."""
    below_min_fraction: int
    """Candidate pairs with N observations or more left out for a fraction under f."""
    config: MiningConfig = field(default_factory=MiningConfig)
    """The thresholds used."""

    def as_dict(self) -> dict[str, object]:
        return {
            "pairs": self.pairs.num_rows, "candidates": self.candidates,
            "below_min_observations": self.below_min_observations, "below_min_fraction": self.below_min_fraction,
            "identifications": dict(self.identifications),
            "min_observations": self.config.min_observations, "min_fraction": self.config.min_fraction,
            "count_withdrawn": self.config.count_withdrawn,
        }


# --- mining --------------------------------------------------------------------------------------


def _columns(table: pa.Table, names: Sequence[str], what: str) -> pa.Table:
    missing = [n for n in names if n not in table.column_names]
    if missing:
        raise SchemaError(f"{what} table lacks column(s) {missing}; it needs {list(names)}, has {table.column_names}")
    return table.select(list(names))


def _as_text(array: pa.ChunkedArray) -> pa.ChunkedArray:
    return array if pa.types.is_string(array.type) else pc.cast(array, pa.string())


def _current_flags(array: pa.ChunkedArray) -> pa.ChunkedArray:
    """The ``current`` column as booleans; text ``true``/``false`` (as CSV readers may leave it) is accepted."""
    if not pa.types.is_boolean(array.type):
        try:
            array = pc.cast(array, pa.bool_())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise SchemaError(f"identifications: 'current' must be true/false, found type {array.type}") from None
    if array.null_count:
        raise SchemaError(f"identifications: 'current' is empty in {array.null_count} row(s); "
                          "every identification is either current or withdrawn")
    return array


def _joinable(left: pa.ChunkedArray, right: pa.ChunkedArray) -> tuple[pa.ChunkedArray, pa.ChunkedArray]:
    return (left, right) if left.type == right.type else (_as_text(left), _as_text(right))


def _community_taxa(observations: pa.Table) -> pa.Table:
    """One row per observation id (``observation_id``, ``community_taxon``, ``known``); an id listed with two
    different community taxa is an error, since its evidence would count for both."""
    observations = observations.filter(pc.is_valid(observations.column("observation_id")))
    distinct = observations.group_by(["observation_id", "community_taxon"], use_threads=False).aggregate([])
    per_id = distinct.group_by("observation_id", use_threads=False).aggregate(
        [("community_taxon", "count", pc.CountOptions(mode="all"))])
    clashing = per_id.filter(pc.greater(per_id.column("community_taxon_count"), 1))
    if clashing.num_rows:
        examples = clashing.column("observation_id").to_pylist()[:5]
        raise SchemaError(f"observations: {clashing.num_rows} observation id(s) have more than one community taxon, "
                          f"e.g. {examples}")
    return distinct.append_column("known", pa.array(np.ones(distinct.num_rows, dtype=bool)))


def _fates(joined: pa.Table, config: MiningConfig) -> np.ndarray:
    """Index into :data:`IDENTIFICATION_FATES` for every identification: the first check it fails."""

    def flags(mask: pa.ChunkedArray | pa.Array) -> np.ndarray:
        return np.asarray(pc.fill_null(mask, False), dtype=bool)

    checks = [
        flags(pc.is_null(joined.column("known"))),
        flags(pc.is_null(joined.column("community_taxon"))),
        flags(pc.is_null(joined.column("taxon"))),
        flags(pc.equal(joined.column("taxon"), joined.column("community_taxon"))),
        ~flags(joined.column("current")) if not config.count_withdrawn else np.zeros(joined.num_rows, dtype=bool),
    ]
    fate = np.full(joined.num_rows, len(checks), dtype=np.int64)  # "evidence" unless a check says otherwise
    for index in reversed(range(len(checks))):  # the earliest failing check wins
        fate[checks[index]] = index
    return fate


def mine_cryptic_pairs(identifications: pa.Table, observations: pa.Table,
                       config: MiningConfig | None = None) -> MinedPairs:
    """Directed cryptic pairs from identification histories; see the module docstring for the rule.

    ``identifications`` has :data:`IDENTIFICATION_COLUMNS`, ``observations`` has :data:`OBSERVATION_COLUMNS`
    (other columns are ignored). Vectorised: one join and two group-bys in Arrow.
    """
    config = config or MiningConfig()
    ids = _columns(identifications, IDENTIFICATION_COLUMNS, "identifications")
    obs = _columns(observations, OBSERVATION_COLUMNS, "observations")
    left_id, right_id = _joinable(ids.column("observation_id"), obs.column("observation_id"))
    ids = pa.table({"observation_id": left_id, "taxon": _as_text(ids.column("taxon")),
                    "current": _current_flags(ids.column("current"))})
    obs = _community_taxa(pa.table({"observation_id": right_id,
                                    "community_taxon": _as_text(obs.column("community_taxon"))}))

    joined = ids.join(obs, "observation_id", join_type="left outer", use_threads=False)
    fate = _fates(joined, config)
    counts = np.bincount(fate, minlength=len(IDENTIFICATION_FATES))
    fates = {name: int(n) for name, n in zip(IDENTIFICATION_FATES, counts, strict=True)}
    if sum(fates.values()) != ids.num_rows:  # every identification in exactly one bin
        raise AssertionError(f"identification accounting: {fates} for {ids.num_rows} identifications")

    evidence = joined.filter(pa.array(fate == IDENTIFICATION_FATES.index("evidence")))
    distinct = evidence.group_by(["community_taxon", "taxon", "observation_id"], use_threads=False).aggregate([])
    pair_counts = distinct.group_by(["community_taxon", "taxon"], use_threads=False).aggregate(
        [("observation_id", "count")])
    anchored = obs.filter(pc.is_valid(obs.column("community_taxon")))
    anchor_sizes = anchored.group_by("community_taxon", use_threads=False).aggregate([("observation_id", "count")])
    candidates = pair_counts.join(anchor_sizes.rename_columns(["community_taxon", "n_of_anchor"]), "community_taxon",
                                  use_threads=False)
    n_with = np.asarray(candidates.column("observation_id_count"), dtype=np.int64)
    n_of = np.asarray(candidates.column("n_of_anchor"), dtype=np.int64)
    fraction = n_with / n_of
    enough = n_with >= config.min_observations
    common_enough = fraction >= config.min_fraction
    kept = enough & common_enough
    pairs = pa.table({
        "anchor": candidates.column("community_taxon"),
        "confusable": candidates.column("taxon"),
        "n_observations_with_confusable_id": pa.array(n_with),
        "n_observations_of_anchor": pa.array(n_of),
        "fraction": pa.array(fraction),
    }, schema=PAIRS_SCHEMA).filter(pa.array(kept))
    return MinedPairs(
        pairs=sort_pairs(pairs), identifications=fates, candidates=candidates.num_rows,
        below_min_observations=int((~enough).sum()), below_min_fraction=int((enough & ~common_enough).sum()),
        config=config,
    )


def sort_pairs(pairs: pa.Table) -> pa.Table:
    """Pairs by anchor, then strongest evidence first (fraction, descending), then confusable: a fixed order."""
    keys = [("anchor", "ascending"), ("fraction", "descending"), ("confusable", "ascending")]
    return pairs.sort_by(keys)


# --- pairs from files, groups from pairs ---------------------------------------------------------


def read_table(path: str | Path) -> pa.Table:
    """A CSV (types inferred) or Parquet file as an Arrow table, chosen by the file's suffix."""
    path = Path(path)
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes[-1:] != [".parquet"] and ".csv" not in suffixes and ".tsv" not in suffixes:
        raise UsageError(f"{path}: expected a .csv, .tsv or .parquet file")
    if not path.is_file():
        raise UsageError(f"{path}: {'a folder, not a file' if path.is_dir() else 'no such file'}")
    with arrow_errors(path):  # not UTF-8, a truncated .gz, not Parquet, unreadable
        if suffixes[-1:] == [".parquet"]:
            import pyarrow.parquet as pq

            return pq.read_table(path)
        import pyarrow.csv as pacsv

        delimiter = "\t" if ".tsv" in suffixes else ","
        table = pacsv.read_csv(path, parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True))
    # Arrow reads a text column with bytes that are not UTF-8 as binary, which no name would ever match.
    binary = [f.name for f in table.schema if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)]
    if binary:
        raise CladebenchError(f"cannot read {path}: column(s) {binary} hold bytes that are not UTF-8 text")
    return table


@contextlib.contextmanager
def arrow_errors(path: Path, *, utf8_hint: str = "") -> Iterator[None]:
    """A file Arrow cannot read (bytes that are not UTF-8, a truncated ``.gz``, a broken Parquet file) is an input
    error naming the file, not a crash; ``utf8_hint`` is added when Arrow's message is about UTF-8."""
    try:
        with reading(path):
            yield
    except CladebenchError as error:
        if not utf8_hint or "UTF8" not in str(error):
            raise
        raise type(error)(f"{error}{utf8_hint}") from None


def pairs_from_edges(edges: pa.Table, *, source: str = "source", target: str = "target") -> pa.Table:
    """A plain pair list (``source,target``, as a networkx edge list) as :data:`PAIRS_SCHEMA` without evidence.

    Blank names and self-pairs are dropped; a pair listed twice is kept once.
    """
    table = _columns(edges, (source, target), "edges")
    anchors = pc.utf8_trim_whitespace(_as_text(table.column(source)))
    confusables = pc.utf8_trim_whitespace(_as_text(table.column(target)))
    keep = pc.and_(pc.and_(pc.greater(pc.utf8_length(anchors), 0), pc.greater(pc.utf8_length(confusables), 0)),
                   pc.not_equal(anchors, confusables))
    unique = pa.table({"anchor": anchors, "confusable": confusables}).filter(pc.fill_null(keep, False)).group_by(
        ["anchor", "confusable"], use_threads=False).aggregate([])
    empty = pa.nulls(unique.num_rows, pa.int64())
    return sort_pairs(pa.table({
        "anchor": unique.column("anchor"), "confusable": unique.column("confusable"),
        "n_observations_with_confusable_id": empty, "n_observations_of_anchor": empty,
        "fraction": pa.nulls(unique.num_rows, pa.float64()),
    }, schema=PAIRS_SCHEMA))


def read_edges(path: str | Path, *, source: str = "source", target: str = "target") -> pa.Table:
    """Read a ``source,target`` pair list (CSV or Parquet) into :data:`PAIRS_SCHEMA`; see :func:`pairs_from_edges`."""
    return pairs_from_edges(read_table(path), source=source, target=target)


def pairs_from_groups(groups: Mapping[str, Sequence[str]]) -> pa.Table:
    """Groups (anchor -> ``(anchor, *confusables)``, as a lookup TSV holds them) as directed pairs."""
    anchors, confusables = [], []
    for anchor, members in groups.items():
        for member in members:
            if member != anchor:
                anchors.append(anchor)
                confusables.append(member)
    return pairs_from_edges(pa.table({"source": pa.array(anchors, pa.string()),
                                      "target": pa.array(confusables, pa.string())}))


def symmetric(pairs: pa.Table) -> pa.Table:
    """Pairs in both directions (for an undirected pair list, where ``A - B`` puts each in the other's group)."""
    reverse = pa.table({"source": pairs.column("confusable"), "target": pairs.column("anchor")})
    forward = pa.table({"source": pairs.column("anchor"), "target": pairs.column("confusable")})
    return pairs_from_edges(pa.concat_tables([forward, reverse]))


def groups_from_pairs(pairs: pa.Table) -> dict[str, tuple[str, ...]]:
    """Anchor -> ``(anchor, *confusables)``, confusables in the pairs' order (strongest evidence first after
    :func:`sort_pairs`); anchors in name order. Only anchors with at least one confusable appear."""
    groups: dict[str, list[str]] = {}
    for anchor, confusable in zip(pairs.column("anchor").to_pylist(), pairs.column("confusable").to_pylist(),
                                  strict=True):
        members = groups.setdefault(anchor, [anchor])
        if confusable not in members:
            members.append(confusable)
    return {anchor: tuple(groups[anchor]) for anchor in sorted(groups)}


def connected_components(pairs: pa.Table) -> list[tuple[str, ...]]:
    """Species joined by pairs in either direction, as clusters: largest first, each in name order.

    This is how a pair graph is usually cut into disjoint clusters (networkx's ``connected_components``).
    """
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        parent.setdefault(name, name)
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for anchor, confusable in zip(pairs.column("anchor").to_pylist(), pairs.column("confusable").to_pylist(),
                                  strict=True):
        a, b = root(anchor), root(confusable)
        if a != b:
            parent[max(a, b)] = min(a, b)
    clusters: dict[str, list[str]] = {}
    for name in parent:
        clusters.setdefault(root(name), []).append(name)
    return sorted((tuple(sorted(c)) for c in clusters.values()), key=lambda c: (-len(c), c[0]))


def write_lookup(groups: Mapping[str, Sequence[str]], path: str | Path) -> Path:
    """Write groups as ``anchor<TAB>species,species,...`` (what :func:`read_cryptic_lookup` reads back)."""
    path = Path(path)
    lines = []
    for anchor in sorted(groups):
        members = [m for m in groups[anchor] if m != anchor]
        for name in (anchor, *members):
            if any(c in name for c in ",\t\r\n"):
                raise SchemaError(f"species name {name!r} holds a comma, tab or line break, which a lookup TSV "
                                  "cannot hold")
        lines.append(f"{anchor}\t{','.join(members)}\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


# --- statistics and comparison -------------------------------------------------------------------


def group_statistics(groups: Mapping[str, Sequence[str]], species: Iterable[str] | None = None) -> dict[str, object]:
    """Counts a card reports: groups, pairs, group sizes (anchor included) and, given the species of a
    dataset, how many of them anchor a group with at least one confusable."""
    sizes = [len(members) for members in groups.values()]
    stats: dict[str, object] = {
        "groups": len(groups),
        "pairs": sum(s - 1 for s in sizes),
        "species_named": len({m for members in groups.values() for m in members} | set(groups)),
        "size_min": min(sizes, default=0), "size_median": statistics.median(sizes) if sizes else 0,
        "size_mean": round(statistics.fmean(sizes), 3) if sizes else 0.0, "size_max": max(sizes, default=0),
    }
    if species is not None:
        wanted = set(species)
        with_group = {s for s in wanted if len(groups.get(s, ())) > 1}
        stats.update(species=len(wanted), species_with_group=len(with_group),
                     species_without_group=len(wanted) - len(with_group))
    return stats


@dataclass(frozen=True)
class PairComparison:
    """Agreement of found pairs with a reference pair list."""

    found: int
    reference: int
    shared: int
    directed: bool

    @property
    def precision(self) -> float:
        return self.shared / self.found if self.found else 0.0

    @property
    def recall(self) -> float:
        return self.shared / self.reference if self.reference else 0.0


def _pair_set(pairs: pa.Table, directed: bool) -> set[tuple[str, str]]:
    raw = zip(pairs.column("anchor").to_pylist(), pairs.column("confusable").to_pylist(), strict=True)
    return {(a, b) if directed else (min(a, b), max(a, b)) for a, b in raw}


def compare_pairs(found: pa.Table, reference: pa.Table, *, directed: bool = False) -> PairComparison:
    """How many found pairs a reference list holds (undirected by default, since most published pair lists are)."""
    found_set, reference_set = _pair_set(found, directed), _pair_set(reference, directed)
    return PairComparison(len(found_set), len(reference_set), len(found_set & reference_set), directed)


__all__ = [
    "IDENTIFICATION_COLUMNS",
    "IDENTIFICATION_FATES",
    "OBSERVATION_COLUMNS",
    "PAIRS_SCHEMA",
    "MinedPairs",
    "MiningConfig",
    "PairComparison",
    "compare_pairs",
    "connected_components",
    "group_statistics",
    "groups_from_pairs",
    "mine_cryptic_pairs",
    "pairs_from_edges",
    "pairs_from_groups",
    "read_edges",
    "read_table",
    "sort_pairs",
    "symmetric",
    "write_lookup",
]
