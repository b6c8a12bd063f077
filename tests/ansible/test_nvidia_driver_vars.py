"""The nvidia_driver role's computed variables, templated by Ansible itself for real hosts' facts:
the CUDA repository each distribution gets and the kernel headers DKMS needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = Path(__file__).resolve().parents[2] / "ansible_collections/gpuburst/cluster/roles/nvidia_driver"
REPOS = "https://developer.download.nvidia.com/compute/cuda/repos"


def _trusted(value: Any) -> Any:
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: _trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    return value


def role_var(name: str, facts: dict[str, str], **overrides: Any) -> Any:
    variables: dict[str, Any] = {}
    for part in ("defaults/main.yml", "vars/main.yml"):
        variables.update(_trusted(yaml.safe_load((ROLE / part).read_text())))
    variables.update(overrides)
    variables["ansible_facts"] = facts
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template("{{ " + name + " }}"))


DEBIAN = {"os_family": "Debian", "distribution": "Debian", "distribution_major_version": "12",
          "distribution_version": "12.7", "architecture": "x86_64", "kernel": "6.1.0-18-cloud-amd64"}
UBUNTU = {"os_family": "Debian", "distribution": "Ubuntu", "distribution_major_version": "24",
          "distribution_version": "24.04", "architecture": "aarch64", "kernel": "6.8.0-1015-aws"}
ROCKY = {"os_family": "RedHat", "distribution": "Rocky", "distribution_major_version": "9",
         "distribution_version": "9.4", "architecture": "x86_64", "kernel": "5.14.0-427.13.1.el9_4.x86_64"}


@pytest.mark.parametrize(("facts", "url"), [
    (DEBIAN, f"{REPOS}/debian12/x86_64"),
    (UBUNTU, f"{REPOS}/ubuntu2404/sbsa"),  # Ansible puts Ubuntu in the Debian family
    (ROCKY, f"{REPOS}/rhel9/x86_64"),
])
def test_every_task_of_the_cuda_repository_sees_its_url(facts: dict[str, str], url: str) -> None:
    # The URL is a role variable (vars/main.yml), not a variable of one task: the key download and the
    # repository definition need it before the package lists are refreshed.
    assert role_var("nvidia_driver_cuda_repo_url", facts) == url
    for tasks in ROLE.glob("tasks/repo-cuda_repo-*.yml"):
        for task in yaml.safe_load(tasks.read_text()):
            assert "nvidia_driver_cuda_repo_url" not in (task.get("vars") or {}), f"{tasks.name}: {task['name']}"


@pytest.mark.parametrize(("facts", "packages"), [
    (DEBIAN, ["nvidia-open", "nvidia-persistenced"]),
    (UBUNTU, ["nvidia-headless-570-open", "nvidia-utils-570"]),
    (ROCKY, ["@nvidia-driver:570-open"]),
])
def test_each_distribution_gets_its_own_driver_packages(facts: dict[str, str], packages: list[str]) -> None:
    assert role_var("nvidia_driver_packages", facts) == packages


@pytest.mark.parametrize(("facts", "packages"), [
    (DEBIAN, ["linux-headers-6.1.0-18-cloud-amd64", "linux-headers-cloud-amd64"]),
    (UBUNTU, ["linux-headers-6.8.0-1015-aws", "linux-headers-aws"]),
    (ROCKY, ["kernel-devel-5.14.0-427.13.1.el9_4.x86_64", "kernel-devel"]),
])
def test_headers_cover_the_running_kernel_and_the_next_ones(facts: dict[str, str], packages: list[str]) -> None:
    # Only the running kernel's headers would leave the next kernel upgrade without a module.
    assert role_var("nvidia_driver_headers_packages", facts) == packages
    assert role_var("nvidia_driver_headers_packages", facts, nvidia_driver_kernel_headers="") == []
