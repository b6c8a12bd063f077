"""Run inside the image: the installed distributions are exactly scaler/requirements.lock's pins (for
this interpreter and platform, markers evaluated) plus the project itself and the venv's own pip.

Usage: python locked_set.py requirements.lock  -> prints "N locked distributions installed"; exit 1 on
any difference. Uses pip's vendored `packaging`, the only copy the image has.
"""

import re
import sys
from importlib import metadata

from pip._vendor.packaging.markers import Marker
from pip._vendor.packaging.utils import canonicalize_name

PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")

locked = {}
with open(sys.argv[1], encoding="utf-8") as lock:
    for line in lock:
        m = PIN.match(line.strip())
        if m and (m[3] is None or Marker(m[3]).evaluate()):
            locked[canonicalize_name(m[1])] = m[2]
installed = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
extra = {n: v for n, v in installed.items() if n not in locked and n not in ("gpuburst", "pip")}
missing = {n: v for n, v in locked.items() if installed.get(n) != v}
if extra or missing:
    print(f"not the locked set: installed but not locked {extra}; locked but not installed as pinned {missing}")
    sys.exit(1)
print(f"{len(locked)} locked distributions installed, nothing else")
