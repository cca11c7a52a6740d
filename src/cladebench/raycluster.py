"""Connecting a command to Ray: the one place that imports ``ray`` and decides which cluster to use.

Why a module of its own: ``embed --ray`` and downloads on Ray both need the same three answers — is Ray
installed (the ``ray`` extra; the core never imports it), which cluster (an address, ``RAY_ADDRESS``, the
latest cluster started on this machine, or a new local one, exactly as ``ray.init`` resolves them), and
whose session it is (a session the caller opened, as tests and notebooks do, is reused and left open;
one opened here is shut down when the command ends).

Workers import cladebench themselves, so every node needs it installed (the same version as the
driver); see ``docs/ray.md``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from cladebench import environment
from cladebench.errors import CladebenchError

DEFAULT_ADDRESS = "default"
"""What ``--ray`` alone means: let ``ray.init`` find the cluster (``RAY_ADDRESS``, then the latest
cluster started on this machine, else a new local one)."""


def require_ray() -> ModuleType:
    """``ray``, or an error saying which extra installs it."""
    try:
        import ray
    except ImportError as exc:
        raise CladebenchError(
            "running on Ray needs the ray extra: pip install 'cladebench[ray]' (ray[data] and lance-ray)"
        ) from exc
    return ray


@contextmanager
def ray_session(address: str | None = DEFAULT_ADDRESS) -> Iterator[ModuleType]:
    """Ray connected for the duration of a command.

    ``address``: ``default`` (or ``None``) as ``ray.init()`` resolves it; ``auto`` for an existing
    cluster only; ``local`` for a new one on this machine; ``ray://host:10001`` or ``host:6379`` for a
    given one. A session already open in this process is used as it is, whatever the address.
    """
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    target = None if address in (None, "", DEFAULT_ADDRESS) else address
    try:
        ray.init(address=target, log_to_driver=True, configure_logging=False)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise CladebenchError(f"could not connect to Ray at {target or 'the default address'}: {exc}") from exc
    try:
        yield ray
    finally:
        ray.shutdown()


def cluster_gpus(ray: ModuleType) -> float:
    """GPUs the connected cluster has in all (0 on a CPU-only cluster)."""
    return float(ray.cluster_resources().get("GPU", 0.0))


def cluster_cpus(ray: ModuleType) -> float:
    """CPUs the connected cluster has in all."""
    return float(ray.cluster_resources().get("CPU", 0.0))


def exit_if_marked(variable: str) -> None:
    """A fault-injection point for tests of retries, inert in normal use: when the environment variable
    ``variable`` names a file that exists, the one worker that manages to remove it ends its own process
    (``os._exit``), as a worker killed by its node would. Tests give the variable to every worker through
    ``ray.init(runtime_env={"env_vars": ...})`` and arm it by creating the file."""
    marker = environment.variable(variable)
    if not marker:
        return
    try:
        os.unlink(marker)
    except FileNotFoundError:
        return
    os._exit(1)
