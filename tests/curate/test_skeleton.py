"""Every builder on the one skeleton: a rerun on the same raw input gives the same table (rows and fingerprint) and
the same left-out record, through the one driver (:func:`cladebench.curate.skeleton.run_build`). The builders and
their configs are found through ``BUILDERS``, as ``build <name>`` finds them."""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import yaml

from cladebench import store
from cladebench.curate.builders import get_builder
from cladebench.curate.skeleton import Builder, Run, Summary, run_build
from cladebench.curate.sources.images.build import ImagesLoad
from cladebench.store.left_out import LEFT_OUT_FILE
from cladebench.synthetic.inat_export import ExportConfig, write_export
from helpers.cameratrap_planted import jpeg, planted_collections
from helpers.images import picture
from helpers.own_images import write_small_backbone

MakeBuilder = Callable[[Path], Builder[object, object, Summary]]
"""A builder of the raw input written under a root, for an output folder."""
Rows = Callable[[Path, Summary], tuple[pa.Table, str]]
"""The table a build wrote (from its output folder and summary) and its fingerprint."""


def _stages(name: str, out: Path, *args: object, **options: object) -> Builder[object, object, Summary]:
    """The registered builder ``name``'s stages for its config made from ``args`` and ``options``."""
    builder = get_builder(name)
    return builder.stages(builder.config()(*args, out=out, **options))


def _lance_rows(_: Path, summary: Summary) -> tuple[pa.Table, str]:
    dataset = store.open_dataset(summary.dataset_path)
    return dataset.to_table(), store.fingerprint(dataset)


def _finegrained(root: Path) -> tuple[MakeBuilder, Rows]:
    rows, provenance = [], []
    for i in range(6):
        path = root / f"fgc{i}.jpg"
        path.write_bytes(jpeg(20 + i, (80, 60)))
        rows.append({"uuid": f"fgc-{i}", "kingdom": "Animalia", "phylum": "Chordata", "class": "Mammalia",
                     "order": "Rodentia", "family": "Cricetidae", "genus": "Peromyscus",
                     "species": ("maniculatus", "leucopus")[i % 2], "source_url": None, "image_path": str(path)})
        provenance.append({"uuid": f"fgc-{i}", "license_name": "cc0-1.0", "copyright_owner": "someone",
                           "license_link": "https://creativecommons.org/publicdomain/zero/1.0/"})
    pq.write_table(pa.Table.from_pylist(rows), root / "catalog.parquet")
    pq.write_table(pa.Table.from_pylist(provenance), root / "provenance.parquet")

    def make(out: Path) -> Builder[object, object, Summary]:
        return _stages("fine-grained-challenges", out, catalog=root / "catalog.parquet",
                       provenance=root / "provenance.parquet", per_species=2, workers=0, progress=False, device="cpu")
    return make, _lance_rows


def _coobserved(root: Path) -> tuple[MakeBuilder, Rows]:
    export = write_export(root, ExportConfig(n_photos=600, n_coobserved=24))

    def make(out: Path) -> Builder[object, object, Summary]:
        return _stages("inat-coobserved", out, export.export_dir, per_rank=3)

    def rows(_: Path, summary: Summary) -> tuple[pa.Table, str]:
        path = summary.data_path
        return pq.read_table(path), _sha256(path)
    return make, rows


def _crypticbio(root: Path) -> tuple[MakeBuilder, Rows]:
    names = ("Podarcis muralis", "Podarcis siculus", "Parus major")
    with open(root / "meta.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CRYPTICBIO_COLUMNS)
        writer.writeheader()
        for i in range(30):
            writer.writerow({"scientificName": names[i % 3], "year": "2020.0", "month": "5.0", "day": "17.0",
                             "decimalLatitude": "45.1", "decimalLongitude": "7.6",
                             "url": f"https://example.org/{i}.jpg", "kingdom": "Animalia", "phylum": "Chordata",
                             "class": "Squamata" if i % 3 < 2 else "Aves", "order": "", "family": "",
                             "genus": names[i % 3].split()[0], "vernacularName": "['a name']"})

    def make(out: Path) -> Builder[object, object, Summary]:
        path = out.parent / f"{out.name}.yaml"
        path.write_text(yaml.safe_dump({"dataset": {"metadata": str(root / "meta.csv"), "out": str(out),
                                                    "seed": 7}}), encoding="utf-8")
        builder = get_builder("crypticbio")
        return builder.stages(builder.config()(config=path))

    def rows(out: Path, _: Summary) -> tuple[pa.Table, str]:
        (written,) = sorted(out.glob("CrypticBio-*.csv"))
        return pacsv.read_csv(written), _sha256(written)
    return make, rows


def _images(root: Path) -> tuple[MakeBuilder, Rows]:
    source = root / "photos"
    for i, label in enumerate(("Morus bassanus", "Morus alba", "Sulidae", "Morus bassanus", "nothing known")):
        (source / label).mkdir(parents=True, exist_ok=True)
        (source / label / f"{i}.jpg").write_bytes(picture(i))
    (source / "Morus alba" / "broken.jpg").write_bytes(b"not an image")
    backbone = write_small_backbone(root / "backbone.parquet")

    def make(out: Path) -> Builder[object, object, Summary]:
        return ImagesLoad(source, out, taxonomy=backbone)
    return make, _lance_rows


CRYPTICBIO_COLUMNS = ("scientificName", "year", "month", "day", "decimalLatitude", "decimalLongitude", "url",
                      "kingdom", "phylum", "class", "order", "family", "genus", "vernacularName")
"""The columns of a published CrypticBio CSV."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


SETUPS = {"fine-grained-challenges": _finegrained, "inat-coobserved": _coobserved, "crypticbio": _crypticbio,
          "load images": _images}


def _twice(make: MakeBuilder, rows: Rows, root: Path) -> None:
    first, second = root / "first", root / "second"
    table, fingerprint = rows(first, run_build(make(first)))
    again, fingerprint_again = rows(second, run_build(make(second)))
    assert table.num_rows > 0
    assert again.equals(table)
    assert fingerprint_again == fingerprint
    assert pq.read_table(second / LEFT_OUT_FILE).equals(pq.read_table(first / LEFT_OUT_FILE))


@pytest.mark.parametrize("name", sorted(SETUPS))
def test_a_rerun_on_the_same_raw_input_gives_the_same_table(name: str, tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    make, rows = SETUPS[name](tmp_path / "raw")
    _twice(make, rows, tmp_path)


def test_a_camera_trap_rerun_gives_the_same_table(tmp_path: Path) -> None:
    with planted_collections(tmp_path) as (root, cohort, taxonomy, _):
        def make(out: Path) -> Builder[object, object, Summary]:
            return _stages("cameratrap", out, cohort=cohort, taxonomy=taxonomy, download_dir=root / "downloads",
                           workers=0, progress=False)
        _twice(make, _lance_rows, root)


def test_the_driver_counts_every_stage_and_leaves_nothing_on_failure(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    make, _ = _finegrained(tmp_path / "raw")
    builder = make(tmp_path / "out")
    seen: list[Run] = []

    class Failing:
        writer, progress = builder.writer, False

        def target(self):
            return builder.target()

        def read(self, run: Run):
            seen.append(run)
            return builder.read(run)

        def choose(self, read, run: Run):
            return builder.choose(read, run)

        def write(self, chosen, run: Run):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_build(Failing())
    assert seen[0].counts == {"read": 6, "choose": 4}
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
