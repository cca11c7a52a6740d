"""Cryptic pairs mined from identification histories: planted confusions, a brute-force reference, real pair lists."""

from __future__ import annotations

import csv
import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from cladebench.benchmarks.crypticbio.cryptic_groups import (
    IDENTIFICATION_FATES,
    PAIRS_SCHEMA,
    MiningConfig,
    compare_pairs,
    connected_components,
    group_statistics,
    groups_from_pairs,
    mine_cryptic_pairs,
    pairs_from_groups,
    read_edges,
    read_table,
    symmetric,
    write_lookup,
)
from cladebench.benchmarks.crypticbio.source import read_cryptic_lookup
from cladebench.errors import SchemaError, UsageError

EDGES = "EmmaBouwman-CrypticBio/results/data_analysis/edges.csv"
NODES = "EmmaBouwman-CrypticBio/results/data_analysis/nodes_with_clusters.csv"
CLUSTERS = "EmmaBouwman-CrypticBio/results/data_analysis/cluster_summary.csv"
COMMON = "Final_Multimodal_Group_11/input/CrypticBio-Common.csv"
LOOKUP = "Final_Multimodal_Group_11/input/small_lookup_cryptic_group.tsv"


class History:
    """An identification history built observation by observation."""

    def __init__(self) -> None:
        self.observations: list[tuple[int, str | None]] = []
        self.identifications: list[tuple[int, str | None, bool]] = []

    def observe(self, community: str | None, count: int, *, ids: tuple[tuple[str | None, bool], ...] = ()) -> list[int]:
        made = []
        for _ in range(count):
            oid = len(self.observations) + 1000
            self.observations.append((oid, community))
            if community is not None:
                self.identifications.append((oid, community, True))  # the community's own ID: never evidence
            self.identifications.extend((oid, taxon, current) for taxon, current in ids)
            made.append(oid)
        return made

    def tables(self) -> tuple[pa.Table, pa.Table]:
        ids = pa.table({"observation_id": [i[0] for i in self.identifications],
                        "taxon": pa.array([i[1] for i in self.identifications], pa.string()),
                        "current": [i[2] for i in self.identifications]})
        obs = pa.table({"observation_id": [o[0] for o in self.observations],
                        "community_taxon": pa.array([o[1] for o in self.observations], pa.string())})
        return ids, obs


@pytest.fixture
def planted() -> History:
    """Species with known confusions above and below N = 5 and f = 0.05."""
    h = History()
    # A: 100 observations. B on 10 (two people each: still 10 observations), C on 4 (under N),
    # W only withdrawn on 6, G current on 3 + withdrawn on 3, I on exactly 5 (= N, f = 0.05 exactly).
    h.observe("A", 10, ids=(("B", True), ("B", False)))
    h.observe("A", 4, ids=(("C", True),))
    h.observe("A", 6, ids=(("W", False),))
    h.observe("A", 3, ids=(("G", True),))
    h.observe("A", 3, ids=(("G", False),))
    h.observe("A", 5, ids=(("I", True),))
    h.observe("A", 69)
    # E: 1000 observations, F on 20: enough observations, too small a fraction (0.02).
    h.observe("E", 20, ids=(("F", True),))
    h.observe("E", 980)
    # B: 20 observations, A on 1: the relation is directed, B's group stays without A.
    h.observe("B", 1, ids=(("A", True),))
    h.observe("B", 19)
    # No community taxon: its IDs are not evidence, and it is no species' observation.
    h.observe(None, 7, ids=(("A", True), ("B", True)))
    h.identifications.append((999_999, "B", True))  # an observation the table does not list
    h.identifications.append((1000, None, True))  # an identification without a taxon
    return h


FIVE_PERCENT = MiningConfig(min_observations=5, min_fraction=0.05)


def test_planted_pairs_above_and_below_the_thresholds(planted: History) -> None:
    mined = mine_cryptic_pairs(*planted.tables(), FIVE_PERCENT)
    assert mined.pairs.schema == PAIRS_SCHEMA
    assert mined.pairs.to_pylist() == [
        {"anchor": "A", "confusable": "B", "n_observations_with_confusable_id": 10, "n_observations_of_anchor": 100,
         "fraction": 0.10},
        {"anchor": "A", "confusable": "G", "n_observations_with_confusable_id": 6, "n_observations_of_anchor": 100,
         "fraction": 0.06},
        {"anchor": "A", "confusable": "W", "n_observations_with_confusable_id": 6, "n_observations_of_anchor": 100,
         "fraction": 0.06},
        {"anchor": "A", "confusable": "I", "n_observations_with_confusable_id": 5, "n_observations_of_anchor": 100,
         "fraction": 0.05},
    ]
    # Candidates: A-B, A-C, A-W, A-G, A-I, E-F, B-A.
    assert (mined.candidates, mined.below_min_observations, mined.below_min_fraction) == (7, 2, 1)
    assert groups_from_pairs(mined.pairs) == {"A": ("A", "B", "G", "W", "I")}


