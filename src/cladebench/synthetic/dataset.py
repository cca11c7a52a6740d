"""The synthetic world's observations and two-organism photos as canonical tables, ready for the store.

Why it exists: every consumer of the world (the store, the builders, the tasks' tests, the demo) takes
it as Arrow tables in the canonical schema (:func:`cladebench.store.conform` accepts them unchanged),
with the world's provenance in the schema metadata; this module writes them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from cladebench.store.schema import canonical_fields
from cladebench.synthetic.records import CoObservation, Observation, Species
from cladebench.synthetic.render import encode_image, format_key
from cladebench.taxonomy import RANK_COLUMNS, RANKS, Lineage, Rank

if TYPE_CHECKING:
    from PIL import Image

SOURCE_DATASET = "synthetic"
"""Value of ``source_dataset`` in every table this module writes."""
SCHEMA_METADATA_KEY = b"cladebench.synthetic"
"""Schema metadata key under which tables carry the world's provenance as JSON."""

ORGANISM_TYPE = pa.struct([
    pa.field("observation_uuid", pa.string()),
    *canonical_fields("taxon_id", *RANK_COLUMNS, "scientific_name", "common_name"),
])
"""Arrow type of one entry of a pair table's ``organisms`` column: the organism's observation, then its canonical
columns, typed by the store's schema."""


