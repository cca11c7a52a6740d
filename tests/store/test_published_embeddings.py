"""Published embedding columns: the model and revision a publisher records (field metadata, sidecar) read as
cladebench's, and checked against the pins: another revision, another model or two records that disagree are
refused in one line; an abbreviated commit is the same commit; no record at all is kept as unpinned."""

from __future__ import annotations

import json

import lance
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.errors import SchemaError
from cladebench.models.registry import resolve_model
from cladebench.store.embeddings import (
    check_published_embeddings,
    published_metadata,
    published_sidecar_path,
    read_published_sidecar,
)

PIN = resolve_model("bioclip-2").revision


def _dataset(tmp_path, metadata):
    field = pa.field("emb_bioclip2", pa.list_(pa.float16()), metadata=metadata)
    table = pa.table({"uuid": ["a", "b"], "emb_bioclip2": pa.array([[1.0, 0.0], [0.0, 1.0]], field.type)},
                     schema=pa.schema([pa.field("uuid", pa.string()), field]))
    return lance.write_dataset(table, tmp_path / "data" / "challenges.lance")


def test_recorded_revisions_are_read_and_checked(tmp_path):
    dataset = _dataset(tmp_path, {"model": "imageomics/bioclip-2", "revision": PIN[:7]})
    checked = check_published_embeddings(dataset, sidecar={"emb_bioclip2": {"revision": PIN}}, sidecar_name="s")
    assert checked["emb_bioclip2"]["revision"] == PIN[:7] and checked["emb_bioclip2"]["pinned"]
    meta = published_metadata("emb_bioclip2", store.embedding_metadata(dataset.schema.field("emb_bioclip2")))
    assert meta["model"] == "hf-hub:imageomics/bioclip-2" and meta["revision"] == PIN[:7]
    assert published_metadata("emb_other", {}) == {}


@pytest.mark.parametrize(("metadata", "sidecar", "message"), [
    ({"revision": "feedface00"}, None, "pins bioclip-2 at"),
    ({"model": "imageomics/bioclip"}, None, "as embeddings of imageomics/bioclip"),
    ({"revision": PIN}, {"emb_bioclip2": {"revision": "feedface00"}}, "the release is inconsistent"),
])
def test_another_revision_or_model_is_refused(tmp_path, metadata, sidecar, message):
    dataset = _dataset(tmp_path, metadata)
    with pytest.raises(SchemaError, match=message) as error:
        check_published_embeddings(dataset, sidecar=sidecar, sidecar_name="s")
    assert "\n" not in str(error.value)


def test_no_record_is_kept_unpinned_and_the_sidecar_is_found_beside_the_table(tmp_path):
    dataset = _dataset(tmp_path, None)
    assert check_published_embeddings(dataset, sidecar=None, sidecar_name="s")["emb_bioclip2"] == {
        "model": "hf-hub:imageomics/bioclip-2", "alias": "bioclip-2", "revision": None, "pinned_revision": PIN,
        "recorded_in": [], "pinned": False}
    assert published_sidecar_path(dataset.uri) is None
    sidecar = tmp_path / "data" / "challenges.embedding_models.json"
    sidecar.write_text(json.dumps([{"column": "emb_bioclip2", "revision": PIN}]))
    assert published_sidecar_path(dataset.uri) == sidecar
    assert read_published_sidecar(sidecar) == {"emb_bioclip2": {"column": "emb_bioclip2", "revision": PIN}}
    sidecar.write_text("[1, 2]")
    with pytest.raises(SchemaError, match="one entry"):
        read_published_sidecar(sidecar)
