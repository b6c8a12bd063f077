"""Offline runs of the Pulumi program (pulumi.runtime.set_mocks) on the repository's stack files."""

from __future__ import annotations

import sys
from pathlib import Path

# The program's components: Pulumi puts the program directory (pulumi/) on sys.path; so do we.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "pulumi"))
