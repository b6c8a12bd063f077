"""Bad input to the collection's filters and to nvidia_gpu_facts: the task fails with one line naming the argument.

Filters fail a task by raising AnsibleFilterError (Ansible prints its message as the task's failure); the module
fails with `failed: true` and a `msg`. Each case asserts the failure, that the message is one line and that it
names the argument (and the pool or entry) at fault.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuburst.cluster.plugins.filter.containerd import containerd_imports, containerd_nvidia_dropin
from ansible_collections.gpuburst.cluster.plugins.filter.tolerations import pool_tolerations

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data" / "containerd"
MODULE = REPO / "ansible_collections" / "gpuburst" / "cluster" / "plugins" / "modules" / "nvidia_gpu_facts.py"
V2 = "containerd github.com/containerd/containerd/v2 v2.0.4 1a43cb6a1035441f9aca8f5666a9b3ef9e70ab20"
V1 = "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3"


def _dropin(**kw: Any) -> Callable[[], Any]:
    """containerd_nvidia_dropin with good arguments (Debian 12's containerd 1.6), some replaced by bad ones."""
    args = {"version_output": V1, "default_config": (DATA / "debian12-containerd-1.6.20-default.toml").read_text(),
            "main_config": (DATA / "debian12-config.toml").read_text(), **kw}
    return lambda: containerd_nvidia_dropin(**args)


FILTER_CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("version not text", _dropin(version_output={"stdout": "1.7"}), "version_output: expected text, got dict"),
    ("version unreadable", _dropin(version_output="containerd dev"), "cannot read a containerd version"),
    ("main config not TOML", _dropin(main_config="version = [\n"), "config.toml is not valid TOML"),
    ("main config not text", _dropin(main_config=3), "config.toml: expected text, got int"),
    ("runtime name with a space", _dropin(runtime_name="nv idia"), "runtime_name: 'nv idia'"),
    ("runtime name not text", _dropin(runtime_name=None), "runtime_name: None"),
    ("binary relative", _dropin(binary="nvidia-container-runtime"), "binary: 'nvidia-container-runtime' must be"),
    ("binary with a quote", _dropin(binary='/usr/bin/x"y'), "binary:"),
    ("set_default a string", _dropin(set_default="yes"), "set_default: 'yes' must be true or false"),
    ("imports pattern relative", lambda: containerd_imports("", V2, "conf.d/*.toml"), "pattern: 'conf.d/*.toml'"),
    ("imports pattern with a quote", lambda: containerd_imports("", V2, '/etc/"x"/*.toml'), "pattern:"),
    ("imports main config not TOML", lambda: containerd_imports("a = = 1\n", V2, "/etc/c/*.toml"),
     "config.toml is not valid TOML"),
    ("pools not a list", lambda: pool_tolerations({"name": "gpu"}), "pools must be a list"),
    ("pool not a mapping", lambda: pool_tolerations(["gpu"]), "pools[0] must be a mapping"),
    ("taints a string", lambda: pool_tolerations([{"name": "gpu", "taints": "nvidia.com/gpu=present:NoSchedule"}]),
     "pool 'gpu': taints must be a list"),
    ("taint without effect", lambda: pool_tolerations([{"name": "gpu", "taints": ["nvidia.com/gpu=present"]}]),
     "pool 'gpu': taint 'nvidia.com/gpu=present' must look like key=value:Effect"),
    ("taint effect unknown", lambda: pool_tolerations([{"name": "gpu", "taints": ["a=b:NoRun"]}]),
     "pool 'gpu': taint 'a=b:NoRun' has effect 'NoRun'"),
    ("taint key invalid", lambda: pool_tolerations([{"name": "gpu", "taints": ["bad key=b:NoSchedule"]}]),
     "pool 'gpu': taint 'bad key=b:NoSchedule': 'bad key' is not a valid taint key"),
    ("taint a number", lambda: pool_tolerations([{"name": "gpu", "taints": [3]}]), "pool 'gpu': taint 3"),
    ("extra not a list", lambda: pool_tolerations([], {"key": "a"}), "extra tolerations must be a list"),
    ("extra entry not a mapping", lambda: pool_tolerations([], ["a:NoSchedule"]), "extra tolerations[0]"),
    ("extra operator unknown", lambda: pool_tolerations([], [{"key": "a", "operator": "In"}]),
     "extra tolerations[0].operator: 'In'"),
    ("extra effect unknown", lambda: pool_tolerations([], [{"key": "a", "operator": "Exists", "effect": "Never"}]),
     "extra tolerations[0].effect: 'Never'"),
    ("extra unknown field", lambda: pool_tolerations([], [{"key": "a", "operator": "Exists", "values": ["x"]}]),
     "extra tolerations[0]: unknown fields ['values']"),
    ("extra Exists with a value", lambda: pool_tolerations([], [{"key": "a", "operator": "Exists", "value": "x"}]),
     "extra tolerations[0].value"),
    ("extra empty key with Equal", lambda: pool_tolerations([], [{"operator": "Equal", "value": "x"}]),
     "extra tolerations[0]: an empty key needs operator Exists"),
]


@pytest.mark.parametrize(("call", "message"), [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES])
def test_bad_filter_input(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(AnsibleFilterError) as err:
        call()
    text = str(err.value)
    assert "\n" not in text.strip()
    assert message in text, text


def test_the_good_arguments_render() -> None:
    """Each filter case above is one argument away from a call that works: that argument is the fault."""
    assert "nvidia" in _dropin()()
    assert "/etc/c/*.toml" in containerd_imports("", V2, "/etc/c/*.toml")


def test_good_extra_tolerations_pass_through() -> None:
    extra = [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
             {"operator": "Exists"}]
    got = pool_tolerations([{"name": "gpu", "taints": ["nvidia.com/gpu=present:NoSchedule"]}], extra)
    assert got == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, *extra]


def _run_module(tmp_path: Path, args: dict[str, object]) -> dict[str, Any]:
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    proc = subprocess.run([sys.executable, str(MODULE), str(path)], capture_output=True, text=True, check=False,
                          timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


MODULE_CASES: list[tuple[str, dict[str, object], str]] = [
    ("nvidia_smi empty", {"nvidia_smi": " "}, "nvidia_smi: empty"),
    ("nvidia_smi path missing", {"nvidia_smi": "/nonexistent/nvidia-smi"},
     "nvidia_smi: /nonexistent/nvidia-smi is not an executable file"),
    ("nvidia_smi a folder", {"nvidia_smi": "/tmp"}, "nvidia_smi: /tmp is not an executable file"),
    ("pci_devices missing", {"nvidia_smi": "nvidia-smi-not-here", "pci_devices": "/sys/bus/pcii/devices"},
     "pci_devices: /sys/bus/pcii/devices is not a directory"),
    ("unknown option", {"nvidia_sm": "x"}, "nvidia_sm"),
]


@pytest.mark.parametrize(("args", "message"), [c[1:] for c in MODULE_CASES], ids=[c[0] for c in MODULE_CASES])
def test_bad_module_input(tmp_path: Path, args: dict[str, object], message: str) -> None:
    result = _run_module(tmp_path, args)
    assert result["failed"] is True
    assert "\n" not in str(result["msg"]).strip()
    assert message in str(result["msg"]), result["msg"]
