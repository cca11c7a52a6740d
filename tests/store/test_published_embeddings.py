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
    load_published_sidecar,
    published_metadata,
    published_sidecar_path,
    read_published_sidecar,
    unverified_note,
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
    ({"model": "imageomics/bioclip"}, None,
     "as embeddings of 'imageomics/bioclip', which is no spelling of bioclip-2 \\(id hf-hub:imageomics/bioclip-2\\)"),
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
        "recorded_in": [], "pinned": False, "verified": False, "unverified_reason": "no s was read"}
    assert published_sidecar_path(dataset.uri) is None
    sidecar = tmp_path / "data" / "challenges.embedding_models.json"
    sidecar.write_text(json.dumps([{"column": "emb_bioclip2", "revision": PIN}]))
    assert published_sidecar_path(dataset.uri) == sidecar
    assert read_published_sidecar(sidecar) == {"emb_bioclip2": {"column": "emb_bioclip2", "revision": PIN}}
    sidecar.write_text("[1, 2]")
    with pytest.raises(SchemaError, match="one entry"):
        read_published_sidecar(sidecar)


@pytest.mark.parametrize("revision", [f"{PIN}deadbeef", f"{PIN}-dirty", f"{PIN[:7]}-dirty", "v1" + PIN])
def test_a_revision_that_merely_starts_with_the_pin_is_another_revision(tmp_path, revision):
    dataset = _dataset(tmp_path, {"model": "imageomics/bioclip-2", "revision": revision})
    with pytest.raises(SchemaError, match="pins bioclip-2 at"):
        check_published_embeddings(dataset, sidecar={"emb_bioclip2": {"revision": revision}}, sidecar_name="s")


def test_the_pin_in_full_or_abbreviated_is_the_pin(tmp_path):
    for revision in (PIN, PIN.upper(), PIN[:7], PIN[:12]):
        dataset = _dataset(tmp_path / revision, {"model": "imageomics/bioclip-2", "revision": revision})
        checked = check_published_embeddings(dataset, sidecar={"emb_bioclip2": {"revision": PIN}}, sidecar_name="s")
        assert checked["emb_bioclip2"]["pinned"] and checked["emb_bioclip2"]["verified"]


@pytest.mark.parametrize(("sidecar", "absent", "why"), [
    (None, "there is no s", "there is no s"),
    ({}, None, "s has no entry for it (it is empty)"),
    ({"emb_other": {"revision": PIN}}, None, "s has no entry for it (its entries: emb_other)"),
    ({"emb_bioclip2": {"model": "imageomics/bioclip-2"}}, None, "s records no revision for it"),
])
def test_a_column_the_sidecar_does_not_vouch_for_is_kept_unverified(tmp_path, sidecar, absent, why):
    """The field metadata alone names the pin: the column is read, but as unverified, and the reason is kept."""
    dataset = _dataset(tmp_path, {"model": "imageomics/bioclip-2", "revision": PIN})
    checked = check_published_embeddings(dataset, sidecar=sidecar, sidecar_name="s", sidecar_absent=absent)
    entry = checked["emb_bioclip2"]
    assert (entry["pinned"], entry["verified"], entry["unverified_reason"]) == (True, False, why)
    note = unverified_note(checked)
    assert note is not None and "emb_bioclip2" in note and why in note and "\n" not in note
    assert unverified_note({"emb_bioclip2": {**entry, "verified": True, "unverified_reason": None}}) is None


def test_a_sidecar_that_is_a_folder_empty_or_missing_is_said_not_read(tmp_path):
    path = tmp_path / "challenges.embedding_models.json"
    assert load_published_sidecar(path, "s") == (None, "there is no s")
    path.mkdir()
    assert load_published_sidecar(path, "s") == (None, "s is a folder, not a file")
    path.rmdir()
    path.write_text("  \n")
    assert load_published_sidecar(path, "s") == ({}, None)
    path.write_text(json.dumps({"emb_bioclip2": {"revision": PIN}}))
    assert load_published_sidecar(path, "s") == ({"emb_bioclip2": {"revision": PIN}}, None)
