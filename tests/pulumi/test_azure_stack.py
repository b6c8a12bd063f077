"""The Azure stack, run offline with mocks on Pulumi.azure-dev.yaml and Pulumi.azure-prod.yaml."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpuburst_infra.azure import AKS_SPOT_TAINT, aks_managed_labels
from gpuburst_infra.offline import render, stack_file_config
from gpuburst_infra.stack import StackConfigError, load_stack
from stack_helpers import ROOT, pool_entry, rendered, write_stack

from scaler.core.config.pool import Pool, TaintSpec
from scaler.core.config.settings import parse_config
from scaler.core.model import keys
from scaler.permissions import AZURE_AGENT_POOL_ACTIONS, AZURE_QUOTA_ACTIONS

STACKS = ["azure-dev", "azure-prod"]
AGENT_POOL = "azure-native:containerservice:AgentPool"
CLUSTER = "azure-native:containerservice:ManagedCluster"


def _stack(name: str) -> Any:
    config, _ = stack_file_config(ROOT / f"Pulumi.{name}.yaml")
    decoded = {k: json.loads(v) if v[:1] in "[{" else v for k, v in config.items()}
    return load_stack(decoded, f"Pulumi.{name}.yaml")


def _profiles(r: Any, s: Any) -> dict[str, dict[str, Any]]:
    """pool name -> agent pool properties, the system pool's from the cluster's agentPoolProfiles."""
    out = {a.name: a.inputs for a in r.of_type(AGENT_POOL)}
    (system,) = r.one(CLUSTER, "cluster").inputs["agentPoolProfiles"]
    out[next(p.name for p in s.pools if p.role == "system")] = system
    return out


def _taints(texts: list[str]) -> set[tuple[str, str, str]]:
    return {(t.key, t.value, t.effect) for t in map(TaintSpec.parse, texts)}


@pytest.mark.parametrize("stack", STACKS)
def test_every_gpu_spot_pool_is_spot_from_zero_and_owned_by_the_scaler(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    spot = [p for p in s.pools if p.role == "gpu" and p.capacity_type == "spot"]
    assert spot
    for pool in spot:
        a = r.one(AGENT_POOL, pool.name)
        assert a.inputs["agentPoolName"] == pool.provider_ref
        assert a.inputs["scaleSetPriority"] == "Spot"
        assert a.inputs["scaleSetEvictionPolicy"] == "Delete"
        assert a.inputs["spotMaxPrice"] == -1
        assert a.inputs["count"] == 0 == pool.min_size
        assert a.inputs["enableAutoScaling"] is False
        assert a.ignore_changes == ["count"]
        assert a.inputs["availabilityZones"] == pool.zones and len(pool.zones) == 1
        assert a.inputs["vmSize"] == pool.instance_types[0]


@pytest.mark.parametrize("stack", STACKS)
def test_every_spot_pool_falls_back_to_a_regular_pool_for_the_same_workloads(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    profiles = _profiles(r, s)
    for pool in (p for p in s.pools if p.capacity_type == "spot"):
        assert pool.fallback, pool.name
        fallback = s.scaler.pool(pool.fallback)
        assert profiles[fallback.name]["scaleSetPriority"] == "Regular"
        assert "spotMaxPrice" not in profiles[fallback.name]
        assert fallback.gpus == pool.gpus and fallback.role == pool.role
        assert set(pool.zones) <= set(fallback.zones)
        # The same pods land there: same labels and taints but the pool name, capacity type and Spot taint.
        ignore = {keys.LABEL_POOL, keys.LABEL_CAPACITY_TYPE}
        assert {k: v for k, v in pool.node_labels().items() if k not in ignore} == \
            {k: v for k, v in fallback.node_labels().items() if k not in ignore}
        assert set(pool.node_taints()) - {AKS_SPOT_TAINT} == set(fallback.node_taints())


@pytest.mark.parametrize("stack", STACKS)
def test_nodes_get_exactly_the_pool_models_labels_and_taints(stack: str) -> None:
    """What we pass to AKS plus what AKS adds itself equals the pool model, never more, never twice."""
    r, s = rendered(stack), _stack(stack)
    profiles = _profiles(r, s)
    for pool in s.pools:
        a = profiles[pool.name]
        assert not any(k.startswith("kubernetes.azure.com/") for k in a["nodeLabels"])
        assert {**a["nodeLabels"], **aks_managed_labels(pool)} == pool.node_labels()
        passed = _taints(a["nodeTaints"])
        assert (keys.TAINT_AZURE_SPOT, keys.TAINT_AZURE_SPOT_VALUE, "NoSchedule") not in passed
        aks_adds = {(AKS_SPOT_TAINT.key, AKS_SPOT_TAINT.value, AKS_SPOT_TAINT.effect)} \
            if a["scaleSetPriority"] == "Spot" else set()
        assert passed | aks_adds == {(t.key, t.value, t.effect) for t in pool.node_taints()}
        if pool.gpus:
            assert (keys.TAINT_GPU, keys.TAINT_GPU_VALUE, "NoSchedule") in passed
            assert aks_managed_labels(pool) == {keys.LABEL_ACCELERATOR_AZURE: "nvidia"}


@pytest.mark.parametrize("stack", STACKS)
def test_scale_set_tags_round_trip_through_from_tags_to_the_same_pool(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    for pool in s.pools:
        a = _profiles(r, s)[pool.name]
        tags = a["tags"]
        assert all("/" not in k for k in tags), "Azure tag names cannot hold '/'"
        assert tags[keys.azure_tag_key(keys.tag_ca_cluster(s.cluster))] == "owned"
        ref = a.get("agentPoolName", a.get("name"))
        back = Pool.from_tags(tags, cloud="azure", cluster=s.cluster, provider_ref=ref,
                              instance_types=[a["vmSize"]], zones=a["availabilityZones"],
                              min_size=pool.min_size, max_size=pool.max_size, catalogue=s.scaler.full_catalogue())
        assert back.model_dump() == pool.model_dump(), pool.name
        if pool.gpus:
            assert tags[keys.azure_tag_key(keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_GPU)] == str(pool.gpus)


@pytest.mark.parametrize("stack", STACKS)
def test_gpu_driver_follows_config(stack: str, tmp_path: Path) -> None:
    r, s = rendered(stack), _stack(stack)
    for pool in s.pools:
        a = _profiles(r, s)[pool.name]
        assert a.get("gpuProfile") == ({"driver": "Install"} if pool.gpus else None)
    none = render(write_stack(ROOT / f"Pulumi.{stack}.yaml", tmp_path,
                              lambda c: c.__setitem__("gpuburst:gpu_driver", "none")))
    drivers = {a.inputs["gpuProfile"]["driver"] for a in none.of_type(AGENT_POOL) if "gpuProfile" in a.inputs}
    assert drivers == {"None"}


@pytest.mark.parametrize("stack", STACKS)
def test_scaler_role_allows_only_the_agent_pool_actions_on_the_scalers_pools(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    role = r.one("azure-native:authorization:RoleDefinition", "scaler")
    (perm,) = role.inputs["permissions"]
    # Every pool is an AKS agent pool: no Compute (scale set) action at all.
    assert perm["actions"] == list(AZURE_AGENT_POOL_ACTIONS)
    assert not any(a.startswith("Microsoft.Compute/") for a in perm["actions"])
    assert not perm.get("dataActions") and not perm.get("notActions")
    assert not any("*" in a for a in perm["actions"])
    identity = r.one("azure-native:managedidentity:UserAssignedIdentity", "scaler")
    assignments = [a for a in r.of_type("azure-native:authorization:RoleAssignment")
                   if a.name.startswith("scaler") and a.name != "scaler-quotas"]
    cluster_id = r.one(CLUSTER, "cluster").id
    # One assignment per pool the scaler owns, on that agent pool; none on the cluster or the node group.
    expected = sorted(f"{cluster_id}/agentPools/{p.provider_ref}" for p in s.pools)
    assert sorted(a.inputs["scope"] for a in assignments) == expected
    for a in assignments:
        assert a.inputs["roleDefinitionId"] == role.id
        assert a.inputs["principalType"] == "ServicePrincipal"
    assert {a.inputs["principalId"] for a in assignments} == {_principal_of(identity)}
    rg = r.one("azure-native:resources:ResourceGroup", "rg").id
    assert role.inputs["assignableScopes"] == [rg]


@pytest.mark.parametrize("stack", STACKS)
def test_the_quota_reads_have_a_role_of_their_one_action_on_the_subscription(stack: str) -> None:
    # Compute usages are listed per subscription and region: the resource group's role cannot grant them.
    r = rendered(stack)
    role = r.one("azure-native:authorization:RoleDefinition", "scaler-quotas")
    (perm,) = role.inputs["permissions"]
    assert perm["actions"] == list(AZURE_QUOTA_ACTIONS) == ["Microsoft.Compute/locations/usages/read"]
    (scope,) = role.inputs["assignableScopes"]
    assert scope == role.inputs["scope"] and scope.count("/") == 2 and scope.startswith("/subscriptions/")
    assignment = r.one("azure-native:authorization:RoleAssignment", "scaler-quotas")
    assert (assignment.inputs["scope"], assignment.inputs["roleDefinitionId"]) == (scope, role.id)
    identity = r.one("azure-native:managedidentity:UserAssignedIdentity", "scaler")
    assert assignment.inputs["principalId"] == _principal_of(identity)


def test_a_reserved_pool_lands_in_its_capacity_reservation_group(tmp_path: Path) -> None:
    group = ("/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/gpu-reservations/providers/"
             "Microsoft.Compute/capacityReservationGroups/t4-eastus")

    def edit(c: dict[str, Any]) -> None:
        od = next(p for p in c["gpuburst:pools"] if p.get("role", "gpu") == "gpu" and
                  p.get("capacity_type", "on-demand") == "on-demand")
        c["gpuburst:pools"].append({**od, "name": "gpu1-reserved", "capacity_type": "reserved", "min": 0,
                                    "max": 2, "fallback": od["name"], "reservation": {"id": group}})

    r = render(write_stack(ROOT / "Pulumi.azure-dev.yaml", tmp_path, edit))
    pools = {a.name: a.inputs for a in r.of_type(AGENT_POOL)}
    assert pools["gpu1-reserved"]["capacityReservationGroupID"] == group
    assert pools["gpu1-reserved"]["scaleSetPriority"] == "Regular"
    assert not [n for n, a in pools.items() if n != "gpu1-reserved" and "capacityReservationGroupID" in a]
    # the cluster's identity may deploy into the group, and nothing more: two actions, on the group alone
    role = r.one("azure-native:authorization:RoleDefinition", "cluster-reservation-t4-eastus")
    (perm,) = role.inputs["permissions"]
    assert perm["actions"] == ["Microsoft.Compute/capacityReservationGroups/read",
                               "Microsoft.Compute/capacityReservationGroups/deploy/action"]
    rg = group.split("/providers/", maxsplit=1)[0]
    assert role.inputs["assignableScopes"] == [rg] and role.inputs["scope"] == rg
    grant = r.one("azure-native:authorization:RoleAssignment", "cluster-reservation-t4-eastus")
    assert (grant.inputs["scope"], grant.inputs["roleDefinitionId"]) == (group, role.id)
    assert grant.inputs["principalId"] == _principal_of(
        r.one("azure-native:managedidentity:UserAssignedIdentity", "cluster"))


def _principal_of(identity: Any) -> str:
    from gpuburst_infra.offline import _computed

    return str(_computed(identity.type, identity.inputs["resourceName"], "", identity.inputs)["principalId"])


@pytest.mark.parametrize("stack", STACKS)
def test_scaler_identity_is_federated_with_its_service_account_only(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    (fic,) = r.of_type("azure-native:managedidentity:FederatedIdentityCredential")
    assert fic.inputs["subject"] == f"system:serviceaccount:{r.outputs['scalerNamespace']}:" \
                                    f"{r.outputs['scalerServiceAccount']}"
    assert fic.inputs["issuer"] == r.outputs["oidcIssuerUrl"] != ""
    assert fic.inputs["audiences"] == ["api://AzureADTokenExchange"]
    assert fic.inputs["resourceName"] == f"{s.cluster}-scaler"


def test_cluster_identity_and_rbac_follow_config() -> None:
    prod = rendered("azure-prod").one(CLUSTER, "cluster").inputs
    dev = rendered("azure-dev").one(CLUSTER, "cluster").inputs
    for c in (prod, dev):
        assert c["oidcIssuerProfile"] == {"enabled": True}
        assert c["securityProfile"] == {"workloadIdentity": {"enabled": True}}
        assert c["kubernetesVersion"] == "1.36" and c["enableRBAC"] is True
        (system,) = c["agentPoolProfiles"]
        assert system["mode"] == "System" and system["scaleSetPriority"] == "Regular"
    assert prod["aadProfile"]["enableAzureRBAC"] is True and prod["disableLocalAccounts"] is True
    assert prod["aadProfile"]["adminGroupObjectIDs"] == ["6f0a4f4c-54a8-4c51-9bd6-1d8b3c1a2e77"]
    assert "aadProfile" not in dev and dev["disableLocalAccounts"] is False
    assert rendered("azure-prod").one(CLUSTER, "cluster").ignore_changes == ["agentPoolProfiles[0].count"]


@pytest.mark.parametrize("stack", STACKS)
def test_outputs(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    assert "kubeconfig" in r.secret_outputs and yaml.safe_load(r.outputs["kubeconfig"])["kind"] == "Config"
    assert r.outputs["clusterName"] == s.cluster
    assert r.outputs["poolGroups"] == {p.name: p.provider_ref for p in s.pools}
    identity = r.one("azure-native:managedidentity:UserAssignedIdentity", "scaler")
    assert r.outputs["scalerIdentityClientId"] and identity.inputs["resourceName"] == f"{s.cluster}-scaler"
    config = parse_config(yaml.safe_load(r.outputs["scalerConfig"]), "scalerConfig")
    assert config == s.scaler and config.cloud == "azure"


F = "Pulumi.azure-dev.yaml"


def _pool(pool: str, **changes: Any) -> Any:
    def edit(c: dict[str, Any]) -> None:
        pool_entry(c, pool).update(changes)
    return edit


AZURE_CASES = [
    ("Spot system pool", _pool("system", capacity_type="spot"),
     f"{F}: gpuburst:pools[system].capacity_type: AKS refuses a Spot system pool"),
    ("two system pools", lambda c: c["gpuburst:pools"].append(
        {"name": "system2", "role": "system", "vm_size": "Standard_D4s_v5", "zones": ["1"], "min": 1, "max": 2}),
     f"{F}: gpuburst:pools: one system pool on AKS"),
    ("agent pool name too long", _pool("t4-spot-2", name="t4-spot-zone-two"),
     f"{F}: gpuburst:pools[t4-spot-zone-two].provider_ref: AKS agent pool names are 1-12"),
    ("zone that Azure does not have", _pool("t4-spot-2", zones=["4"]),
     f"{F}: gpuburst:pools[t4-spot-2].zones: ['4'] are not zones of eastus"),
    ("unknown location", lambda c: c.__setitem__("azure-native:location", "mars"),
     f"{F}: azure-native:location: 'mars' is not a supported region"),
    ("two VM sizes", _pool("t4-od-1", vm_size=None, instance_types=["Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3"]),
     f"{F}: gpuburst:pools[t4-od-1].instance_types: an Azure pool has exactly one VM size"),
    ("local accounts off without admins", lambda c: c.__setitem__("gpuburst:rbac", {"disable_local_accounts": True}),
     f"{F}: gpuburst:rbac: disable_local_accounts needs admin_group_object_ids"),
    ("overlapping service CIDR", lambda c: c.__setitem__("gpuburst:network", {"cidr": "10.0.0.0/12"}),
     f"{F}: gpuburst:network: service_cidr 10.0.0.0/16 overlaps cidr 10.0.0.0/12"),
    ("AWS key in an Azure stack", lambda c: c.__setitem__("gpuburst:admins", []),
     f"{F}: gpuburst:admins: Extra inputs are not permitted"),
    ("unknown Kubernetes version", lambda c: c.__setitem__("gpuburst:kubernetes_version", "1.29"),
     f"{F}: gpuburst:kubernetes_version: '1.29' is not a supported Kubernetes version on azure"),
]


@pytest.mark.parametrize(("case", "edit", "message"), AZURE_CASES, ids=[c[0] for c in AZURE_CASES])
def test_bad_azure_config_fails_naming_stack_and_key(case: str, edit: Any, message: str, tmp_path: Path) -> None:
    def apply(c: dict[str, Any]) -> None:
        edit(c)
        for p in c["gpuburst:pools"]:  # a None value means "remove the key"
            for k in [k for k, v in p.items() if v is None]:
                del p[k]

    with pytest.raises(StackConfigError) as err:
        render(write_stack(ROOT / F, tmp_path, apply))
    assert message in str(err.value), case


def test_entra_id_kubeconfig_logs_in_unattended_and_the_deployer_may_install_the_platform() -> None:
    # azure-prod: Entra ID with Azure RBAC, local accounts off. AKS's kubeconfig would ask a human for a
    # device code; the output uses the `az` login instead (CI's OIDC login, or yours).
    from gpuburst_infra.azure import AKS_RBAC_CLUSTER_ADMIN
    from gpuburst_infra.offline import AKS_AAD_SERVER, TENANT

    r = rendered("azure-prod")
    (user,) = yaml.safe_load(r.outputs["kubeconfig"])["users"]
    assert user["user"]["exec"]["command"] == "kubelogin"
    assert user["user"]["exec"]["args"] == ["get-token", "--login", "azurecli", "--server-id", AKS_AAD_SERVER,
                                            "--environment", "AzurePublicCloud"]
    (admin,) = [a for a in r.of_type("azure-native:authorization:RoleAssignment")
                if a.name == "deployer-cluster-admin"]
    assert admin.inputs["scope"] == r.one(CLUSTER, "cluster").id  # this cluster only
    assert admin.inputs["principalId"] == TENANT  # the mocked caller's object id
    assert admin.inputs["principalType"] == "ServicePrincipal"  # CI deploys
    assert admin.inputs["roleDefinitionId"].endswith(f"/roleDefinitions/{AKS_RBAC_CLUSTER_ADMIN}")
    # Kubernetes RBAC (azure-dev): no Azure role inside the cluster, a plain kubeconfig.
    dev = rendered("azure-dev")
    assert not [a for a in dev.of_type("azure-native:authorization:RoleAssignment") if a.name.startswith("deployer")]
