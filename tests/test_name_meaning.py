"""One meaning for a written name: the table in docs/reference.md ("What a written name means") read through every
caller that reads names: the parser itself, the backbone resolver, the camera-trap resolver, ``load images``'s
rank columns, ``build finegrained``'s challenge groups and the lineage answer parser."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cladebench.benchmarks.finegrained.builder.config import ChallengeGroup
from cladebench.benchmarks.finegrained.cameratrap.resolve import resolve_labels as cameratrap_resolve
from cladebench.curate.sources.images.labels import taxon_columns
from cladebench.curate.sources.images.records import ImageRecord
from cladebench.tasks.lineage.parse import parse_lineage_answer
from cladebench.taxonomy import Rank
from cladebench.taxonomy.names import parse_name
from cladebench.taxonomy.resolve import normalise_label, resolve_labels

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference.md"
LINEAGE = ("Animalia", "Chordata", "Mammalia", "Rodentia", "Cricetidae")


class Example(NamedTuple):
    written: str
    means: str
    rank: Rank | None
    qualifiers: tuple[str, ...]


def _table() -> list[Example]:
    """The rows of the reference's table, so the documentation and the test cannot drift apart."""
    text = REFERENCE.read_text(encoding="utf-8")
    section = text.split("### What a written name means", 1)[1].split("\n#", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            written = re.fullmatch(r"`(.*)`", cells[0])
            assert written is not None, line
            rank = Rank.parse(cells[2]) if cells[2] else None
            rows.append(Example(written.group(1), cells[1], rank, tuple(cells[3].split())))
    assert len(rows) >= 10, "the table of examples is missing from docs/reference.md"
    return rows


EXAMPLES = _table()


@pytest.fixture(scope="module")
def backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = [(1, *LINEAGE, "Peromyscus", None, "Peromyscus", "genus"),
            (2, *LINEAGE, "Peromyscus", "maniculatus", "Peromyscus maniculatus", "species")]
    names = ["id", "kingdom", "phylum", "class", "order", "family", "genus", "specificEpithet", "scientificName",
             "taxonRank"]
    path = tmp_path_factory.mktemp("backbone") / "backbone.parquet"
    pq.write_table(pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in rows]), path)
    return path


def _backbone_rank(example: Example) -> Rank | None:
    """The rank the backbone gives the name meant (None: the backbone has no such taxon)."""
    return {"peromyscus": Rank.GENUS, "peromyscus maniculatus": Rank.SPECIES}.get(example.means.lower())


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.written for e in EXAMPLES])
def test_every_caller_gives_a_written_name_the_same_meaning(example: Example, backbone: Path) -> None:
    meaning = parse_name(example.written)
    assert (meaning.name, meaning.rank, meaning.qualifiers) == (example.means, example.rank, example.qualifiers)
    assert normalise_label(example.written) == example.means.lower()

    expected_rank = _backbone_rank(example)
    assert example.rank is None or expected_rank is None or expected_rank == example.rank
    found = resolve_labels([example.written], backbone)[example.written]
    assert (found.rank, found.matched_name and found.matched_name.lower()) == (
        expected_rank, expected_rank and example.means.lower())

    group = ChallengeGroup("mice", Rank.GENUS, ("Peromyscus",))
    in_camera_trap = cameratrap_resolve([example.written], group, backbone)[example.written]
    assert (in_camera_trap.rank, in_camera_trap.in_group) == (expected_rank, expected_rank is not None)

    genus = "Peromyscus" if expected_rank is not None else None
    species = example.means if expected_rank is Rank.SPECIES else None
    columns = taxon_columns(ImageRecord(key="a.jpg", where="a.jpg", label=example.written), {example.written: found})
    assert (columns["genus"], columns["species"]) == (genus, species)

    as_group = ChallengeGroup("mice", expected_rank or Rank.GENUS, (example.written,))
    with duckdb.connect() as db:
        db.execute("CREATE TABLE catalog AS SELECT 'Peromyscus' AS genus, 'maniculatus' AS species")
        matched = db.execute(f"SELECT count(*) FROM catalog WHERE {as_group.condition()}").fetchall()
    assert matched == [(1,) if expected_rank is not None else (0,)]

    answer = parse_lineage_answer(f"Genus: Peromyscus\nSpecies: {example.written}", ["genus", "species"])
    assert answer.names["species"] == (example.means if len(example.means.split()) == 2 else None)
