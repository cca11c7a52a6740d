"""The synthetic package presents the world and its parts from its ``__init__`` on purpose. (That its modules import
each other, never that ``__init__``, and stay short are rules for every package: ``tests/test_shape.py``.)"""

from __future__ import annotations

import cladebench.synthetic as synthetic


def test_the_package_presents_the_world_and_its_parts() -> None:
    for name in synthetic.__all__:
        assert getattr(synthetic, name) is not None, name
    assert synthetic.make_world.__module__ == "cladebench.synthetic.world"
    world = synthetic.make_world(synthetic.WorldConfig(seed=0, branching=(2, 1, 1, 1, 1, 1, 2), names="generated"))
    assert isinstance(world, synthetic.WorldTables)  # the tables are a part of the world's API
    assert world.to_table(1).schema.metadata[synthetic.SCHEMA_METADATA_KEY]
