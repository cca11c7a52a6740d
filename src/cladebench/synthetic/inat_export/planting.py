"""The planted photos of a generated export: the eligible co-observed ones, and one group per defect.

Why: each planted photo carries the answer a correct ``build coobserved`` gives for it (eligible with this
attribution and these species, or dropped for exactly this reason), which is what the builder's tests check.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cladebench.curate.inat_export import DIVERGENCE_RANKS, TABLES, attribution_name, photo_url
from cladebench.synthetic.inat_export.manifest import PHOTO_DEFECTS, ExportConfig, PlantedPhoto
from cladebench.synthetic.inat_export.taxonomy import Observer, Species, Tree
from cladebench.taxonomy import RANK_COLUMNS


def random_uuids(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` version-4-shaped UUIDs drawn from ``rng`` (so a seed gives the same export)."""
    hexes = rng.bytes(16 * n).hex()
    return [f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"
            for h in (hexes[32 * i:32 * i + 32] for i in range(n))]


_ELIGIBLE_LICENSES = ("CC-BY-NC", "CC-BY", "CC0", "cc-by-nc", "CC-BY-NC", "Cc0")
_ELIGIBLE_EXTENSIONS = ("jpg", "jpeg", "JPG", "jpg", "png")


@dataclass
class _Observation:
    uuid: str
    observer_id: int | str
    taxon_id: int | str
    quality_grade: str = "research"
    observed_on: str = "2023-06-14"
    latitude: str = "44.5647340000"
    longitude: str = "-123.2620280000"
    accuracy: str = "12"

    def line(self, anomaly: bool) -> str:
        fields = [self.uuid, str(self.observer_id), self.latitude, self.longitude, self.accuracy,
                  str(self.taxon_id), self.quality_grade, self.observed_on]
        if anomaly:
            fields.append("0.9731")
        return "\t".join(fields)


def _photo_line(photo_uuid: str, photo_id: int, observation: str, observer_id: int | str, extension: str,
                license_: str, position: int) -> str:
    return f"{photo_uuid}\t{photo_id}\t{observation}\t{observer_id}\t{extension}\t{license_}\t1536\t2048\t{position}"


