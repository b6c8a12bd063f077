"""Tests on the real control plane (tests/controlplane/plane.py): one per session, emptied after each test."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.controlplane.fixtures import cluster, control_plane  # noqa: E402
from tests.integration.conftest import aws, moto_server  # noqa: E402

__all__ = ["aws", "cluster", "control_plane", "moto_server"]
