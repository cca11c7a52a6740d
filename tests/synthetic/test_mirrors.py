"""Mirrors of the published benchmarks from the synthetic world: each in its published layout, read by the same
readers as the published files, the FGC embeddings recorded at the pinned revisions in field metadata and sidecar."""

from __future__ import annotations

import json

import pytest

from cladebench import store
from cladebench.benchmarks.coobserved.source import read_inat_coobserved
from cladebench.benchmarks.crypticbio.source import read_crypticbio
from cladebench.benchmarks.inquire.source import read_inquire_rerank
from cladebench.store.embeddings import check_published_embeddings, read_published_sidecar
from cladebench.synthetic.mirrors import write_mirrors


@pytest.fixture(scope="module")
def mirrors(tmp_path_factory):
    return write_mirrors(tmp_path_factory.mktemp("mirrors"), photo_base_url="http://127.0.0.1:9")


def test_every_benchmark_gets_a_folder_read_by_its_published_readers(mirrors):
    folders = mirrors.folders
    assert set(folders) == {"fine-grained-challenges", "test-fine-grained-challenges", "crypticbio-common",
                            "crypticbio-commonunseen", "crypticbio-endangered", "crypticbio-invasive",
                            "inquire-rerank", "inat-coobserved"}
    rerank = read_inquire_rerank(folders["inquire-rerank"])
    assert set(rerank.column("split").to_pylist()) == {"test", "val"} and any(rerank.column("relevant").to_pylist())
    pairs = read_inat_coobserved(folders["inat-coobserved"])
    assert pairs.num_rows == 12 and all(len(o) == 2 for o in pairs.column("organisms").to_pylist())
    csv = folders["crypticbio-common"] / "CrypticBio-Benchmark" / "CrypticBio-Common.csv"
    rows = read_crypticbio(csv, lookup=folders["crypticbio-common"] / "cryptic_groups.tsv")
    assert rows.column("cryptic_group").null_count == 0 and rows.column("taxonomic_group").null_count == 0
    urls = rows.column("source_url").to_pylist()
    assert {u.removeprefix("http://127.0.0.1:9") for u in urls} <= set(mirrors.photos)


def test_fgc_mirrors_record_the_pinned_revisions_twice(mirrors):
    for name, columns in (("fine-grained-challenges", {"emb_bioclip", "emb_bioclip2", "emb_bioclip2p5"}),
                          ("test-fine-grained-challenges", {"emb_bioclip2"})):
        folder = mirrors.folders[name]
        dataset = store.open_dataset(folder / "data" / "challenges.lance")
        sidecar = read_published_sidecar(folder / "data" / "challenges.embedding_models.json")
        checked = check_published_embeddings(dataset, sidecar=sidecar, sidecar_name="sidecar")
        assert set(checked) == set(sidecar) == columns
        assert all(entry["pinned"] and len(entry["recorded_in"]) == 2 for entry in checked.values())
        for column in columns:
            field = dataset.schema.field(column)
            assert str(field.type) == "list<item: halffloat>"
            assert json.loads(field.metadata[b"dim"]) == sidecar[column]["dim"]
        groups = store.read(dataset, columns=["challenge_group"]).column(0).to_pylist()
        assert len(set(groups)) == 3
