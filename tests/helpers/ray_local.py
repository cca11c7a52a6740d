"""A local Ray instance for one test module: 2 CPUs, as on CI, whose workers get the given environment.

The environment travels in the job's ``runtime_env``, which also reaches the workers Ray starts later to
replace a dead one (how the fault-injection markers of ``cladebench.raycluster.exit_if_marked`` arrive).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


@contextmanager
def local_ray(env_vars: dict[str, str]) -> Iterator[Any]:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env_vars})
    try:
        yield ray
    finally:
        ray.shutdown()
