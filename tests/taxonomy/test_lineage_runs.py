"""Roll-up over species in lineage order (segmented sums) gives the sparse membership product's answers, and
pybioclip's per-image dict loop's, for dense and sparse input, with missing names and homonyms."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
import scipy.sparse

from cladebench.taxonomy import (
    RANKS,
    Lineage,
    Rank,
    lineage_order,
    lineage_runs,
    membership_matrix,
    top_taxa,
)


def _species(seed: int, n: int = 300) -> list[Lineage]:
    """Random lineages over few names per rank (so taxa share names across clades) with some names missing."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        names = [f"{'KPCOFG'[r]}{rng.integers(3)}" for r in range(6)]
        for r in range(1, 6):
            if rng.random() < 0.08:  # a missing rank in the middle or at the genus
                names[r] = None
        out.append(Lineage((*names, f"e{rng.integers(4)}")))
    unique = {lin.names: lin for lin in out}
    return list(unique.values())


def _dict_loop(probs: np.ndarray, species: list[Lineage], rank: Rank) -> dict:
    rows = []
    for row in probs:
        out: dict = defaultdict(float)
        for j, p in enumerate(row):
            if p and species[j].names[rank] is not None:
                out[species[j].key(rank)] += float(p)
        rows.append(out)
    return rows


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dense_and_sparse_roll_ups_equal_the_membership_product_and_the_dict_loop(seed: int) -> None:
    shuffled = _species(seed)
    species = [shuffled[i] for i in lineage_order(shuffled)]
    runs = lineage_runs(species)
    rng = np.random.default_rng(seed)
    probs = rng.random((7, len(species))).astype(np.float32)
    probs[probs < 0.6] = 0.0  # some species without probability, so the sparse input skips them
    probs[3] = 0.0  # and a row with none at all
    dense = runs.roll_up(probs)
    sparse = runs.roll_up(scipy.sparse.csr_matrix(probs))
    assert set(dense) == set(RANKS[:Rank.SPECIES])
    for rank in RANKS[:Rank.SPECIES]:
        membership = membership_matrix(species, rank)
        assert runs.rank(rank).taxa == membership.taxa  # the same columns in the same order
        np.testing.assert_allclose(dense[rank], membership.roll_up(probs), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(sparse[rank].toarray(), dense[rank], rtol=1e-6, atol=1e-6)
        column = {taxon: j for j, taxon in enumerate(membership.taxa)}
        for i, expected in enumerate(_dict_loop(probs, species, rank)):
            reference = np.zeros(len(column))
            for taxon, p in expected.items():
                reference[column[taxon]] = p
            np.testing.assert_allclose(dense[rank][i], reference, rtol=1e-5, atol=1e-6)
        best, value = top_taxa(dense[rank])
        sparse_best, sparse_value = top_taxa(sparse[rank])
        assert best.tolist() == sparse_best.tolist()
        np.testing.assert_allclose(sparse_value, value, rtol=1e-6)
        assert value[3] == 0.0
        chunked_best, chunked_value = runs.top(probs, chunk=3)[rank]  # float64 sums, a few images at a time
        assert chunked_best.tolist() == best.tolist()
        np.testing.assert_allclose(chunked_value, value, rtol=1e-6)


def test_a_species_without_a_name_at_a_rank_counts_toward_the_broader_ranks_only() -> None:
    species = [Lineage(("Animalia", "Chordata", "Aves", None, None, "Parus", "major")),
               Lineage(("Animalia", "Chordata", "Aves", "Passeriformes", "Paridae", "Parus", "major"))]
    species = [species[i] for i in lineage_order(species)]
    rolled = lineage_runs(species).roll_up(np.array([[0.25, 0.75]], dtype=np.float32))
    assert rolled[Rank.ORDER].tolist() == [[0.75]]  # the first has no order: its mass is in no order
    assert rolled[Rank.GENUS].tolist() == [[0.25, 0.75]]  # two genera Parus: their prefixes differ
    assert rolled[Rank.CLASS].tolist() == [[1.0]]


def test_species_out_of_lineage_order_are_refused() -> None:
    species = [Lineage.from_names("Animalia", "Chordata", "Aves", "A", "B", "Parus", "major"),
               Lineage.from_names("Plantae", "Tracheophyta", "Liliopsida", "A", "B", "C", "d"),
               Lineage.from_names("Animalia", "Chordata", "Aves", "A", "B", "Parus", "minor")]
    with pytest.raises(ValueError, match="not in lineage order"):
        lineage_runs(species)
    ordered = [species[i] for i in lineage_order(species)]
    assert [lin.names[0] for lin in ordered] == ["Animalia", "Animalia", "Plantae"]
    assert lineage_runs(ordered).rank(Rank.KINGDOM).taxa == (("Animalia",), ("Plantae",))


def test_genus_labels_roll_up_to_the_ranks_above_genus() -> None:
    genera = [Lineage.from_names("Animalia", "Chordata", "Aves", "Passeriformes", "Paridae", g) for g in "ABC"]
    runs = lineage_runs(genera, Rank.GENUS)
    assert [r.rank for r in runs.ranks] == list(reversed(RANKS[:Rank.GENUS]))
    assert runs.roll_up(np.array([[0.2, 0.3, 0.5]]))[Rank.FAMILY].tolist() == [[1.0]]


def test_kingdom_labels_have_no_rank_to_roll_up_to() -> None:
    from cladebench.tasks.streaming import stream_scores

    kingdoms = [Lineage.from_names(k) for k in ("Animalia", "Plantae")]
    runs = lineage_runs(kingdoms, Rank.KINGDOM)
    probs = np.array([[0.4, 0.6]])
    assert runs.ranks == () and runs.roll_up(probs) == {} and runs.top(probs) == {}
    streamed = stream_scores(np.eye(2, dtype=np.float32), np.eye(2, dtype=np.float32), 2, 10.0, runs=runs)
    assert streamed.rolled == {} and streamed.top_labels[:, 0].tolist() == [0, 1]


@pytest.mark.parametrize("seed", [0, 1])
def test_species_ends_are_where_each_taxon_stops_in_lineage_order(seed: int) -> None:
    species = _species(seed)
    ordered = [species[i] for i in lineage_order(species)]
    runs = lineage_runs(ordered)
    for rank_runs, ends in zip(runs.ranks, runs.species_ends(), strict=True):
        rank = rank_runs.rank
        keys = [lin.key(rank) for lin in ordered]
        expected = [i + 1 for i in range(len(keys)) if i + 1 == len(keys) or keys[i + 1] != keys[i]]
        assert ends.tolist() == expected, rank
        named = [j for j, end in enumerate(ends) if keys[end - 1][-1] is not None]
        assert rank_runs.named.tolist() == named, rank