class WorldTables:
    """The tables of a world: the table-writing half of :class:`~cladebench.synthetic.world.World`, which
    inherits it and supplies the draws (``observations``, ``co_observations``), the pictures (``render``,
    ``render_pair``) and ``provenance`` that these methods put into rows.
    """

    if TYPE_CHECKING:  # supplied by World
        def observations(self, n: int, *, seed: int = 0, start: int = 0, balanced: bool = False,
                         genus: str | None = None) -> list[Observation]: ...
        def co_observations(self, n: int, *, seed: int = 0, start: int = 0) -> list[CoObservation]: ...
        def render(self, species: int | Lineage | Species, *, seed: int, size: int | None = None) -> Image.Image: ...
        def render_pair(self, first: int | Lineage | Species, second: int | Lineage | Species, *,
                        seed: int, size: int | None = None) -> Image.Image: ...
        def provenance(self) -> dict[str, object]: ...

    def to_table(self, n: int, *, seed: int = 0, image_format: str = "jpeg", start: int = 0,
                 balanced: bool = False) -> pa.Table:
        """Observations ``start .. start + n - 1`` of draw ``seed`` as a canonical table with images.

        Columns: the canonical ones (see :mod:`cladebench.store`), plus ``observer_id`` and
        ``challenge_group`` (the class name, so a few groups of several species each exist).
        """
        return self.observations_table(self.observations(n, seed=seed, start=start, balanced=balanced),
                                       image_format=image_format)

    def genus_only_table(self, n: int, *, genus: str, seed: int = 0, image_format: str = "jpeg",
                         start: int = 0) -> pa.Table:
        """Photos ``start .. start + n - 1`` of the draw of ``genus``'s species (each in turn) labelled to the genus
        only, as Fine-Grained Challenges' camera-trap rows are: ``species``, ``common_name`` and ``taxon_id`` null,
        ``scientific_name`` the genus. Each photo shows one species of the genus, which the label does not say:
        what an expert reviewing the rows is asked to name."""
        return self.observations_table(self.observations(n, seed=seed, start=start, genus=genus),
                                       image_format=image_format, label_rank=Rank.GENUS)

    def observations_table(self, observations: Sequence[Observation], *, image_format: str = "jpeg",
                           label_rank: Rank = Rank.SPECIES) -> pa.Table:
        """Given observations (in order) as a canonical table with images, like :meth:`to_table`.

        For a selection that is not a contiguous range of one draw, such as the held-out observers'
        photos a trained demo model is evaluated on (:mod:`cladebench.demo.model`). Rows are labelled down to
        ``label_rank``: above the species, the narrower names, the common name and the taxon id are null.
        """
        key = format_key(image_format)
        observations = list(observations)
        images = [encode_image(self.render(o.species, seed=o.image_seed), key) for o in observations]
        lineages = [o.species.lineage if label_rank == Rank.SPECIES else o.species.lineage.truncate(label_rank)
                    for o in observations]
        columns: dict[str, pa.Array] = {
            "uuid": pa.array([o.uuid for o in observations], pa.string()),
            "image": pa.array(images, pa.large_binary()),
            "image_format": pa.array([key] * len(observations), pa.string()),
        }
        for rank in RANKS:
            columns[rank.column] = pa.array([lineage.names[rank] for lineage in lineages], pa.string())
        columns["scientific_name"] = pa.array([lineage.scientific_name for lineage in lineages], pa.string())
        columns["common_name"] = pa.array([lineage.common_name for lineage in lineages], pa.string())
        columns["taxon_id"] = pa.array([lineage.taxon_id for lineage in lineages], pa.int64())
        columns.update(self._record_columns(observations))
        columns["challenge_group"] = pa.array([o.species.lineage.names[Rank.CLASS] for o in observations], pa.string())
        return self._with_provenance(pa.table(columns))

    def pair_table(self, n: int, *, seed: int = 0, image_format: str = "jpeg", start: int = 0) -> pa.Table:
        """Two-organism photos ``start .. start + n - 1`` of draw ``seed``, shaped like iNat Co-Observed.

        The canonical per-organism columns (ranks, names, taxon id) are null; ``organisms`` holds the
        two organisms (left, right) and ``divergence_rank`` the rank name where their lineages part.
        """
        key = format_key(image_format)
        pairs = self.co_observations(n, seed=seed, start=start)
        images = [
            encode_image(self.render_pair(p.organisms[0], p.organisms[1], seed=p.image_seed), key) for p in pairs
        ]
        columns: dict[str, pa.Array] = {
            "uuid": pa.array([p.uuid for p in pairs], pa.string()),
            "image": pa.array(images, pa.large_binary()),
            "image_format": pa.array([key] * n, pa.string()),
        }
        for name in (*RANK_COLUMNS, "scientific_name", "common_name"):
            columns[name] = pa.nulls(n, pa.string())
        columns["taxon_id"] = pa.nulls(n, pa.int64())
        columns.update(self._record_columns(pairs))
        organisms = [
            [self._organism_record(s, u) for s, u in zip(p.organisms, p.organism_uuids, strict=True)] for p in pairs
        ]
        columns["organisms"] = pa.array(organisms, pa.list_(ORGANISM_TYPE))
        columns["divergence_rank"] = pa.array([p.divergence_rank.column for p in pairs], pa.string())
        return self._with_provenance(pa.table(columns))

    @staticmethod
    def _organism_record(species: Species, observation_uuid: str) -> dict[str, object]:
        lineage = species.lineage
        return {"observation_uuid": observation_uuid, "taxon_id": lineage.taxon_id,
                **{c: lineage.names[r] for r, c in zip(RANKS, RANK_COLUMNS, strict=True)},
                "scientific_name": lineage.scientific_name, "common_name": lineage.common_name}

    @staticmethod
    def _record_columns(records: Sequence[Observation | CoObservation]) -> dict[str, pa.Array]:
        """Place, date and provenance columns, shared by single and pair tables."""
        return {
            "latitude": pa.array([r.latitude for r in records], pa.float64()),
            "longitude": pa.array([r.longitude for r in records], pa.float64()),
            "observed_on": pa.array([r.observed_on for r in records], pa.date32()),
            "source_dataset": pa.array([SOURCE_DATASET] * len(records), pa.string()),
            "source_id": pa.array([str(r.observation_id) for r in records], pa.string()),
            "source_url": pa.array([r.source_url for r in records], pa.string()),
            "license_name": pa.array([r.license.code for r in records], pa.string()),
            "license_link": pa.array([r.license.link for r in records], pa.string()),
            "attribution": pa.array([r.license.attribution(r.observer.attribution_name) for r in records],
                                    pa.string()),
            "observer_id": pa.array([r.observer.id for r in records], pa.int64()),
        }

    def _with_provenance(self, table: pa.Table) -> pa.Table:
        metadata = dict(table.schema.metadata or {})
        metadata[SCHEMA_METADATA_KEY] = json.dumps(self.provenance(), sort_keys=True).encode()
        return table.replace_schema_metadata(metadata)


