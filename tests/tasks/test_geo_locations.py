"""Points without a usable location are counted by reason: a missing coordinate apart from one out of range
(latitude 999, a sentinel some exports use), never silently as "no location"."""

from __future__ import annotations

import numpy as np

from cladebench.tasks.geo.prior import unusable_locations, usable_location


def test_out_of_range_and_missing_are_counted_apart() -> None:
    lat = np.array([10.0, 999.0, np.nan, -91.0, 45.0, 0.0])
    lon = np.array([20.0, 5.0, 3.0, 0.0, np.inf, 180.0])
    assert usable_location(lat, lon).tolist() == [True, False, False, False, False, True]
    assert unusable_locations(lat, lon) == {"missing": 2, "out of range": 2}
    assert unusable_locations(np.array([1.0]), np.array([2.0])) == {}
