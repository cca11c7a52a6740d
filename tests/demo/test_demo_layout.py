"""The demo package's shape: its config is its own (the CLI imports it, never the other way), and its registries
answer a typo with the known names. (That no demo module imports the CLI, a later stage, and that modules stay
short are rules for every package: ``tests/test_shape.py``.)"""

from __future__ import annotations

import pytest

from cladebench.errors import UnknownNameError


def test_the_cli_builds_the_demo_verb_from_the_demos_own_config() -> None:
    import cladebench.cli  # noqa: F401  (registers the verbs)
    from cladebench.cli.verbs import VERBS
    from cladebench.demo.config import DemoConfig

    assert VERBS["demo"].config_class() is DemoConfig


def test_a_mistyped_demo_step_names_the_closest() -> None:
    from cladebench.demo import DEMO_STEPS

    assert list(DEMO_STEPS)[:3] == ["fine-grained", "co-observed", "subset"]  # registration order is run order
    with pytest.raises(UnknownNameError, match="Did you mean 'rerank'"):
        DEMO_STEPS.get_named("rernk")


def test_a_mistyped_vision_tower_names_the_closest() -> None:
    from cladebench.demo.model import VISION_TOWERS, DemoModelConfig

    assert set(VISION_TOWERS) == {"resnet", "vit"}
    with pytest.raises(UnknownNameError, match="Did you mean 'resnet'"):
        DemoModelConfig(vision_tower="resnt")

