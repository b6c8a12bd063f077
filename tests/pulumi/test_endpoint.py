"""The cluster's API endpoint: private unless the stack asks for public access from named CIDRs, and
never open to the whole internet by accident (EKS public access CIDRs, AKS authorized IP ranges)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gpuburst_infra.offline import render
from gpuburst_infra.stack import StackConfigError
from stack_helpers import ROOT, rendered, write_stack

EKS = "aws:eks/cluster:Cluster"
AKS = "azure-native:containerservice:ManagedCluster"


def _eks(r: Any) -> dict[str, Any]:
    (cluster,) = r.of_type(EKS)
    return dict(cluster.inputs["vpcConfig"])


def _aks(r: Any) -> dict[str, Any]:
    (cluster,) = r.of_type(AKS)
    return dict(cluster.inputs["apiServerAccessProfile"])


def _endpoint(value: Any) -> Any:
    return lambda c: c.__setitem__("gpuburst:endpoint", value)


@pytest.mark.parametrize("stack", ["aws-dev", "aws-prod"])
def test_eks_endpoint_is_private_unless_asked(stack: str) -> None:
    vpc = _eks(rendered(stack))
    assert vpc["endpointPrivateAccess"] is True
    assert vpc["endpointPublicAccess"] is False
    assert not vpc.get("publicAccessCidrs")


@pytest.mark.parametrize("stack", ["azure-dev", "azure-prod"])
def test_aks_is_a_private_cluster_unless_asked(stack: str) -> None:
    profile = _aks(rendered(stack))
    assert profile["enablePrivateCluster"] is True
    assert not profile.get("authorizedIPRanges")


def test_eks_public_endpoint_only_from_the_given_cidrs(tmp_path: Path) -> None:
    r = render(write_stack(ROOT / "Pulumi.aws-dev.yaml", tmp_path,
                           _endpoint({"public": True, "public_cidrs": ["198.51.100.0/24", "203.0.113.7/32"]})))
    vpc = _eks(r)
    assert vpc["endpointPublicAccess"] is True and vpc["endpointPrivateAccess"] is True
    assert vpc["publicAccessCidrs"] == ["198.51.100.0/24", "203.0.113.7/32"]


def test_aks_public_endpoint_only_from_authorized_ranges(tmp_path: Path) -> None:
    r = render(write_stack(ROOT / "Pulumi.azure-dev.yaml", tmp_path,
                           _endpoint({"public": True, "public_cidrs": ["198.51.100.0/24"]})))
    assert _aks(r) == {"enablePrivateCluster": False, "authorizedIPRanges": ["198.51.100.0/24"]}


@pytest.mark.parametrize("stack", ["aws-dev", "azure-dev"])
@pytest.mark.parametrize(("endpoint", "message"), [
    ({"public": True}, "gpuburst:endpoint: public: true needs public_cidrs"),
    ({"public": True, "public_cidrs": ["0.0.0.0/0"]},
     "gpuburst:endpoint: 0.0.0.0/0 opens the API endpoint to the whole internet"),
    ({"public": True, "public_cidrs": ["10.0.0.0/8", "::/0"]},
     "gpuburst:endpoint: ::/0 opens the API endpoint to the whole internet"),
    ({"public_cidrs": ["198.51.100.0/24"]}, "gpuburst:endpoint: public_cidrs is set but public is false"),
    ({"public": True, "public_cidrs": ["300.1.1.1/32"]}, "gpuburst:endpoint.public_cidrs"),
])
def test_unsafe_or_unclear_endpoints_are_refused(stack: str, endpoint: dict[str, Any], message: str,
                                                  tmp_path: Path) -> None:
    with pytest.raises(StackConfigError) as err:
        render(write_stack(ROOT / f"Pulumi.{stack}.yaml", tmp_path, _endpoint(endpoint)))
    assert message in str(err.value)
    assert str(err.value).startswith(f"Pulumi.{stack}.yaml: ")


def test_the_whole_internet_only_when_spelled_out(tmp_path: Path) -> None:
    r = render(write_stack(ROOT / "Pulumi.aws-dev.yaml", tmp_path,
                           _endpoint({"public": True, "public_cidrs": ["0.0.0.0/0"], "open_to_internet": True})))
    assert _eks(r)["publicAccessCidrs"] == ["0.0.0.0/0"]
