"""The Azure stack: resource group, network, AKS with one agent pool per pool, the scaler's workload identity.

The system pool is the cluster's default (System mode) pool; every other pool is an agent pool whose
count the scaler owns (created at `min`, AKS's own autoscaler off, later count changes ignored by
Pulumi). Labels, taints and tags come from the pool model; what AKS sets on nodes by itself (its
`kubernetes.azure.com/` labels, the Spot taint) is left to AKS, and `aks_managed_*` says which.
"""

from __future__ import annotations

import base64
import ipaddress
import uuid
from typing import Any

import yaml
from pulumi_azure_native import authorization, containerservice, managedidentity, network, resources

import pulumi
from gpuburst_infra.stack import AzureStackConfig, Stack
from scaler.core.config.pool import Pool
from scaler.core.model import keys
from scaler.core.model.objects import Taint
from scaler.permissions import AZURE_QUOTA_ACTIONS, AZURE_ROLES, azure_role_name, azure_scaler_actions

# AKS reserves its own label domain and sets those labels itself (accelerator on GPU sizes,
# scalesetpriority on Spot pools); it also adds the Spot taint to every Spot pool.
AKS_LABEL_DOMAIN = keys.LABEL_AZURE_SCALESET_PRIORITY.partition("/")[0] + "/"
AKS_SPOT_TAINT = Taint(keys.TAINT_AZURE_SPOT, keys.TAINT_AZURE_SPOT_VALUE, "NoSchedule")
NETWORK_CONTRIBUTOR = "4d97b98b-1d4f-4787-a291-c67834d212e7"  # built-in role: join the nodes' subnet
# Built-in "Azure Kubernetes Service RBAC Cluster Admin": what the deploying identity needs in the
# cluster (namespaces, CRDs, cluster roles of the platform charts) when Azure RBAC authorizes it.
AKS_RBAC_CLUSTER_ADMIN = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"
WORKLOAD_IDENTITY_AUDIENCE = "api://AzureADTokenExchange"
# What AKS does as the cluster's identity to place a reserved pool's VMs in a capacity reservation group:
# read the group and deploy into it. AKS's guide grants Contributor on the group's resource group; a role of
# these actions, assigned on the group alone, is all a pool needs.
CAPACITY_RESERVATION_ACTIONS = ("Microsoft.Compute/capacityReservationGroups/read",
                                "Microsoft.Compute/capacityReservationGroups/deploy/action")
OS_SKU = "Ubuntu"  # the Ansible roles and the NVIDIA driver packages target Ubuntu


def aks_node_labels(pool: Pool) -> dict[str, str]:
    """The pool's labels AKS accepts in nodeLabels (its own domain is reserved)."""
    return {k: v for k, v in pool.node_labels().items() if not k.startswith(AKS_LABEL_DOMAIN)}


def aks_managed_labels(pool: Pool) -> dict[str, str]:
    """The pool's labels AKS puts on the nodes itself."""
    return {k: v for k, v in pool.node_labels().items() if k.startswith(AKS_LABEL_DOMAIN)}


def aks_node_taints(pool: Pool) -> list[str]:
    """The pool's taints as AKS nodeTaints, without the Spot taint AKS adds to Spot pools itself."""
    return [str(t) for t in pool.node_taints() if t != AKS_SPOT_TAINT]