def test_every_identification_has_one_fate(planted: History) -> None:
    ids, _ = planted.tables()
    mined = mine_cryptic_pairs(*planted.tables(), FIVE_PERCENT)
    assert list(mined.identifications) == list(IDENTIFICATION_FATES)
    assert sum(mined.identifications.values()) == ids.num_rows
    own = sum(1 for _, community in planted.observations if community is not None)
    assert mined.identifications == {
        "unknown_observation": 1, "no_community_taxon": 14, "missing_taxon": 1, "own_taxon": own,
        "withdrawn_ignored": 0, "evidence": ids.num_rows - 16 - own,
    }


def test_withdrawn_identifications_can_be_left_out(planted: History) -> None:
    current_only = MiningConfig(min_observations=5, min_fraction=0.05, count_withdrawn=False)
    mined = mine_cryptic_pairs(*planted.tables(), current_only)
    # W had only withdrawn IDs (gone); G keeps 3 current ones (under N); B keeps its 10 observations.
    assert [(p["confusable"], p["n_observations_with_confusable_id"]) for p in mined.pairs.to_pylist()] == [
        ("B", 10), ("I", 5)]
    assert mined.identifications["withdrawn_ignored"] == 10 + 6 + 3


def brute_force(identifications: list[tuple[object, object, bool]], observations: list[tuple[object, object]],
                config: MiningConfig) -> list[dict[str, object]]:
    """The rule written out with plain Python, one identification at a time."""
    community = {str(o): (None if c is None else str(c)) for o, c in observations}
    size: dict[str, int] = defaultdict(int)
    for taxon in community.values():
        if taxon is not None:
            size[taxon] += 1
    evidence: dict[tuple[str, str], set[str]] = defaultdict(set)
    for oid, taxon, current in identifications:
        anchor = community.get(str(oid))
        if anchor is None or taxon is None or str(taxon) == anchor or (not current and not config.count_withdrawn):
            continue
        evidence[anchor, str(taxon)].add(str(oid))
    rows = [{"anchor": a, "confusable": b, "n_observations_with_confusable_id": len(o),
             "n_observations_of_anchor": size[a], "fraction": len(o) / size[a]}
            for (a, b), o in evidence.items()
            if len(o) >= config.min_observations and len(o) / size[a] >= config.min_fraction]
    return sorted(rows, key=lambda r: (r["anchor"], -r["fraction"], r["confusable"]))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("count_withdrawn", [True, False])
def test_random_histories_match_a_brute_force_reference(seed: int, count_withdrawn: bool) -> None:
    rng = random.Random(seed)
    taxa = [f"T{i}" for i in range(12)]
    observations = [(oid, rng.choice([*taxa, None])) for oid in range(600)]
    identifications = [(rng.randrange(620), rng.choice([*taxa, None]), rng.random() < 0.7) for _ in range(4000)]
    config = MiningConfig(min_observations=rng.randint(2, 6), min_fraction=rng.choice([0.0, 0.02, 0.05]),
                          count_withdrawn=count_withdrawn)
    ids = pa.table({"observation_id": [i[0] for i in identifications],
                    "taxon": pa.array([i[1] for i in identifications], pa.string()),
                    "current": [i[2] for i in identifications]})
    obs = pa.table({"observation_id": [o[0] for o in observations],
                    "community_taxon": pa.array([o[1] for o in observations], pa.string())})
    mined = mine_cryptic_pairs(ids, obs, config)
    assert mined.pairs.to_pylist() == brute_force(identifications, observations, config)
    assert mined.pairs.num_rows > 0


def test_ids_of_different_types_join_as_text() -> None:
    ids = pa.table({"observation_id": [1, 2, 3], "taxon": [36514, 36514, 7], "current": ["true", "false", "true"]})
    obs = pa.table({"observation_id": ["1", "2", "3"], "community_taxon": [7, 7, 7]})
    mined = mine_cryptic_pairs(ids, obs, MiningConfig(min_observations=2, min_fraction=0.5))
    assert [(p["anchor"], p["confusable"], p["n_observations_with_confusable_id"])
            for p in mined.pairs.to_pylist()] == [("7", "36514", 2)]


def test_bad_inputs_are_clear_errors() -> None:
    obs = pa.table({"observation_id": [1], "community_taxon": ["A"]})
    with pytest.raises(SchemaError, match=r"identifications table lacks column\(s\) \['current'\]"):
        mine_cryptic_pairs(pa.table({"observation_id": [1], "taxon": ["B"]}), obs)
    with pytest.raises(SchemaError, match="'current' is empty in 1 row"):
        mine_cryptic_pairs(pa.table({"observation_id": [1], "taxon": ["B"], "current": pa.array([None], pa.bool_())}),
                           obs)
    clash = pa.table({"observation_id": [1, 1], "community_taxon": ["A", "B"]})
    with pytest.raises(SchemaError, match="more than one community taxon"):
        mine_cryptic_pairs(pa.table({"observation_id": [1], "taxon": ["B"], "current": [True]}), clash)
    with pytest.raises(UsageError, match="min_fraction"):
        MiningConfig(min_fraction=5.0)
    with pytest.raises(UsageError, match="min_observations"):
        MiningConfig(min_observations=0)


