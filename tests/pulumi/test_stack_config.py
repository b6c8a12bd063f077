"""Bad stack configs fail before any resource is declared, with a message naming the stack file and the key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gpuburst_infra.offline import render
from gpuburst_infra.stack import StackConfigError
from stack_helpers import ROOT, pool_entry, run_program, write_stack

import pulumi

DEV = ROOT / "Pulumi.aws-dev.yaml"
F = "Pulumi.aws-dev.yaml"


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda c: c.__setitem__(key, value)


def _pool(name: str, **changes: Any) -> Callable[[dict[str, Any]], None]:
    def edit(c: dict[str, Any]) -> None:
        entry = pool_entry(c, name)
        for k, v in changes.items():
            if v is None:
                entry.pop(k, None)
            else:
                entry[k] = v
    return edit


def _drop_system(c: dict[str, Any]) -> None:
    c["gpuburst:pools"] = [p for p in c["gpuburst:pools"] if p["name"] != "system"]


CASES = [
    ("unknown top-level key", _set("gpuburst:nodepools", []),
     f"{F}: gpuburst:nodepools: Extra inputs are not permitted"),
    ("unknown pool key", _pool("gpu1-spot-a", maxsize=3),
     f"{F}: gpuburst:pools[gpu1-spot-a].maxsize: Extra inputs are not permitted"),
    ("unknown scaler knob", _set("gpuburst:scaler", {"limits": {"max_gpu": 3}}),
     f"{F}: gpuburst:scaler.limits.max_gpu: Extra inputs are not permitted"),
    ("min > max", _pool("gpu1-spot-a", min=9),
     f"{F}: gpuburst:pools[gpu1-spot-a].max: min (9) is greater than max (8)"),
    ("GPU pool on a type without GPUs", _pool("gpu1-od-a", instance_types=["m6i.large"]),
     f"{F}: gpuburst:pools[gpu1-od-a].role: role gpu on m6i.large, which has no GPU"),
    ("spot pool without a fallback", _pool("gpu1-spot-b", fallback=None),
     f"{F}: gpuburst:pools[gpu1-spot-b].fallback: is required for a spot GPU pool"),
    ("spot CPU pool without a fallback", lambda c: c["gpuburst:pools"].append(
        {"name": "cpu-spot", "role": "general", "capacity_type": "spot", "instance_types": ["m6i.large"],
         "zones": ["us-east-1a"], "max": 4}),
     f"{F}: gpuburst:pools[cpu-spot].fallback: a spot pool needs a fallback chain that ends in an on-demand pool"),
    ("spot fallbacks that loop", lambda c: (_pool("gpu1-spot-a", fallback="gpu1-spot-b")(c),
                                            _pool("gpu1-spot-b", fallback="gpu1-spot-a")(c)),
     f"{F}: gpuburst:pools[gpu1-spot-a].fallback: the fallback chain loops"),
    ("fallback to an undeclared pool", _pool("gpu1-spot-b", fallback="gpu9-od"),
     f"{F}: gpuburst:pools[gpu1-spot-b].fallback: 'gpu9-od' is not a declared pool"),
    ("unknown region", _set("aws:region", "eu-west-9"),
     f"{F}: aws:region: 'eu-west-9' is not a supported region"),
    ("unknown Kubernetes version", _set("gpuburst:kubernetes_version", "1.19"),
     f"{F}: gpuburst:kubernetes_version: '1.19' is not a supported Kubernetes version on aws"),
    ("unquoted version read as a float", _set("gpuburst:kubernetes_version", 1.30),
     f"{F}: gpuburst:kubernetes_version: '1.3' is not a supported Kubernetes version on aws"),
    ("DRA pool before Kubernetes 1.34", lambda c: (_set("gpuburst:kubernetes_version", "1.33")(c),
                                                    _pool("gpu1-od-a", gpu_allocation="dra")(c)),
     f"{F}: gpuburst:kubernetes_version: '1.33': pool gpu1-od-a has gpu_allocation dra, which needs "
     "Kubernetes 1.34 or later (resource.k8s.io/v1)"),
    ("zone outside the region", _pool("gpu1-spot-b", zones=["us-west-2b"]),
     f"{F}: gpuburst:pools[gpu1-spot-b].zones: ['us-west-2b'] are not zones of us-east-1"),
    ("spot GPU pool over several zones", _pool("gpu1-spot-b", zones=["us-east-1a", "us-east-1b"]),
     f"{F}: gpuburst:pools[gpu1-spot-b].zones: declare one spot GPU pool per zone"),
    ("no system pool", _drop_system, f"{F}: gpuburst:pools: no pool has role system"),
    ("unknown instance type", _pool("gpu1-od-a", instance_types=["g7.xlarge"]),
     f"{F}: gpuburst:pools[gpu1-od-a].instance_types: instance type 'g7.xlarge' is not in the catalogue"),
    ("existing network without a subnet for a zone",
     _set("gpuburst:network", {"vpc_id": "vpc-0123456789abcdef0",
                               "private_subnets": {"us-east-1a": "subnet-0aaaaaaaa"}}),
     f"{F}: gpuburst:network.private_subnets: no subnet for zones ['us-east-1b']"),
    ("both a new and an existing network",
     _set("gpuburst:network", {"cidr": "10.0.0.0/16", "vpc_id": "vpc-0123456789abcdef0",
                               "private_subnets": {"us-east-1a": "subnet-0aaaaaaaa"}}),
     f"{F}: gpuburst:network: give either cidr"),
    ("admin that is not an IAM ARN", _set("gpuburst:admins", ["alice"]),
     f"{F}: gpuburst:admins: ['alice'] are not IAM role or user ARNs"),
    ("wrong cloud", _set("gpuburst:cloud", "gcp"), f"{F}: gpuburst:cloud: must be one of aws, azure"),
]


@pytest.mark.parametrize(("case", "edit", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_config_fails_naming_stack_and_key(case: str, edit: Any, message: str, tmp_path: Path) -> None:
    with pytest.raises(StackConfigError) as err:
        render(write_stack(DEV, tmp_path, edit))
    assert message in str(err.value), case
    assert all(line.startswith(f"{F}: ") for line in str(err.value).splitlines())


def test_every_error_is_reported_at_once(tmp_path: Path) -> None:
    def edit(c: dict[str, Any]) -> None:
        _pool("gpu1-spot-a", min=9)(c)
        _pool("gpu1-spot-b", maxsize=1)(c)

    with pytest.raises(StackConfigError) as err:
        render(write_stack(DEV, tmp_path, edit))
    assert "gpuburst:pools[gpu1-spot-a].max" in str(err.value)
    assert "gpuburst:pools[gpu1-spot-b].maxsize" in str(err.value)


def test_pulumi_run_fails_with_the_message_and_declares_nothing(tmp_path: Path) -> None:
    bad = write_stack(DEV, tmp_path, _pool("gpu1-spot-a", min=9))
    with pytest.raises(pulumi.RunError, match=r"Pulumi\.aws-dev\.yaml: gpuburst:pools\[gpu1-spot-a\]\.max"):
        run_program(bad)


def test_pulumi_run_declares_the_stack_from_a_good_file() -> None:
    mocks = run_program(DEV)
    assert sum(1 for r in mocks.registered if r[0] == "aws:autoscaling/group:Group") == 5


def test_secret_values_never_go_into_plain_inputs(tmp_path: Path) -> None:
    """A gpuburst key stored as a Pulumi secret would be copied into tags in plain text: refused."""
    path = write_stack(DEV, tmp_path, _set("gpuburst:tags", {"secure": "v1:AAAA"}))
    with pytest.raises(StackConfigError, match=r"Pulumi\.aws-dev\.yaml: gpuburst:tags: is stored as a secret"):
        render(path)


def test_a_stack_without_a_version_gets_the_default(tmp_path: Path) -> None:
    """The default is under standard support on EKS and AKS and serves DRA (resource.k8s.io/v1, 1.34+)."""
    from gpuburst_infra.stack_models import DEFAULT_KUBERNETES, DRA_MIN_KUBERNETES, SUPPORTED_KUBERNETES

    # The spot pool too: a device-plugin pool may not fall back to a DRA one (its pods ask for the extended
    # resource the fallback's nodes do not advertise).
    rendered = render(write_stack(DEV, tmp_path, lambda c: (c.pop("gpuburst:kubernetes_version"),
                                                           _pool("gpu1-od-a", gpu_allocation="dra")(c),
                                                           _pool("gpu1-spot-a", gpu_allocation="dra")(c))))
    (cluster,) = [r for r in rendered.resources if r.type == "aws:eks/cluster:Cluster"]
    # issue 39: 1.36 or newer, under standard support on both clouds on 2026-11-28 (stack_models' calendars)
    assert cluster.inputs["version"] == DEFAULT_KUBERNETES == "1.36"
    assert all(DEFAULT_KUBERNETES in versions for versions in SUPPORTED_KUBERNETES.values())
    assert tuple(map(int, DEFAULT_KUBERNETES.split("."))) >= DRA_MIN_KUBERNETES
