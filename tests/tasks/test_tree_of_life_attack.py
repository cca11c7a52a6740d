"""Tree-of-life label sets given badly, and datasets that name fewer ranks than the labels: pybioclip files of the
wrong dtype, with non-finite vectors, JSON nested without end, an entry naming nothing or an empty .npy are each
one line and their exit code (never a bug's 70); a dataset with only genus and species is scored as its full
lineages would be, a homonym in another kingdom leaving a row as it is."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pytest

from cladebench import store
from cladebench.tasks.common import LabelSet
from cladebench.tasks.tree_of_life import complete_from_labels
from cladebench.taxonomy import Lineage, Rank
from helpers.tree_of_life_world import pybioclip_entries, write_pybioclip, write_world


def test_rows_are_completed_from_the_labels_only_where_one_lineage_fits() -> None:
    labels = [Lineage(("Animalia", "P", "C", "O", "F", "Alpha", "Alpha one")),
              Lineage(("Animalia", "P", "C", "O", "F", "Alpha", "Alpha two")),
              Lineage(("Animalia", "P", "C", "O", "G", "Beta", "Beta one")),
              Lineage(("Plantae", "Q", "D", "R", "H", "Beta", "Beta two"))]  # Beta: a homonym across kingdoms
    label_set = LabelSet(rank=Rank.SPECIES, taxa=tuple(lin.names for lin in labels), lineages=tuple(labels))
    rows = [Lineage.from_names(None, None, None, None, None, "Alpha", "Alpha two"),  # completed
            Lineage.from_names(None, None, None, None, None, "Alpha"),  # genus-only, one Alpha: completed
            Lineage.from_names(None, None, None, None, None, "Beta"),  # two kingdoms' Beta: left
            Lineage.from_names("Plantae", None, None, None, None, "Beta"),  # the kingdom decides: completed
            Lineage.from_names(None, None, None, None, "X", "Alpha", "Alpha one"),  # another family: left
            labels[2]]  # already a label: left
    out, completed = complete_from_labels(rows, label_set)
    assert out[0].names == labels[1].names and out[1].key(Rank.GENUS) == labels[0].key(Rank.GENUS)
    assert out[1].names[Rank.SPECIES] is None
    assert out[2] is rows[2] and out[4] is rows[4] and out[5] is rows[5]
    assert out[3].key(Rank.GENUS) == labels[3].key(Rank.GENUS)
    assert completed == 3


pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.cli import main  # noqa: E402
from cladebench.evaluate.record import RunRecord  # noqa: E402


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, tiny_model: str) -> tuple[Path, Path, list[Lineage], int]:
    path, backbone, species = write_world(tmp_path_factory.mktemp("tree-of-life-attack"), tiny_model)
    width = lance.dataset(str(path)).schema.field("emb_tiny").type.list_size
    return path, backbone, species, width


def _eval(path: Path, model: str, labels: Path, out: Path, *extra: str) -> int:
    return main(["eval", "zeroshot", str(path), "--model", model, "--labels", str(labels), "--out", str(out),
                 "--device", "cpu", "--group-by", "none", *extra])


BAD_FILES = {
    "int": (lambda v, e: (v.astype(np.int32), e, None), 4, "holds int32 values, not floating-point"),
    "complex": (lambda v, e: (v.astype(np.complex64), e, None), 4, "not floating-point"),
    "nan": (lambda v, e: (np.where(np.arange(v.shape[1]) == 3, np.nan, v).astype(np.float32), e, None), 4,
            "entry 3 is not finite"),
    "inf": (lambda v, e: (np.where(np.arange(v.shape[1]) == 5, np.inf, v).astype(np.float32), e, None), 4,
            "entry 5 is not finite"),
    "deep json": (lambda v, e: (v, None, "[" * 100_000 + "]" * 100_000), 4, "nested too deep"),
    "entry naming nothing": (lambda v, e: (v, [[[None] * 7, None], *e[1:]], None), 4, "entry 0 names no taxon"),
    "empty npy": (lambda v, e: (None, e, None), 1, "not a readable .npy file"),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_bad_pybioclip_files_are_one_line_and_their_exit_code(world, tiny_model, tmp_path, capsys, monkeypatch,
                                                              case) -> None:
    path, _, species, width = world
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    make, code, message = BAD_FILES[case]
    vectors = np.random.default_rng(0).normal(size=(width, len(species))).astype(np.float32)
    vectors, entries, raw = make(vectors, pybioclip_entries(species))
    folder = write_pybioclip(tmp_path / "published", vectors, entries, raw_json=raw)
    if vectors is None:
        (folder / "txt_emb_species.npy").write_bytes(b"")
    assert _eval(path, tiny_model, folder, tmp_path / "run") == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "run" / "run.json").exists()
    assert not list((tmp_path / "cache").rglob("*.tmp")), "no half-written label set is left in the cache"


def test_a_dataset_naming_only_genus_and_species_is_scored_as_its_full_lineages(world, tiny_model, tmp_path, capsys,
                                                                               monkeypatch) -> None:
    path, backbone, _, _ = world
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    table = lance.dataset(str(path)).to_table()
    partial = tmp_path / "partial.lance"
    store.write_dataset(table.drop_columns(["kingdom", "phylum", "class", "order", "family"]), partial)
    assert _eval(path, tiny_model, backbone, tmp_path / "full", "--column", "emb_tiny") == 0, capsys.readouterr().err
    assert _eval(partial, tiny_model, backbone, tmp_path / "partial", "--column", "emb_tiny") == 0, \
        capsys.readouterr().err
    full, part = RunRecord.read(tmp_path / "full"), RunRecord.read(tmp_path / "partial")
    assert part.metrics == full.metrics and part.metrics["top1_species"]["n"] > 0
    assert part.provenance["label_set"]["rows_completed_from_labels"] == table.num_rows
    assert full.provenance["label_set"]["rows_completed_from_labels"] == 0
    assert (part.predictions(tmp_path / "partial").drop_columns(["uuid"]).to_pylist()
            == full.predictions(tmp_path / "full").drop_columns(["uuid"]).to_pylist())
