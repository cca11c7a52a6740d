"""Where and when the synthetic world's species are seen: ranges on the sphere, seasons, and their layout.

Why it exists: geo priors, location filters and date handling need observations whose places and
dates follow the taxonomy (sister species live near each other and are seen at similar times of
year); this module decides each species' range and season from its place in the tree.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

import numpy as np

from cladebench.synthetic.seeds import SALT_GEO, seeded_rng

YEARS = (2018, 2024)
"""Observation dates fall in these years (inclusive), as a recent iNaturalist export would."""


_EARTH_RADIUS_KM = 6371.0088


def destination(lat: float, lon: float, bearing: float, distance_km: float) -> tuple[float, float]:
    """The point ``distance_km`` from (lat, lon) along ``bearing`` (radians) on a sphere."""
    phi1, lam1, delta = math.radians(lat), math.radians(lon), distance_km / _EARTH_RADIUS_KM
    phi2 = math.asin(math.sin(phi1) * math.cos(delta) + math.cos(phi1) * math.sin(delta) * math.cos(bearing))
    lam2 = lam1 + math.atan2(math.sin(bearing) * math.sin(delta) * math.cos(phi1),
                             math.cos(delta) - math.sin(phi1) * math.sin(phi2))
    return math.degrees(phi2), (math.degrees(lam2) + 540.0) % 360.0 - 180.0


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in km between two points given in degrees."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * _EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(a)))


@dataclass(frozen=True)
class GeoRange:
    """Where a species lives: a disc on the sphere."""

    latitude: float
    """Centre latitude, degrees."""
    longitude: float
    """Centre longitude, degrees."""
    radius_km: float
    """Radius of the disc in km."""

    def contains(self, latitude: float, longitude: float) -> bool:
        """Whether a point lies inside the range, with a metre of slack: tables round coordinates to six
        decimals, which moves a point by up to about 0.1 m."""
        return haversine_km(self.latitude, self.longitude, latitude, longitude) <= self.radius_km + 1e-3

    def sample(self, rng: np.random.Generator) -> tuple[float, float]:
        """A point drawn uniformly (by area, approximately) from the disc."""
        distance = self.radius_km * math.sqrt(rng.random())
        return destination(self.latitude, self.longitude, rng.uniform(0.0, 2 * math.pi), distance)


@dataclass(frozen=True)
class Season:
    """When a species is seen: within ``width_days`` of the 15th of its peak month, every year."""

    peak_month: int
    """Month (1-12) in which observations peak."""
    width_days: int
    """Half-width of the season in days."""

    def peak(self, year: int) -> dt.date:
        """The peak day in a given year."""
        return dt.date(year, self.peak_month, 15)

    def contains(self, day: dt.date) -> bool:
        """Whether a date falls in the season (of its own year or a neighbouring one)."""
        return any(abs((day - self.peak(y)).days) <= self.width_days for y in (day.year - 1, day.year, day.year + 1))

    def sample(self, rng: np.random.Generator) -> dt.date:
        """A date within the season in one of :data:`YEARS`, more often near the peak."""
        year = int(rng.integers(YEARS[0], YEARS[1] + 1))
        offset = round(float(np.clip(rng.normal(0.0, self.width_days / 2), -self.width_days, self.width_days)))
        day = self.peak(year) + dt.timedelta(days=offset)
        # A season that straddles New Year can leave the span of years; the same offset around the
        # neighbouring year's peak stays inside the season.
        if day.year < YEARS[0]:
            day = self.peak(year + 1) + dt.timedelta(days=offset)
        elif day.year > YEARS[1]:
            day = self.peak(year - 1) + dt.timedelta(days=offset)
        return day


# Distances (km) between a clade's centre and its children's, by the rank of the children: kingdoms
# are placed on a ring round the globe, sister species end up a few tens of km apart.
_GEO_SPREAD_KM = (0.0, 2500.0, 1200.0, 600.0, 250.0, 100.0, 35.0)


def geography(seed: int, path: tuple[int, ...], n_kingdoms: int) -> tuple[GeoRange, Season]:
    """Range and season of the species at ``path``: each clade moves away from its parent's centre by a
    distance that shrinks with rank, and the peak month drifts only at the upper ranks."""
    base = seeded_rng(SALT_GEO, seed, path[0])
    lat = float(base.uniform(-30.0, 50.0))
    lon = float((-180.0 + 360.0 * (path[0] + 0.5) / n_kingdoms + base.uniform(-20.0, 20.0) + 180.0) % 360.0 - 180.0)
    month = int(base.integers(12))
    for depth in range(1, len(path)):
        node = seeded_rng(SALT_GEO, seed, depth, *path[: depth + 1])
        distance = _GEO_SPREAD_KM[min(depth, len(_GEO_SPREAD_KM) - 1)] * float(node.uniform(0.6, 1.2))
        lat, lon = destination(lat, lon, float(node.uniform(0, 2 * math.pi)), distance)
        lat = max(-70.0, min(75.0, lat))  # keep ranges off the poles, where discs degenerate
        month += int(node.integers(-1, 2)) if depth <= 3 else 0
    leaf = seeded_rng(SALT_GEO, seed, 99, *path)
    geo = GeoRange(round(lat, 5), round(lon, 5), float(round(leaf.uniform(40.0, 220.0), 1)))
    return geo, Season(peak_month=month % 12 + 1, width_days=int(leaf.integers(25, 80)))
