"""A role variable of the wrong kind stops the run in one line, before anything changes.

Ansible checks a role's variables against its argument spec on a converted copy and hands the role the value as set:
a list given for a `str` option passes as its printed form, a string for a `list` option as its comma-split. The
collection's `settings` role refuses those (filter `gpuburst.cluster.settings_as_declared`); each role depends on it,
and the playbooks run it for all their roles before the first change.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuburst.cluster.plugins.filter.settings import settings_as_declared

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "ansible_collections" / "gpuburst" / "cluster" / "roles"
OPTIONS = {"x_label": {"type": "str"}, "x_dir": {"type": "path"}, "x_pools": {"type": "list", "elements": "dict"},
           "x_gates": {"type": "dict"}, "x_count": {"type": "int"}, "x_on": {"type": "bool"}, "x_plain": {}}
GOOD = ["gpuburst.io/pool", "/tmp/r", [{"name": "gpu"}], {"A": True}, "3", "false", "text"]

CASES: list[tuple[str, int, Any, str]] = [
    ("a list for text", 0, ["a", "b"], "role: x_label must be text (its argument spec says type str), not a list: "
                                       "['a', 'b'] (set it as one value)"),
    ("a mapping for a path", 1, {"a": 1}, "role: x_dir must be text (its argument spec says type path), not a mapping"),
    ("text for a list", 2, "gpu,cpu", "role: x_pools must be a list (its argument spec says type list), not text: "
                                      "'gpu,cpu' (set it as YAML or JSON, -e '{\"x_pools\": ...}')"),
    ("a mapping for a list", 2, {"name": "gpu"}, "role: x_pools must be a list"),
    ("text for a mapping", 3, "A=true", "role: x_gates must be a mapping (its argument spec says type dict), not text"),
    ("a list for a mapping", 3, ["A"], "role: x_gates must be a mapping"),
    ("a list for an option with no type (str)", 6, [1], "role: x_plain must be text"),
    ("null for a list", 2, None, "role: x_pools must be a list (its argument spec says type list), not null (set it"),
]


@pytest.mark.parametrize(("index", "value", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_value_of_the_wrong_kind_is_refused_in_one_line(index: int, value: Any, message: str) -> None:
    values = [*GOOD[:index], value, *GOOD[index + 1:]]
    with pytest.raises(AnsibleFilterError) as err:
        settings_as_declared(OPTIONS, values, "role")
    assert "\n" not in str(err.value)
    assert message in str(err.value), err.value


def test_values_of_the_declared_kinds_pass_and_numbers_and_booleans_are_left_to_the_spec() -> None:
    """`-e name=value` sets every variable as text: "3" for an int and "false" for a bool are the spec's to convert."""
    assert settings_as_declared(OPTIONS, GOOD, "role") is True
    assert settings_as_declared(OPTIONS, [*GOOD[:4], 3, False, 1.5], "role") is True
    assert settings_as_declared(OPTIONS, [None, *GOOD[1:]], "role") is True  # Ansible's own check makes it ""


def test_every_role_of_the_collection_checks_its_own_variables_first() -> None:
    """Each role depends on the settings role with its own name, so a playbook of the user's own is covered too."""
    for role in sorted(r for r in ROLES.iterdir() if r.name != "settings"):
        meta = yaml.safe_load((role / "meta" / "main.yml").read_text())
        assert meta["dependencies"] == [{"role": "gpuburst.cluster.settings", "settings_roles": [role.name]}], role.name


def _play(tmp_path: Path, playbook: str, variables: dict[str, object]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0"}
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)  # ansible.cfg must be enough
    command = [str(Path(sys.executable).parent / "ansible-playbook"), playbook, "-e", json.dumps(variables)]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO, check=False, timeout=300)


PLAYBOOK_CASES: list[tuple[str, object, str]] = [
    ("device_plugin_pool_label", ["gpuburst.io/pool", "pool"],
     "device_plugin: device_plugin_pool_label must be text (its argument spec says type str), not a list"),
    ("dra_driver_pools", "gpu1-spot-a,gpu8-spot-a",
     "dra_driver: dra_driver_pools must be a list (its argument spec says type list), not text"),
    ("gpuburst_env_pools_file", [str(REPO / "examples" / "pools-aws.yaml")],
     "gpuburst_env: gpuburst_env_pools_file must be text (its argument spec says type str), not a list"),
]


@pytest.mark.parametrize(("name", "value", "message"), PLAYBOOK_CASES, ids=[c[0] for c in PLAYBOOK_CASES])
def test_the_cluster_playbook_stops_before_its_first_change(tmp_path: Path, name: str, value: object,
                                                            message: str) -> None:
    """A variable of a later role (or of the site role) of the wrong kind: the run fails naming the role and the
    variable, and the certificates role (the play's first) has written nothing."""
    review = tmp_path / "review"
    proc = _play(tmp_path, "gpuburst.cluster.cluster", {
        "gpuburst_env_pools_file": str(REPO / "examples" / "pools-aws.yaml"),
        "device_plugin_install": False, "metrics_certs_kubernetes": False,
        "device_plugin_render_dir": str(review), "metrics_certs_render_dir": str(review / "certs"),
        "metrics_certs_dir": str(tmp_path / "pki"), name: value})
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not review.exists() and not (tmp_path / "pki").exists()


def test_a_role_in_a_playbook_of_ones_own_checks_itself(tmp_path: Path) -> None:
    """mig_layout alone, its config file's path given as a list: refused by its own dependency, nothing written."""
    playbook = tmp_path / "own.yml"
    playbook.write_text(yaml.safe_dump([{"name": "own", "hosts": "localhost", "connection": "local",
                                         "gather_facts": False, "roles": ["gpuburst.cluster.mig_layout"]}]))
    proc = _play(tmp_path, str(playbook), {"mig_layout_config": [str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")]})
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "mig_layout: mig_layout_config must be text (its argument spec says type path)" in out, out[-3000:]
    assert list(tmp_path.iterdir()) == [playbook]


SETTINGS_CASES: list[tuple[str, object, str]] = [
    ("a role not in the collection", ["nope"],
     "settings: settings_roles names nope, not a role of the collection (no "),
    ("one name as text", "device_plugin", "settings: settings_roles must be a list (its argument spec says type list), "
                                          "not text: 'device_plugin'"),
]


@pytest.mark.parametrize(("value", "message"), [c[1:] for c in SETTINGS_CASES], ids=[c[0] for c in SETTINGS_CASES])
def test_the_settings_role_checks_its_own_variable(tmp_path: Path, value: object, message: str) -> None:
    playbook = tmp_path / "own.yml"
    playbook.write_text(yaml.safe_dump([{"name": "own", "hosts": "localhost", "connection": "local",
                                         "gather_facts": False, "roles": ["gpuburst.cluster.settings"]}]))
    proc = _play(tmp_path, str(playbook), {"settings_roles": value})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert message in out.replace("''", "'"), out[-3000:]
