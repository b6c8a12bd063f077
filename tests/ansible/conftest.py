"""The Ansible collection's unit tests (no podman needed): make the repository's collection importable.

ansible_collections is a namespace package, so the repository's copy merges with the venv's.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
