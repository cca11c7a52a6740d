"""The image work the camera-trap builder shares with the Fine-Grained Challenges builder: originals fetched into
the download store, and files encoded as lossless WebP, by the FGC builder's functions (one way, two builders)."""

from __future__ import annotations

from pathlib import Path

from cladebench.benchmarks.finegrained.builder.images import encoded_files, fetch_originals
from cladebench.benchmarks.finegrained.cameratrap.fetching import ImageTask, encoded_images, gather_files
from cladebench.curate.fetch import DownloadConfig
from helpers.image_host import JPEG, PNG, image_host, ok


def test_fetch_originals_gives_files_failures_and_counts(tmp_path: Path) -> None:
    with image_host() as host:
        host.state.routes["/a.jpg"] = ok(JPEG)
        files, failed, counts = fetch_originals([("a", host.url("/a.jpg")), ("b", host.url("/b.jpg"))],
                                                tmp_path / "store", DownloadConfig(concurrency=1, progress=False))
    assert Path(files["a"]).read_bytes() == JPEG and set(files) == {"a"}
    assert set(failed) == {"b"} and ": " in failed["b"]
    assert counts["fetched"] == 1 and counts["failed"] == 1 and counts["cached"] == 0
    assert counts["download_dir"] == str(tmp_path / "store")


def test_camera_trap_gathering_uses_the_shared_fetch(tmp_path: Path) -> None:
    local = tmp_path / "here.jpg"
    local.write_bytes(JPEG)
    with image_host() as host:
        host.state.routes["/r.jpg"] = ok(PNG)
        tasks = [ImageTask("local", str(local)), ImageTask("gone", str(tmp_path / "gone.jpg")),
                 ImageTask("remote", host.url("/r.jpg")), ImageTask("lost", host.url("/lost.jpg"))]
        files, failed, counts = gather_files(tasks, tmp_path / "store", concurrency=2, progress=False)
    assert files["local"] == str(local) and Path(files["remote"]).read_bytes() == PNG
    assert set(failed) == {"gone", "lost"} and failed["gone"].startswith("file_missing: ")
    assert (counts["local"], counts["fetched"], counts["failed"]) == (2, 1, 1)


def test_both_builders_encode_alike_and_name_their_own_missing_file(tmp_path: Path) -> None:
    good, broken = tmp_path / "good.jpg", tmp_path / "broken.jpg"
    good.write_bytes(JPEG)
    broken.write_bytes(b"not an image at all")
    files = {"good": str(good), "broken": str(broken), "missing": str(tmp_path / "missing.jpg")}
    for workers in (0, 2):
        camera = dict(encoded_images(files, 64, workers))
        fgc = dict(encoded_files([(k, v, 64) for k, v in sorted(files.items())], workers))
        assert camera["good"] == fgc["good"] and max(camera["good"]["width"], camera["good"]["height"]) == 64
        assert camera["broken"]["reason"] == fgc["broken"]["reason"] == "image_decode_failed"
        assert camera["missing"]["reason"] == "image_not_retrieved"
        assert fgc["missing"]["reason"] == "image_file_missing"
        assert camera["missing"]["detail"] == fgc["missing"]["detail"]