class Planter:
    """Writes the planted photos' rows and keeps the manifest's tallies."""

    def __init__(self, rng: np.random.Generator, tree: Tree, observers: list[Observer], config: ExportConfig):
        self.rng, self.tree, self.config = rng, tree, config
        self.observers = observers
        self.by_observer = {o.observer_id: o for o in observers}
        self.photo_lines: list[str] = []
        self.observation_lines: list[str] = []
        self.extra_taxa_lines: list[str] = []
        self.extra_observer_lines: list[str] = []
        self.next_photo_id = 5_000_000
        self.eligible: list[PlantedPhoto] = []
        self.planted: dict[str, list[int]] = {kind: [] for kind in PHOTO_DEFECTS}
        self.row_issues: dict[str, Counter[str]] = {t: Counter() for t in TABLES}
        self.pool = observers[:6]  # prolific observers: the per-observer cap has something to cap
        self.common = tree.species[::9][:12]  # frequent species: the per-species cap too

    # ids and rows

    def photo_id(self) -> int:
        self.next_photo_id += int(self.rng.integers(1, 7))
        return self.next_photo_id

    def uuid(self) -> str:
        return random_uuids(self.rng, 1)[0]

    def observation(self, observer_id: int | str, taxon_id: int | str, **changes: str) -> _Observation:
        observation = _Observation(self.uuid(), observer_id, taxon_id, **changes)
        self.observation_lines.append(observation.line(self.config.anomaly_score))
        return observation

    def photo(self, photo_id: int, observations: Sequence[_Observation | str], observer_id: int | str,
              license_: str = "CC-BY-NC", extension: str = "jpg") -> list[str]:
        photo_uuid = self.uuid()
        lines = [_photo_line(photo_uuid, photo_id, o if isinstance(o, str) else o.uuid, observer_id, extension,
                             license_, 0) for o in observations]
        self.photo_lines.extend(lines)
        return lines

    def pick_observer(self) -> Observer:
        return self.observers[int(self.rng.integers(30, len(self.observers)))]

    # species choices

    def pick(self, pool: Sequence[Species] | None = None) -> Species:
        pool = pool or self.tree.species
        return pool[int(self.rng.integers(len(pool)))]

    def partner(self, species: Species, rank: str) -> Species:
        """A species whose lineage parts from ``species``'s exactly at ``rank``."""
        level = RANK_COLUMNS.index(rank)
        options = [s for s in self.tree.species
                   if s.ranks[:level] == species.ranks[:level] and s.ranks[level] != species.ranks[level]]
        return options[int(self.rng.integers(len(options)))]

    # the eligible photos

    def plant_eligible(self, n: int) -> None:
        i = 0
        while len(self.eligible) < n:
            rank = DIVERGENCE_RANKS[i % len(DIVERGENCE_RANKS)]
            first = self.pick(self.common if i % 2 == 0 else None)
            second = self.partner(first, rank)
            # Two photos in three come from a few prolific observers (so the per-observer cap has something to
            # cap, as on iNaturalist), the rest from anyone.
            observer = self.pool[i % len(self.pool)] if i % 3 else self.pick_observer()
            taxon_a = first.subspecies[0] if first.subspecies and i % 4 == 1 else first.taxon_id
            obs_a = self.observation(observer.observer_id, taxon_a)
            obs_b = self.observation(observer.observer_id, second.taxon_id)
            n_photos = 2 if i % 8 == 3 and len(self.eligible) + 2 <= n else 1
            for k in range(n_photos):
                photo_id = self.photo_id()
                license_ = _ELIGIBLE_LICENSES[(i + k) % len(_ELIGIBLE_LICENSES)]
                extension = _ELIGIBLE_EXTENSIONS[(i + k) % len(_ELIGIBLE_EXTENSIONS)]
                lines = self.photo(photo_id, (obs_a, obs_b), observer.observer_id, license_, extension)
                if i % 9 == 4:
                    self.photo_lines.append(lines[0])  # the same row twice: a duplicate, not a third observation
                    self.row_issues["photos"]["duplicate_row"] += 1
                self.eligible.append(self._expected(photo_id, rank, first, second, (obs_a, obs_b), observer,
                                                    license_, extension, n_photos))
            i += 1

    def _expected(self, photo_id: int, rank: str, first: Species, second: Species,
                  observations: tuple[_Observation, _Observation], observer: Observer, license_: str,
                  extension: str, n_photos: int) -> PlantedPhoto:
        from cladebench.curate.sources.values import parse_license

        name = attribution_name(observer.login, observer.name)
        parsed = parse_license(license_)
        assert parsed is not None and name is not None
        return PlantedPhoto(
            photo_id=photo_id, divergence_rank=rank, species_ids=(first.taxon_id, second.taxon_id),
            observation_uuids=(observations[0].uuid, observations[1].uuid), observer_id=observer.observer_id,
            license=license_, extension=extension, image_url=photo_url(photo_id, extension),
            attribution=parsed.attribution(name), scientific_names=(first.binomial, second.binomial),
            n_photos_sharing_observation_pair=n_photos,
        )

    # the defects: each builds a photo that fails one check and passes every check before it

    def plant_defects(self) -> None:
        for kind in PHOTO_DEFECTS:
            plant = getattr(self, f"_plant_{kind}")
            for variant in range(self.config.n_defects):
                self.planted[kind].append(plant(variant))
        self._plant_row_defects()

    def _pair(self, variant: int, *, observer: Observer | None = None, taxon_b: int | str | None = None,
              rank: str = "family", license_: str = "CC-BY-NC", **changes_b: str) -> tuple[int, list[str]]:
        """A two-observation photo, eligible unless the keyword arguments make it not."""
        observer = observer or self.observers[10 + variant]
        first = self.pick()
        second = self.partner(first, rank)
        obs_a = self.observation(observer.observer_id, first.taxon_id)
        obs_b = self.observation(observer.observer_id, second.taxon_id if taxon_b is None else taxon_b, **changes_b)
        photo_id = self.photo_id()
        return photo_id, self.photo(photo_id, (obs_a, obs_b), observer.observer_id, license_)

    def _plant_invalid_photo_row(self, variant: int) -> int:
        photo_id, lines = self._pair(variant)
        fields = lines[1].split("\t")
        if variant % 2 == 0:
            fields[5] = ""  # no license
        else:
            fields = fields[:4]  # a truncated line
        self.photo_lines[self.photo_lines.index(lines[1])] = "\t".join(fields)
        self.row_issues["photos"]["missing_fields"] += 1
        return photo_id

    def _plant_more_than_two_observations(self, variant: int) -> int:
        observer = self.observers[12 + variant]
        first = self.pick()
        species = (first, self.partner(first, "order"), self.partner(first, "family"))
        observations = [self.observation(observer.observer_id, s.taxon_id) for s in species]
        photo_id = self.photo_id()
        self.photo(photo_id, observations, observer.observer_id)
        return photo_id

    def _plant_inconsistent_photo_rows(self, variant: int) -> int:
        photo_id, lines = self._pair(variant)
        fields = lines[1].split("\t")
        fields[5] = "CC0"
        self.photo_lines[self.photo_lines.index(lines[1])] = "\t".join(fields)
        return photo_id

    def _plant_unknown_observation(self, variant: int) -> int:
        observer = self.observers[14 + variant]
        obs_a = self.observation(observer.observer_id, self.pick().taxon_id)
        photo_id = self.photo_id()
        self.photo(photo_id, (obs_a, self.uuid()), observer.observer_id)  # the second is in no observations row
        return photo_id

    def _plant_invalid_observation_row(self, variant: int) -> int:
        if variant % 2 == 0:
            self.row_issues["observations"]["missing_fields"] += 1
            return self._pair(variant, quality_grade="")[0]
        self.row_issues["observations"]["invalid_value"] += 1
        return self._pair(variant, observed_on="2023-02-30")[0]

    def _plant_ambiguous_observation(self, variant: int) -> int:
        photo_id, _ = self._pair(variant)
        self.observation_lines.append(self.observation_lines[-1])  # the second observation written twice
        return photo_id

    def _plant_observer_mismatch(self, variant: int) -> int:
        observer = self.observers[16 + variant]
        first = self.pick()
        obs_a = self.observation(observer.observer_id, first.taxon_id)
        obs_b = self.observation(self.observers[20 + variant].observer_id, self.partner(first, "class").taxon_id)
        photo_id = self.photo_id()
        self.photo(photo_id, (obs_a, obs_b), observer.observer_id)
        return photo_id

    def _plant_not_research_grade(self, variant: int) -> int:
        return self._pair(variant, quality_grade=("needs_id", "casual")[variant % 2])[0]

    def _plant_unknown_taxon(self, variant: int) -> int:
        return self._pair(variant, taxon_b=(8_888_000 + variant) if variant % 2 == 0 else "")[0]

    def _plant_malformed_ancestry(self, variant: int) -> int:
        genus = self.tree.genera[int(self.rng.integers(len(self.tree.genera)))]
        taxon = self.tree.malformed_species(genus, variant)
        self.row_issues["taxa"]["malformed_ancestry"] += 1
        return self._pair(variant, taxon_b=taxon)[0]

    def _plant_inactive_taxon(self, variant: int) -> int:
        genus = self.tree.genera[int(self.rng.integers(len(self.tree.genera)))]
        return self._pair(variant, taxon_b=self.tree.inactive_species(genus))[0]

    def _plant_ancestry_mismatch(self, variant: int) -> int:
        return self._pair(variant, taxon_b=self.tree.stale_species(self.pick(), variant))[0]

    def _plant_incomplete_lineage(self, variant: int) -> int:
        if variant % 2 == 0:
            return self._pair(variant, taxon_b=self.tree.familyless_species(self.pick()))[0]
        return self._pair(variant, taxon_b=self.pick().ranks[5])[0]  # identified to genus only

    def _plant_kingdom_not_included(self, variant: int) -> int:
        excluded = self.tree.excluded_species[variant % len(self.tree.excluded_species)]
        return self._pair(variant, taxon_b=excluded.taxon_id)[0]

    def _plant_same_species(self, variant: int) -> int:
        observer = self.observers[10 + variant]
        species = next(s for s in self.tree.species[variant:] if s.subspecies)
        obs_a = self.observation(observer.observer_id, species.taxon_id)
        obs_b = self.observation(observer.observer_id, species.subspecies[0] if variant % 2 else species.taxon_id)
        photo_id = self.photo_id()
        self.photo(photo_id, (obs_a, obs_b), observer.observer_id)
        return photo_id

    def _plant_same_genus(self, variant: int) -> int:
        return self._pair(variant, rank="species")[0]

    def _plant_license_not_allowed(self, variant: int) -> int:
        return self._pair(variant, license_=("CC-BY-SA", "CC-BY-NC-ND")[variant % 2])[0]

    def _plant_unknown_observer(self, variant: int) -> int:
        if variant % 2 == 0:
            ghost = Observer(7_770_000 + variant, "ghost", "Nobody")  # in no observers row
        else:
            ghost = Observer(7_780_000 + variant, "", "No Login")
            self.extra_observer_lines.append(ghost.line())
            self.row_issues["observers"]["missing_fields"] += 1
        return self._pair(variant, observer=ghost)[0]

    def _plant_row_defects(self) -> None:
        for _ in range(self.config.n_defects):
            photo_id = self.photo_id()
            line = _photo_line(self.uuid(), photo_id, self.uuid(), self.observers[0].observer_id, "jpg", "CC0", 0)
            self.photo_lines.append(line + "\textra")  # one field too many: the reader rejects the line
        self.row_issues["photos"]["malformed_line"] += self.config.n_defects
        self.extra_taxa_lines.extend(self.tree.broken_rows(self.config.n_defects))
        self.row_issues["taxa"]["missing_fields"] += self.config.n_defects
        # A taxon written twice; one no observation is on, so the duplicate changes nothing else.
        twice = self.tree.by_id[self.tree.inactive_species(self.tree.genera[0])]
        self.extra_taxa_lines.append(twice.line())
        self.row_issues["taxa"]["duplicate_taxon_id"] += 1

