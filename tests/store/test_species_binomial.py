"""``species`` holds the binomial (schema version 2); a dataset written before, with the epithet in ``species``,
reads as if it held the binomial and gives the same numbers."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.errors import SchemaError
from cladebench.evaluate.configs import FewShotEvalConfig
from cladebench.evaluate.run import run_eval
from cladebench.store.species import SPECIES_EXPRESSION, binomial_species, holds_epithets, species_filter

GENERA = {"Felis": ("catus", "silvestris lybica", "margarita"), "Panthera": ("leo", "pardus", "onca")}
PER_SPECIES = 6


def _rows(binomial: bool) -> pa.Table:
    rng = np.random.default_rng(3)
    genus, species, scientific, vectors = [], [], [], []
    for g, epithets in GENERA.items():
        for e in epithets:
            centre = rng.normal(size=8)
            for _ in range(PER_SPECIES):
                genus.append(g)
                species.append(f"{g} {e}" if binomial else e)
                scientific.append(f"{g} {e}")
                vectors.append(centre + 0.3 * rng.normal(size=8))
    n = len(genus)
    field = store.embedding_field("emb_toy", 8, {"model": "toy-model"})
    return pa.table({
        "uuid": [f"u{i:03d}" for i in range(n)],
        "image": pa.array([b"x"] * n, pa.large_binary()),
        "kingdom": ["Animalia"] * n, "family": ["Felidae"] * n, "genus": genus, "species": species,
        "scientific_name": scientific,
        "emb_toy": pa.array([v.astype(np.float32).tolist() for v in vectors], field.type),
    }).cast(pa.schema([*[pa.field(n, t) for n, t in zip(
        ["uuid", "image", "kingdom", "family", "genus", "species", "scientific_name"],
        [pa.string(), pa.large_binary(), *[pa.string()] * 5], strict=True)], field]))


@pytest.fixture()
def datasets(tmp_path: Path) -> tuple[lance.LanceDataset, lance.LanceDataset]:
    new = store.write_dataset(_rows(binomial=True), tmp_path / "new.lance")
    # As an older cladebench wrote it: the epithet in species, schema version 1.
    old_table = _rows(binomial=False)
    old_table = old_table.replace_schema_metadata({store.SCHEMA_METADATA_KEY: b"1"})
    old = lance.write_dataset(old_table, str(tmp_path / "old.lance"))
    return new, old


def test_a_new_dataset_holds_binomials_and_an_old_one_is_detected(datasets) -> None:
    new, old = datasets
    assert new.schema.metadata[store.SCHEMA_METADATA_KEY] == b"2"
    assert "Felis silvestris lybica" in new.to_table(columns=["species"]).column(0).to_pylist()
    assert not holds_epithets(new)
    assert holds_epithets(old)
    assert "silvestris lybica" in old.to_table(columns=["species"]).column(0).to_pylist()  # as stored


def test_the_writer_turns_epithets_into_binomials(tmp_path: Path) -> None:
    written = store.write_dataset(_rows(binomial=False), tmp_path / "from-epithets.lance")
    assert written.to_table(columns=["species"]).column(0).to_pylist() == _rows(True).column("species").to_pylist()
    tautonym = pa.table({"uuid": ["a", "b", "c"], "image": pa.array([b"x"] * 3, pa.large_binary()),
                         "genus": ["Gorilla", "Gorilla", None], "species": ["gorilla", "Gorilla gorilla", "catus"]})
    species = store.write_dataset(tautonym, tmp_path / "t.lance").to_table(columns=["species"]).column(0)
    assert species.to_pylist() == ["Gorilla gorilla", "Gorilla gorilla", "catus"]


def test_reading_an_old_dataset_gives_binomials_in_columns_and_filters(datasets) -> None:
    new, old = datasets
    for columns in (["uuid", "species"], ["species"], None):
        got = store.read(old, columns=columns)
        want = store.read(new, columns=columns)
        assert got.column("species").to_pylist() == want.column("species").to_pylist()
        assert columns is None or got.column_names == columns  # genus read to build the binomial, not handed back
    where = "species = 'Felis silvestris lybica' OR (species LIKE 'Panthera %' AND genus = 'Panthera')"
    assert store.read(old, where=where).column("uuid").to_pylist() == \
        store.read(new, where=where).column("uuid").to_pylist() != []
    assert store.fingerprint(old, where=where) == store.fingerprint(new, where=where)
    assert species_filter("name = 'species' AND `species` = 'x' AND organism.species = 'y'") == (
        f"name = 'species' AND ({SPECIES_EXPRESSION}) = 'x' AND organism.species = 'y'")


def test_subset_of_an_old_dataset_is_a_new_one(datasets, tmp_path: Path) -> None:
    _, old = datasets
    copy = store.subset(old.uri, tmp_path / "copy.lance", where="species = 'Felis catus'", columns=["species"])
    assert copy.schema.metadata[store.SCHEMA_METADATA_KEY] == b"2"
    assert copy.schema.names == ["uuid", "species"]
    assert set(copy.to_table().column("species").to_pylist()) == {"Felis catus"}
    assert copy.count_rows() == PER_SPECIES
    assert not holds_epithets(copy)


def test_appending_to_an_old_dataset_is_refused(datasets, tmp_path: Path) -> None:
    _, old = datasets
    with pytest.raises(SchemaError, match="before `species` held the binomial"):
        store.append(_rows(binomial=True).slice(0, 1).set_column(0, "uuid", pa.array(["extra"])), old.uri)
    # A copy in append mode is an append too (it went through, mixing a binomial into the epithets).
    extra = lance.write_dataset(old.to_table(limit=1).set_column(0, "uuid", pa.array(["extra"])),
                                str(tmp_path / "extra.lance"))
    with pytest.raises(SchemaError, match="before `species` held the binomial"):
        store.subset(extra.uri, old.uri, mode="append")
    assert lance.dataset(old.uri).count_rows() == len(_rows(False))


def test_eval_on_an_old_dataset_equals_eval_on_the_same_data_written_today(datasets, tmp_path: Path) -> None:
    new, old = datasets
    records = {}
    for name, dataset in (("new", new), ("old", old)):
        config = FewShotEvalConfig(dataset=dataset.uri, out=tmp_path / name, column="emb_toy", shots=(1, 2),
                                   repetitions=3, methods=("simpleshot", "knn"), group_by="genus",
                                   breakdown=("species",), where="species <> 'Felis margarita'")
        records[name], _ = run_eval(config)
    new_metrics, old_metrics = records["new"].metrics, records["old"].metrics
    assert new_metrics == old_metrics
    assert any("species=Felis catus" in name for name in new_metrics)  # breakdowns name the binomial
    assert not any("margarita" in name for name in new_metrics)  # the filter meant the binomial on both


# --- hostile species values ------------------------------------------------------------------------------

HOSTILE = [  # (genus, species as stored in a version-1 or unversioned dataset) -> the binomial read
    (("Felis", "catus"), "Felis catus"),
    (("Felis", "Felis silvestris"), "Felis silvestris"),  # already a binomial: not "Felis Felis silvestris"
    (("Felis", "silvestris lybica"), "Felis silvestris lybica"),  # subspecies
    (("Gorilla", "gorilla gorilla"), "Gorilla gorilla gorilla"),  # an epithet that starts like the genus
    (("Felis", ""), ""), (("Felis", "   "), "   "),  # blank: never "Felis " or "Felis    "
    ((None, "catus"), "catus"),  # genus null: the epithet alone
    (("Felis", None), None),  # genus-only row
    (("Felis", "sp."), "Felis sp."), (("Felis", "× hybrida"), "Felis × hybrida"),
    (("Épervier", "épervier"), "Épervier épervier"),
]


def _hostile_table() -> pa.Table:
    n = len(HOSTILE)
    return pa.table({"uuid": [f"h{i}" for i in range(n)], "image": pa.array([b"x"] * n, pa.large_binary()),
                     "genus": pa.array([g for (g, _), _ in HOSTILE], pa.string()),
                     "species": pa.array([s for (_, s), _ in HOSTILE], pa.string())})


def test_hostile_species_of_an_old_dataset_read_the_same_in_arrow_and_in_filters(tmp_path: Path) -> None:
    old = lance.write_dataset(_hostile_table().replace_schema_metadata({store.SCHEMA_METADATA_KEY: b"1"}),
                              str(tmp_path / "old.lance"))
    assert holds_epithets(old)
    want = [binomial for _, binomial in HOSTILE]
    assert store.read(old, columns=["species"]).column(0).to_pylist() == want
    assert binomial_species(_hostile_table()).column("species").to_pylist() == want
    assert old.to_table(columns={"b": SPECIES_EXPRESSION}).column("b").to_pylist() == want  # Lance's SQL agrees
    for binomial in {b for b in want if b and b.strip()}:
        hits = store.read(old, columns=["species"], where=f"species = {store.sql_literal(binomial)}")
        assert set(hits.column(0).to_pylist()) == {binomial}, binomial


def test_an_unversioned_dataset_of_binomials_with_one_epithet_row_keeps_its_binomials(tmp_path: Path) -> None:
    """Another tool's table: binomials, and one 'sp.' row that makes it look like an old dataset."""
    table = pa.table({"uuid": ["a", "b", "c"], "image": pa.array([b"x"] * 3, pa.large_binary()),
                      "genus": ["Felis"] * 3, "species": ["Felis catus", "Felis catus", "sp."]})
    other = lance.write_dataset(table, str(tmp_path / "other.lance"))
    assert holds_epithets(other)
    assert store.read(other, columns=["species"]).column(0).to_pylist() == ["Felis catus", "Felis catus", "Felis sp."]
    assert store.read(other, where="species = 'Felis catus'").num_rows == 2
    copy = store.subset(other.uri, tmp_path / "copy.lance", where="species = 'Felis catus'")
    assert copy.count_rows() == 2


def test_the_writer_leaves_a_blank_species_blank(tmp_path: Path) -> None:
    written = store.write_dataset(_hostile_table(), tmp_path / "hostile.lance")
    species = written.to_table(columns=["species"]).column(0).to_pylist()
    assert species[4:6] == ["", "   "]  # not "Felis " and "Felis    "
    assert species[:4] == ["Felis catus", "Felis silvestris", "Felis silvestris lybica", "gorilla gorilla"]
    assert species[6:] == ["catus", None, "Felis sp.", "Felis × hybrida", "Épervier épervier"]
