"""Labels as written in the wild: an accent typed as a combining mark, a zero-width space pasted from a web page,
a Cyrillic letter inside a Latin binomial. The first two are the same name and join its class; the third is a
different string that reads alike, said in one warning line per name naming its rows, twin or not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.cli import main

CYRILLIC_A, CYRILLIC_IE = "\N{CYRILLIC SMALL LETTER A}", "\N{CYRILLIC SMALL LETTER IE}"


def _write(path: Path, names: list[str]) -> Path:
    n = len(names)
    vectors = np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32)
    table = pa.table({"uuid": [f"u{i:02d}" for i in range(n)],
                      "image": pa.array([bytes([i]) for i in range(n)], pa.large_binary()),
                      "genus": [name.split()[0] for name in names], "species": names, "scientific_name": names})
    field = store.embedding_field("toy", 4, {"model": "toy-model"})
    store.write_dataset(table.append_column(field, pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 4)),
                        path)
    return path


def test_nfd_and_zero_width_join_their_class_and_every_mixed_script_name_is_warned(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = (["Felis cat\u00e9us"] * 4 + ["Felis cate\u0301us"] * 2 + ["Felis cat\u200b\u00e9us"] * 2
             + ["Lynx lynx"] * 8
             + [f"Felis cat{CYRILLIC_A}us"]  # no twin among the labels: "Felis catus" is not there
             + [f"Lynx lynx{CYRILLIC_IE}"] * 2)  # a word no other name has either, on two rows
    path = _write(tmp_path / "scripts.lance", names)
    code = main(["eval", "fewshot", str(path), "--column", "emb_toy", "--out", str(tmp_path / "run"), "--shots", "1",
                 "--group-by", "none"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0, out
    # the accented name in three spellings is one class of 8; the one-row mixed name is too small for a shot
    assert out[0].endswith("(3 labels; 18 images)"), out
    warnings = [line for line in out if line.startswith("warning:")]
    assert len(warnings) == 2, out
    assert f"'Felis cat{CYRILLIC_A}us'" in warnings[0] and "U+0430" in warnings[0] and warnings[0].endswith(
        "1 row(s): u16"), warnings
    assert "U+0435" in warnings[1] and warnings[1].endswith("2 row(s): u17, u18"), warnings


def test_a_label_file_line_with_a_zero_width_space_names_the_benchmark_s_taxon(tmp_path: Path) -> None:
    from cladebench.tasks.common import label_set_from_file
    from cladebench.taxonomy import Lineage, Rank

    labels = tmp_path / "labels.txt"
    labels.write_text("Felis\u200b catus\nLynx lyn\u00ADx\n", encoding="utf-8")
    benchmark = [Lineage.from_names("Animalia", "Chordata", "Mammalia", "Carnivora", "Felidae", "Felis", "catus"),
                 Lineage.from_names("Animalia", "Chordata", "Mammalia", "Carnivora", "Felidae", "Lynx", "lynx")]
    assert label_set_from_file(labels, Rank.SPECIES, benchmark).texts("sci") == ["Felis catus", "Lynx lynx"]
