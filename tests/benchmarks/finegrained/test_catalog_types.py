"""A catalog whose rank columns are not names (numbers, lists: another table, or one written with the wrong
types) ends in one line naming the column, exit 4 (a schema error), from the CLI, before anything is written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cladebench.cli import main

ROWS = 4


def _catalog(folder: Path, **columns: list[object]) -> tuple[Path, Path]:
    table = {"uuid": [f"u{i}" for i in range(ROWS)], "kingdom": ["Animalia"] * ROWS, "phylum": ["Chordata"] * ROWS,
             "class": ["Mammalia"] * ROWS, "order": ["Rodentia"] * ROWS, "family": ["Cricetidae"] * ROWS,
             "genus": ["Peromyscus"] * ROWS, "species": ["maniculatus", "leucopus"] * (ROWS // 2),
             "source_url": [None] * ROWS, "image_path": [str(folder / f"{i}.jpg") for i in range(ROWS)]}
    table.update(columns)
    pq.write_table(pa.table(table), folder / "catalog.parquet")
    provenance = {"uuid": table["uuid"], "license_name": ["cc0-1.0"] * ROWS,
                  "license_link": ["https://creativecommons.org/publicdomain/zero/1.0/"] * ROWS}
    pq.write_table(pa.table(provenance), folder / "provenance.parquet")
    return folder / "catalog.parquet", folder / "provenance.parquet"


@pytest.mark.parametrize(("column", "values", "kind"), [
    ("species", list(range(ROWS)), "BIGINT"),
    ("genus", [["Peromyscus"]] * ROWS, "VARCHAR[]"),
    ("family", [1.5] * ROWS, "DOUBLE"),
])
def test_a_rank_column_that_is_not_text_is_a_schema_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          column: str, values: list[object], kind: str) -> None:
    catalog, provenance = _catalog(tmp_path, **{column: values})
    out = tmp_path / "out"
    code = main(["build", "fine-grained-challenges", str(catalog), "--provenance", str(provenance), "--out",
                 str(out), "--workers", "0", "--device", "cpu", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 4, err
    assert len(err.splitlines()) == 1 and f"column {column!r} is {kind}" in err
    assert not out.exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
