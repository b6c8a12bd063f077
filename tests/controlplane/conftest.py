"""The real control plane's fixtures (fixtures.py) for the tests beside it."""

from tests.controlplane.fixtures import cluster, control_plane

__all__ = ["cluster", "control_plane"]
