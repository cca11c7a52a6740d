"""Taxon completion for reviewers: the dataset's taxa at every rank first, a backbone's after, "not identifiable"."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cladebench.taxonomy import Lineage, Rank
from cladebench.taxonomy.complete import BACKBONE, DATASET, NOT_IDENTIFIABLE, TaxonIndex

MOUSE = Lineage.from_names("Animalia", "Chordata", "Mammalia", "Rodentia", "Cricetidae", "Peromyscus",
                           "Peromyscus maniculatus")
VOLE = Lineage.from_names("Animalia", "Chordata", "Mammalia", "Rodentia", "Cricetidae", "Microtus")  # genus only


def _backbone(path: Path) -> Path:
    upper = ["Animalia", "Chordata", "Mammalia", "Rodentia", "Cricetidae"]
    rows = [
        (1, *upper, "Peromyscus", "maniculatus", "Peromyscus maniculatus", "species"),
        (2, *upper, "Peromyscus", "leucopus", "Peromyscus leucopus", "species"),
        (3, *upper, "Peromyscus", None, "Peromyscus", "genus"),
        (4, *upper, "Peromyscus", "leucopus", "Peromyscus leucopus noveboracensis", "subspecies"),
        (5, "Animalia", "Chordata", "Mammalia", "Carnivora", "Felidae", "Felis", "catus", "Felis catus", "species"),
        (6, "Animalia", "Chordata", "Mammalia", "Carnivora", "Felidae", None, None, "Felidae", "family"),
    ]
    names = ["id", "kingdom", "phylum", "class", "order", "family", "genus", "specificEpithet", "scientificName",
             "taxonRank"]
    pq.write_table(pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)}), path)
    return path


def test_dataset_taxa_at_every_rank_with_their_lineage() -> None:
    index = TaxonIndex([MOUSE, VOLE])
    found = index.complete("CRIC")
    assert [(m.name, m.rank, m.source) for m in found] == [("Cricetidae", Rank.FAMILY, DATASET)]
    assert found[0].lineage == MOUSE.truncate(Rank.FAMILY)
    # a later word of a name matches: the epithet finds the binomial
    assert [m.name for m in index.complete("manic")] == ["Peromyscus maniculatus"]
    # broader ranks first, then by name
    assert [m.name for m in index.complete("m")] == ["Mammalia", "Microtus", "Peromyscus maniculatus"]
    assert [m.name for m in index.complete("m", rank="genus")] == ["Microtus"]
    assert index.complete("  ") == [] and index.complete("zzz") == []


def test_backbone_taxa_follow_the_dataset_taxa_without_repeating_them(tmp_path: Path) -> None:
    index = TaxonIndex([MOUSE], backbone=_backbone(tmp_path / "taxa.parquet"))
    found = index.complete("peromyscus")
    assert [(m.name, m.rank, m.source) for m in found] == [
        ("Peromyscus", Rank.GENUS, DATASET), ("Peromyscus maniculatus", Rank.SPECIES, DATASET),
        ("Peromyscus leucopus", Rank.SPECIES, BACKBONE)]  # subspecies are not one of the seven ranks
    assert found[2].lineage == MOUSE.replace(species="Peromyscus leucopus")
    felidae = index.complete("feli")
    assert [(m.name, m.rank) for m in felidae] == [("Felidae", Rank.FAMILY), ("Felis catus", Rank.SPECIES)]
    assert felidae[0].lineage is not None and felidae[0].lineage.names[Rank.ORDER] == "Carnivora"
    assert [m.name for m in index.complete("feli", limit=1)] == ["Felidae"]


def test_not_identifiable_is_offered_first_to_whoever_types_it() -> None:
    index = TaxonIndex([MOUSE, Lineage.from_names("Animalia", "Chordata", "Aves", "Passeriformes", "Nothidae")])
    assert [m.name for m in index.complete("no")] == [NOT_IDENTIFIABLE, "Nothidae"]
    assert [m.name for m in index.complete("ident")] == [NOT_IDENTIFIABLE]
    assert index.complete("not")[0].to_dict() == {"name": NOT_IDENTIFIABLE, "rank": None, "lineage": None,
                                                 "source": "verdict"}
    assert index.complete("no", rank="family")[0].name == "Nothidae"  # a rank asked for: taxa only
