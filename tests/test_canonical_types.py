"""Tables that carry canonical columns among their own (readers' schemas, the entries of an ``organisms`` column)
type them as the store's canonical schema does, through :func:`cladebench.store.canonical_fields`.

Why: the organism struct was spelled by hand in three places (the synthetic world, the co-observed builder's
published layout, the co-observed reader) and the readers' schemas spelled the canonical columns again; a change
of a canonical type (``taxon_id``'s width, say) then had to be found in each. Several packages meet here, so the
module sits at the top of ``tests/``.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from cladebench import store
from cladebench.benchmarks.coobserved.builder.published import ORGANISM_TYPE as PUBLISHED_ORGANISM_TYPE
from cladebench.benchmarks.coobserved.source.columns import ORGANISM_TYPE as READ_ORGANISM_TYPE
from cladebench.benchmarks.coobserved.source.columns import READ_SCHEMA as COOBSERVED_READ_SCHEMA
from cladebench.benchmarks.crypticbio.source import READ_SCHEMA as CRYPTICBIO_READ_SCHEMA
from cladebench.benchmarks.inquire.source.columns import ANNOTATIONS_SCHEMA, RERANK_SCHEMA
from cladebench.synthetic import ORGANISM_TYPE as SYNTHETIC_ORGANISM_TYPE
from cladebench.taxonomy import RANK_COLUMNS

ORGANISM_TYPES = {"synthetic": SYNTHETIC_ORGANISM_TYPE, "published": PUBLISHED_ORGANISM_TYPE,
                  "read": READ_ORGANISM_TYPE}
READ_SCHEMAS = {"coobserved": COOBSERVED_READ_SCHEMA, "crypticbio": CRYPTICBIO_READ_SCHEMA,
                "inquire-rerank": RERANK_SCHEMA, "inquire-annotations": ANNOTATIONS_SCHEMA}


def test_canonical_fields_follow_the_schema() -> None:
    fields = store.canonical_fields("uuid", "taxon_id", *RANK_COLUMNS, "observed_on")
    assert [f.name for f in fields] == ["uuid", "taxon_id", *RANK_COLUMNS, "observed_on"]
    for f in fields:
        spec = store.CANONICAL_BY_NAME[f.name]
        assert f.type == spec.type and f.nullable is not spec.required, f
    assert fields[0].nullable is False and fields[1].type == pa.int64()
    with pytest.raises(KeyError):
        store.canonical_fields("not_a_column")


@pytest.mark.parametrize("name", sorted(ORGANISM_TYPES))
def test_every_organism_struct_types_its_canonical_fields_as_the_store(name: str) -> None:
    struct = ORGANISM_TYPES[name]
    canonical = [f for f in struct if f.name in store.CANONICAL_BY_NAME]
    assert {"taxon_id", *RANK_COLUMNS, "scientific_name"} <= {f.name for f in canonical}
    assert [(f.name, f.type) for f in canonical] == [(f.name, f.type) for f in
                                                     store.canonical_fields(*(f.name for f in canonical))]
    # The readers' organisms start with the synthetic world's fields, so a world's pair table reads as a source's.
    assert list(READ_ORGANISM_TYPE)[: len(SYNTHETIC_ORGANISM_TYPE)] == list(SYNTHETIC_ORGANISM_TYPE)


@pytest.mark.parametrize("name", sorted(READ_SCHEMAS))
def test_every_readers_schema_types_its_canonical_columns_as_the_store(name: str) -> None:
    schema = READ_SCHEMAS[name]
    canonical = [f for f in schema if f.name in store.CANONICAL_BY_NAME]
    assert len(canonical) >= 8
    assert canonical == store.canonical_fields(*(f.name for f in canonical))