def role_definition_guid(cluster: str, resource_group: str, role: str = "scaler") -> str:
    """Stable per cluster: a re-run updates the same custom role instead of making another."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"gpuburst:{resource_group}/{cluster}/{role}"))



def azurecli_login(kubeconfig: str) -> str:
    """AKS's Entra ID kubeconfig logs in with kubelogin's device code, which waits for a human. Rewrite
    every kubelogin user to `--login azurecli`: the token of whoever is logged in with `az` (CI's
    `azure/login` by OIDC, or you), so the Kubernetes provider, Ansible and kubectl all work unattended."""
    doc = yaml.safe_load(kubeconfig)
    for user in doc.get("users") or ():
        exec_ = (user.get("user") or {}).get("exec")
        if not exec_ or exec_.get("command") != "kubelogin":
            continue
        args = list(exec_.get("args") or ())
        keep = ["get-token", "--login", "azurecli"]
        for flag in ("--server-id", "--environment"):
            if flag in args and args.index(flag) + 1 < len(args):
                keep += [flag, args[args.index(flag) + 1]]
        exec_["args"] = keep
    return str(yaml.safe_dump(doc, sort_keys=False))

class AzureStack:
    """Declares the stack's resources; `outputs` is what `__main__` exports."""

    def __init__(self, stack: Stack) -> None:
        assert isinstance(stack.settings, AzureStackConfig)
        self.stack = stack
        self.settings: AzureStackConfig = stack.settings
        self.name = stack.cluster
        self.location = stack.region
        self.tags = {keys.azure_tag_key(keys.TAG_CLUSTER): self.name, **self.settings.tags}
        self.rg_name = self.settings.resource_group or f"{self.name}-rg"
        self.node_rg_name = f"{self.rg_name}-nodes"
        client = authorization.get_client_config_output()
        self.subscription = client.subscription_id
        self.deployer = client.object_id
        self.rg = resources.ResourceGroup("rg", resource_group_name=self.rg_name, location=self.location,
                                          tags=self.tags)
        self.subnet_id = self._network()
        self._cluster()
        self.agent_pools = {p.name: self._agent_pool(p) for p in stack.pools if p.role != "system"}
        self.access = self._deployer_access()
        self._scaler_identity()

    # --- network ---------------------------------------------------------------------------------
    def _network(self) -> pulumi.Input[str]:
        net = self.settings.network
        if not net.create:
            return str(net.subnet_id)
        block = ipaddress.ip_network(str(net.cidr))
        nodes = next(block.subnets(new_prefix=16)) if block.prefixlen < 16 else block
        vnet = network.VirtualNetwork("vnet", resource_group_name=self.rg.name, location=self.location,
                                      virtual_network_name=f"{self.name}-vnet",
                                      address_space={"address_prefixes": [str(block)]}, tags=self.tags,
                                      opts=pulumi.ResourceOptions(ignore_changes=["subnets"]))
        subnet = network.Subnet("nodes", resource_group_name=self.rg.name, virtual_network_name=vnet.name,
                                subnet_name="nodes", address_prefix=str(nodes))
        return subnet.id

    # --- the managed cluster with its system pool ------------------------------------------------
    def _cluster(self) -> None:
        s = self.settings
        system = next(p for p in self.stack.pools if p.role == "system")
        control = managedidentity.UserAssignedIdentity("cluster", resource_group_name=self.rg.name,
                                                       location=self.location, resource_name_=f"{self.name}-cluster",
                                                       tags=self.tags)
        join = authorization.RoleAssignment(
            "cluster-subnet", scope=self.subnet_id, principal_id=control.principal_id,
            principal_type="ServicePrincipal",
            role_definition_id=self.subscription.apply(
                lambda sub: f"/subscriptions/{sub}/providers/Microsoft.Authorization/roleDefinitions/"
                            f"{NETWORK_CONTRIBUTOR}"),
        )
        grants = self._reservation_access(control)
        aad: dict[str, Any] | None = None
        if s.rbac.mode == "azure" or s.rbac.admin_group_object_ids:
            aad = {"managed": True, "enable_azure_rbac": s.rbac.mode == "azure",
                   "admin_group_object_ids": s.rbac.admin_group_object_ids}
        self.system = system
        self.cluster = containerservice.ManagedCluster(
            "cluster",
            resource_group_name=self.rg.name,
            resource_name_=self.name,
            location=self.location,
            dns_prefix=self.name,
            kubernetes_version=s.kubernetes_version,
            node_resource_group=self.node_rg_name,
            identity={"type": "UserAssigned", "user_assigned_identities": [control.id]},
            sku={"name": "Base", "tier": s.sku_tier},
            enable_rbac=True,
            aad_profile=aad,
            api_server_access_profile=self._api_server_access(),
            disable_local_accounts=s.rbac.disable_local_accounts,
            oidc_issuer_profile={"enabled": True},
            security_profile={"workload_identity": {"enabled": True}},
            auto_upgrade_profile={"upgrade_channel": "patch", "node_os_upgrade_channel": "NodeImage"},
            network_profile={
                "network_plugin": "azure", "network_plugin_mode": "overlay", "pod_cidr": s.network.pod_cidr,
                "service_cidr": s.network.service_cidr, "dns_service_ip": s.network.dns_service_ip,
                "load_balancer_sku": "standard", "outbound_type": "loadBalancer",
            },
            agent_pool_profiles=[{**self._pool_profile(system), "name": system.provider_ref, "mode": "System"}],
            tags=self.tags,
            # The scaler owns the system pool's count too; the other pools are AgentPool resources.
            opts=pulumi.ResourceOptions(ignore_changes=["agentPoolProfiles[0].count"], depends_on=[join, *grants]),
        )

    def _reservation_access(self, control: managedidentity.UserAssignedIdentity) -> list[pulumi.Resource]:
        """The cluster's identity may deploy into each capacity reservation group a reserved pool names (AKS
        refuses the pool otherwise): a custom role defined on the group's resource group, assigned on the group."""
        groups = sorted({p.reservation.id for p in self.stack.pools
                         if p.capacity_type == "reserved" and p.reservation is not None and p.reservation.id})
        out: list[pulumi.Resource] = []
        for group in groups:
            rg_scope = group[:group.lower().index("/providers/")]  # /subscriptions/S/resourceGroups/G
            name = group.rsplit("/", 1)[-1]
            role = authorization.RoleDefinition(
                f"cluster-reservation-{name}",
                role_definition_id=role_definition_guid(self.name, self.rg_name, f"reservation:{group.lower()}"),
                scope=rg_scope, role_name=f"gpuburst cluster reservation {name} ({self.rg_name}/{self.name})",
                description="Deploy a cluster's reserved agent pool into a capacity reservation group.",
                role_type="CustomRole",
                permissions=[{"actions": list(CAPACITY_RESERVATION_ACTIONS), "not_actions": [],
                              "data_actions": [], "not_data_actions": []}],
                assignable_scopes=[rg_scope])
            out.append(authorization.RoleAssignment(
                f"cluster-reservation-{name}", scope=group, principal_id=control.principal_id,
                principal_type="ServicePrincipal", role_definition_id=role.id,
                description=f"AKS cluster {self.name} deploys reserved pools into {name}"))
        return out

    def _api_server_access(self) -> dict[str, Any]:
        """A private cluster (API server reachable only from the virtual network) unless the stack asks
        for a public endpoint, which is then limited to the stack's authorized IP ranges."""
        endpoint = self.settings.endpoint
        if endpoint.public:
            return {"enable_private_cluster": False, "authorized_ip_ranges": list(endpoint.public_cidrs)}
        return {"enable_private_cluster": True}

    def _pool_profile(self, pool: Pool) -> dict[str, Any]:
        """What an agent pool is made of, shared by the system pool profile and the AgentPool resources."""
        profile: dict[str, Any] = {
            "vm_size": pool.instance_types[0],
            "count": pool.min_size,  # at creation; then the scaler's
            "enable_auto_scaling": False,  # AKS's cluster autoscaler stays off: the scaler owns the count
            "availability_zones": pool.zones,
            "vnet_subnet_id": self.subnet_id,
            "os_type": "Linux",
            "os_sku": OS_SKU,
            "type": "VirtualMachineScaleSets",
            "orchestrator_version": self.settings.kubernetes_version,
            "max_pods": pool.max_pods,
            "os_disk_size_gb": pool.root_volume_gib,
            "node_labels": aks_node_labels(pool),
            "node_taints": aks_node_taints(pool),
            "scale_set_priority": "Spot" if pool.capacity_type == "spot" else "Regular",
            # Tags land on the pool's scale set in the node resource group, in cluster-autoscaler's Azure form.
            "tags": {**self.tags, **pool.to_tags(self.name)},
        }
        if pool.capacity_type == "spot":
            profile.update(scale_set_eviction_policy="Delete", spot_max_price=-1)
        if pool.capacity_type == "reserved" and pool.reservation is not None:
            profile["capacity_reservation_group_id"] = pool.reservation.id  # its VMs land in the group's capacity
        if pool.gpus:
            profile["gpu_profile"] = {"driver": "Install" if self.settings.gpu_driver == "install" else "None"}
        mig = pool.sharing.aks_gpu_instance_profile() if pool.sharing else None
        if mig:
            profile["gpu_instance_profile"] = mig
        return profile

    def _agent_pool(self, pool: Pool) -> containerservice.AgentPool:
        return containerservice.AgentPool(
            pool.name,
            resource_group_name=self.rg.name,
            resource_name_=self.cluster.name,
            agent_pool_name=pool.provider_ref,
            mode="User",
            **self._pool_profile(pool),
            opts=pulumi.ResourceOptions(ignore_changes=["count"]),
        )

    # --- the scaler's workload identity and its custom role -------------------------------------
    def _scaler_identity(self) -> None:
        scaler = self.settings.scaler
        self.scaler_identity = managedidentity.UserAssignedIdentity(
            "scaler", resource_group_name=self.rg.name, location=self.location,
            resource_name_=f"{self.name}-scaler", tags=self.tags)
        managedidentity.FederatedIdentityCredential(
            "scaler", resource_group_name=self.rg.name, resource_name_=self.scaler_identity.name,
            federated_identity_credential_resource_name=f"{self.name}-scaler",
            issuer=self.cluster.oidc_issuer_profile.apply(lambda p: p.issuer_url if p else ""),
            subject=f"system:serviceaccount:{scaler.namespace}:{scaler.service_account}",
            audiences=[WORKLOAD_IDENTITY_AUDIENCE],
        )
        rg_scope = self.rg.id
        kinds = {p.azure_kind for p in self.stack.pools}
        guid = role_definition_guid(self.name, self.rg_name)
        # The role is defined at the resource group (the narrowest scope a custom role's definition can
        # have that holds the cluster) and assigned on each agent pool the scaler owns, not on the
        # cluster or the node resource group: the agent pool API is all the scaler calls for AKS pools.
        scopes: dict[str, pulumi.Input[str]] = {
            pool.name: (self.agent_pools[pool.name].id if pool.name in self.agent_pools
                        else self.cluster.id.apply(lambda cid, ref=pool.provider_ref: f"{cid}/agentPools/{ref}"))
            for pool in self.stack.pools
        }
        assignable: list[pulumi.Input[str]] = [rg_scope]
        if "vmss" in kinds:
            # Plain scale sets (azure_kind vmss) are found by name in the node resource group, which AKS
            # creates (so it comes from the cluster's output); Azure cannot scope to scale sets not made yet.
            node_rg_scope = pulumi.Output.all(self.subscription, self.cluster.node_resource_group).apply(
                lambda a: f"/subscriptions/{a[0]}/resourceGroups/{a[1]}")
            scopes["node-resource-group"] = node_rg_scope
            assignable.append(node_rg_scope)
        role = authorization.RoleDefinition(
            "scaler",
            role_definition_id=guid,
            scope=rg_scope,
            role_name=azure_role_name("pools", self.rg_name, self.name),
            description=AZURE_ROLES["pools"][1],
            role_type="CustomRole",
            permissions=[{"actions": azure_scaler_actions(kinds), "not_actions": [],
                          "data_actions": [], "not_data_actions": []}],
            assignable_scopes=assignable,
        )
        for name, scope in sorted(scopes.items()):
            authorization.RoleAssignment(
                f"scaler-{name}", scope=scope, principal_id=self.scaler_identity.principal_id,
                principal_type="ServicePrincipal", role_definition_id=role.id,
                description=f"gpuburst scaler of {self.name}")
        self._quota_reader()

    def _quota_reader(self) -> None:
        """The region's compute usages (the quotas the planner caps pools by) are a subscription-level read: a
        role of that one action, defined and assigned on the subscription."""
        sub_scope = self.subscription.apply(lambda sub: f"/subscriptions/{sub}")
        role = authorization.RoleDefinition(
            "scaler-quotas",
            role_definition_id=role_definition_guid(self.name, self.rg_name, "scaler-quotas"),
            scope=sub_scope,
            role_name=azure_role_name("quotas", self.rg_name, self.name),
            description=AZURE_ROLES["quotas"][1],
            role_type="CustomRole",
            permissions=[{"actions": list(AZURE_QUOTA_ACTIONS), "not_actions": [],
                          "data_actions": [], "not_data_actions": []}],
            assignable_scopes=[sub_scope],
        )
        authorization.RoleAssignment(
            "scaler-quotas", scope=sub_scope, principal_id=self.scaler_identity.principal_id,
            principal_type="ServicePrincipal", role_definition_id=role.id,
            description=f"gpuburst scaler of {self.name}: quota reads")

    def _deployer_access(self) -> list[pulumi.Resource]:
        """With Azure RBAC the Owner of the subscription has no right inside the cluster: the identity
        that runs `pulumi up` (CI's deploy identity, or you) gets cluster admin on this cluster only."""
        if self.settings.rbac.mode != "azure":
            return []
        return [authorization.RoleAssignment(
            "deployer-cluster-admin", scope=self.cluster.id, principal_id=self.deployer,
            principal_type=self.settings.rbac.deployer_type,
            role_definition_id=self.subscription.apply(
                lambda sub: f"/subscriptions/{sub}/providers/Microsoft.Authorization/roleDefinitions/"
                            f"{AKS_RBAC_CLUSTER_ADMIN}"),
            description=f"the identity that deploys {self.name} installs its platform")]

    def ready(self) -> list[pulumi.Resource]:
        """What in-cluster deployments wait for: the cluster (its system pool is part of it) and, with
        Azure RBAC, the deploying identity's access to it."""
        return [self.cluster, *self.access]

    # --- outputs -----------------------------------------------------------------------------------
    def kubeconfig(self) -> pulumi.Output[str]:
        entra = self.settings.rbac.mode == "azure" or bool(self.settings.rbac.admin_group_object_ids)
        creds = containerservice.list_managed_cluster_user_credentials_output(
            resource_group_name=self.rg.name, resource_name=self.cluster.name, format="exec" if entra else None)
        text = creds.kubeconfigs.apply(lambda k: base64.b64decode(k[0].value).decode())
        return pulumi.Output.secret(text.apply(azurecli_login) if entra else text)

    def outputs(self) -> dict[str, Any]:
        scaler = self.settings.scaler
        return {
            "kubeconfig": self.kubeconfig(),
            "clusterName": self.cluster.name,
            "region": self.location,
            "resourceGroup": self.rg.name,
            "nodeResourceGroup": self.node_rg_name,
            "poolGroups": {self.system.name: self.system.provider_ref,
                           **{p: a.name for p, a in self.agent_pools.items()}},
            "oidcIssuerUrl": self.cluster.oidc_issuer_profile.apply(lambda p: p.issuer_url if p else ""),
            "scalerIdentityClientId": self.scaler_identity.client_id,
            "scalerNamespace": scaler.namespace,
            "scalerServiceAccount": scaler.service_account,
        }