def test_groups_round_trip_through_a_lookup_tsv(tmp_path: Path, planted: History) -> None:
    groups = groups_from_pairs(mine_cryptic_pairs(*planted.tables(), FIVE_PERCENT).pairs) | {"Z": ("Z",)}
    path = write_lookup(groups, tmp_path / "groups.tsv")
    assert read_cryptic_lookup(path) == groups
    with pytest.raises(SchemaError, match="comma"):
        write_lookup({"A": ("A", "B, C")}, tmp_path / "bad.tsv")


def test_tables_are_read_from_csv_and_parquet(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    (tmp_path / "ids.csv").write_text("observation_id,taxon,current\n1,A,true\n2,B,false\n")
    table = read_table(tmp_path / "ids.csv")
    assert table.column("current").to_pylist() == [True, False]
    pq.write_table(table, tmp_path / "ids.parquet")
    assert read_table(tmp_path / "ids.parquet").equals(table)
    with pytest.raises(UsageError, match=r"\.csv, \.tsv or \.parquet"):
        read_table(tmp_path / "ids.json")


# --- real pair lists -----------------------------------------------------------------------------


def test_real_edges_form_the_published_clusters(realdata: Callable[[str], Path]) -> None:
    edges = read_edges(realdata(EDGES))
    assert edges.num_rows == 582
    with open(realdata(NODES), newline="") as handle:
        nodes = list(csv.DictReader(handle))
    clusters: dict[str, set[str]] = defaultdict(set)
    for node in nodes:
        clusters[node["cluster_id"]].add(node["species"])
    components = connected_components(edges)
    assert {frozenset(c) for c in components} == {frozenset(c) for c in clusters.values()}
    with open(realdata(CLUSTERS), newline="") as handle:
        sizes = sorted(int(r["num_species"]) for r in csv.DictReader(handle))
    assert sorted(len(c) for c in components) == sizes == [19, 59, 60, 61, 147]

    groups = groups_from_pairs(symmetric(edges))
    assert len(groups) == len(nodes) == 346
    assert group_statistics(groups)["pairs"] == 2 * 582  # an undirected pair puts each species in the other's group


def test_real_lookup_and_edges_against_the_common_anchors(realdata: Callable[[str], Path]) -> None:
    with open(realdata(COMMON), newline="", encoding="utf-8") as handle:
        common_species = {r["scientificName"] for r in csv.DictReader(handle)}
    lookup = read_cryptic_lookup(realdata(LOOKUP))
    lookup_pairs = pairs_from_groups(lookup)
    assert lookup_pairs.num_rows == 4200
    stats = group_statistics(lookup, common_species)
    # Every Common species is an anchor; 3 of them (of the lookup's 8) have an empty confusable set.
    assert (stats["species"], stats["species_with_group"], stats["groups"]) == (158, 155, 261)
    assert sum(len(lookup[s]) == 1 for s in common_species) == 3
    # The lookup is directed: of the pairs whose confusable is itself an anchor, not all are listed both ways.
    directed = {(a, b) for a, b in zip(lookup_pairs.column("anchor").to_pylist(),
                                       lookup_pairs.column("confusable").to_pylist(), strict=True)}
    anchored = [(a, b) for a, b in directed if b in lookup]
    assert (len(anchored), sum((b, a) in directed for a, b in anchored)) == (1769, 1420)
    reversed_pairs = compare_pairs(lookup_pairs, symmetric(lookup_pairs), directed=True)
    assert reversed_pairs.shared == 4200 and reversed_pairs.reference == 2 * 4200 - 1420

    # The EmmaBouwman graph was cut from other clusters of the full CrypticBio: it shares no species with
    # the Common benchmark, so it covers none of its anchors and none of the lookup's pairs.
    edge_groups = groups_from_pairs(symmetric(read_edges(realdata(EDGES))))
    assert group_statistics(edge_groups, common_species)["species_with_group"] == 0
    comparison = compare_pairs(lookup_pairs, read_edges(realdata(EDGES)))
    assert (comparison.shared, comparison.precision, comparison.recall) == (0, 0.0, 0.0)
    assert comparison.reference == 582


def test_files_read_table_cannot_read_are_one_line_errors(tmp_path: Path) -> None:
    from cladebench.errors import CladebenchError

    with pytest.raises(UsageError, match="no such file"):
        read_table(tmp_path / "missing.csv")
    (tmp_path / "folder.parquet").mkdir()
    with pytest.raises(UsageError, match="a folder, not a file"):
        read_table(tmp_path / "folder.parquet")
    latin = tmp_path / "ids.csv"
    latin.write_bytes("observation_id,taxon\n1,Parus m\u00e4jor\n".encode("latin-1"))
    with pytest.raises(CladebenchError, match="cannot read") as error:
        read_table(latin)
    assert error.value.exit_code == 1 and "\n" not in str(error.value)
    broken = tmp_path / "ids.parquet"
    broken.write_bytes(b"PAR1 not really")
    with pytest.raises(CladebenchError, match="cannot read"):
        read_table(broken)
