"""Every role variable a user can set is documented in meta/argument_specs.yml, and nothing else is."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted([*(REPO / "ansible_collections/gpuburst/cluster/roles").iterdir(), *(REPO / "roles").iterdir()])


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_defaults_and_argument_specs_name_the_same_variables(role: Path) -> None:
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]
    options = spec["options"]
    assert set(defaults) == set(options)
    for name, option in options.items():
        assert option.get("description"), f"{role.name}: {name} has no description"
        assert name.startswith(role.name + "_"), f"{role.name}: {name} lacks the role prefix"
