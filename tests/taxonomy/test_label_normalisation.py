"""Classes are taxa: names are NFC with single spaces, a taxon spelled in two cases is one label on every path
(label sets, the backbone), and labels that read alike across scripts are found."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cladebench.tasks.common import label_set
from cladebench.taxonomy import Lineage, Rank, lookalike_labels
from cladebench.taxonomy.backbone import backbone_species

UPPER = ("Animalia", "Chordata", "Mammalia", "Carnivora", "Felidae")


def test_names_are_nfc_with_single_spaces() -> None:
    decomposed = Lineage.from_names(*UPPER, "Felis", "Felis  cate\u0301us")  # two spaces, e + combining acute
    composed = Lineage.from_names(*UPPER, "Felis", "Felis cat\u00e9us")
    assert decomposed == composed and decomposed["species"] == "Felis cat\u00e9us"


def test_a_taxon_spelled_in_two_cases_is_one_label_and_both_rows_find_it() -> None:
    upper = Lineage.from_names(*UPPER, "Felis", "catus")
    lower = Lineage.from_names(*UPPER[:4], "FELIDAE", "felis", "catus")
    other = Lineage.from_names(*UPPER, "Lynx", "lynx")
    labels = label_set([upper, lower, other], Rank.SPECIES)
    assert len(labels) == 2 and labels.texts("sci") == ["Felis catus", "Lynx lynx"]
    index = labels.index_of()
    assert index[upper.match_key(Rank.SPECIES)] == index[lower.match_key(Rank.SPECIES)] == 0


def test_the_backbone_keeps_one_spelling_of_each_species(tmp_path: Path) -> None:
    rows = [(7, *UPPER, "Felis", "catus"), (3, *UPPER, "felis", "catus"),
            (5, *UPPER[:4], "Felidae ", "Felis", "catus"), (9, *UPPER, "Lynx", "lynx")]
    names = ["id", "kingdom", "phylum", "class", "order", "family", "genus", "specificEpithet"]
    table = pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})
    pq.write_table(table.append_column("taxonRank", pa.array(["species"] * len(rows))), tmp_path / "taxa.parquet")
    species = backbone_species(tmp_path / "taxa.parquet")
    # the lowest id's spelling, in lineage order (names as written: upper case first)
    assert [(s.taxon_id, s["species"]) for s in species] == [(9, "Lynx lynx"), (3, "felis catus")]


def test_labels_that_read_alike_across_scripts_are_found() -> None:
    texts = ["Felis catus", "Felis c\N{CYRILLIC SMALL LETTER A}tus", "F\N{GREEK CAPITAL LETTER EPSILON}lis x",
             "Felis x", "Lynx lynx"]
    assert lookalike_labels(texts) == [texts[:2], texts[2:4]]
    assert lookalike_labels(["Lynx lynx", "Lynx lynx"]) == []
