"""The AWS stack: network, EKS, one launch template and Auto Scaling group per pool, the scaler's IRSA role
and the spot interruption queue.

Everything a pool's group carries (tags, kubelet labels and taints, sizes, instance types, capacity
type) comes from the pool model; nothing here spells a label or tag key of the scaler (see
`scaler.core.model.keys`). The few AWS / Kubernetes integration tags below are not the scaler's and are
spelled here once.
"""

from __future__ import annotations

import base64
import ipaddress
import json
from typing import Any

import pulumi_aws as aws
import yaml

import pulumi
from gpuburst_infra.stack import AwsStackConfig, Stack
from gpuburst_infra.userdata import user_data
from scaler.core.config.pool import Pool
from scaler.core.model import keys
from scaler.permissions import (
    AWS_INTERRUPTION_EVENTS,
    aws_interruption_queue_policy,
    aws_interruption_rule_name,
    aws_irsa_trust_policy,
    aws_scaler_policy,
)

# Tags AWS integrations read (not the scaler's): subnet discovery for load balancers and the
# cluster ownership tag the AWS cloud provider looks for on nodes.
TAG_NAME = "Name"
TAG_K8S_CLUSTER_PREFIX = "kubernetes.io/cluster/"
TAG_ELB_INTERNAL = "kubernetes.io/role/internal-elb"
TAG_ELB_PUBLIC = "kubernetes.io/role/elb"

ARN = "arn:aws"  # the supported regions are all in the commercial partition
MANAGED_POLICY = f"{ARN}:iam::aws:policy/"
CLUSTER_ADMIN_ACCESS_POLICY = f"{ARN}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly",
                 "AmazonSSMManagedInstanceCore")
CORE_ADDONS = ("vpc-cni", "kube-proxy", "coredns")
# The VPC CNI gives each pod an address of the node's ENIs: without prefixes an m6i.large takes 29 pods
# and a g6.xlarge 58, far below the maxPods (110) the pools and the planner's templates promise. /28
# prefixes per ENI slot lift the limit above maxPods on every Nitro type (all of the catalogue's).
VPC_CNI_CONFIGURATION = {"env": {"ENABLE_PREFIX_DELEGATION": "true", "WARM_PREFIX_TARGET": "1"}}
ROOT_DEVICE = "/dev/xvda"  # AL2023's root device
# EventBridge patterns of what the scaler reacts to before AWS takes a node away.
# Tags an instance inherits from its group: who it belongs to. The node-template tags stay on the group.
PROPAGATED = (keys.TAG_POOL, keys.TAG_ROLE, keys.TAG_CLUSTER, TAG_NAME)


def ami_parameter(kubernetes_version: str, pool: Pool) -> str:
    """The SSM parameter of the EKS-optimized AL2023 image (NVIDIA variant for GPU pools)."""
    arch = "arm64" if pool.itype.arch == "arm64" else "x86_64"
    variant = "nvidia" if pool.gpus else "standard"
    base = f"/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023"
    return f"{base}/{arch}/{variant}/recommended/image_id"


def group_tags(stack: Stack, pool: Pool) -> list[dict[str, Any]]:
    tags = {
        **stack.settings.tags,
        TAG_NAME: f"{stack.cluster}-{pool.name}",
        keys.TAG_CLUSTER: stack.cluster,
        TAG_K8S_CLUSTER_PREFIX + stack.cluster: "owned",
        **pool.to_tags(stack.cluster),
    }
    propagated = (*PROPAGATED, TAG_K8S_CLUSTER_PREFIX + stack.cluster, *stack.settings.tags)
    return [{"key": k, "value": v, "propagate_at_launch": k in propagated} for k, v in sorted(tags.items())]


def _trust(service: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]})


class AwsStack:
    """Declares the stack's resources; `outputs` is what `__main__` exports."""

    def __init__(self, stack: Stack) -> None:
        assert isinstance(stack.settings, AwsStackConfig)
        self.stack = stack
        self.settings: AwsStackConfig = stack.settings
        self.name = stack.cluster
        self.tags = {keys.TAG_CLUSTER: self.name, **self.settings.tags}
        self.vpc_id, self.subnets = self._network()
        self._cluster()
        self._nodes()
        self.groups = {p.name: self._pool(p) for p in stack.pools}
        self._addons()
        self._interruptions()
        self._scaler_identity()

    # --- network ---------------------------------------------------------------------------------
    def _network(self) -> tuple[pulumi.Input[str], dict[str, pulumi.Input[str]]]:
        net = self.settings.network
        if not net.create:
            return str(net.vpc_id), dict(net.private_subnets)
        zones = self.stack.zones
        block = ipaddress.ip_network(str(net.cidr))
        quarters = list(block.subnets(prefixlen_diff=2))  # 3 private quarters, the 4th for public subnets
        publics = list(quarters[3].subnets(prefixlen_diff=2))
        owned = {TAG_K8S_CLUSTER_PREFIX + self.name: "owned"}
        vpc = aws.ec2.Vpc("vpc", cidr_block=str(block), enable_dns_hostnames=True, enable_dns_support=True,
                          tags={**self.tags, TAG_NAME: self.name})
        igw = aws.ec2.InternetGateway("igw", vpc_id=vpc.id, tags={**self.tags, TAG_NAME: self.name})
        public_rt = aws.ec2.RouteTable("public", vpc_id=vpc.id, tags={**self.tags, TAG_NAME: f"{self.name}-public"},
                                       routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}])
        nats: dict[str, aws.ec2.NatGateway] = {}
        private: dict[str, pulumi.Input[str]] = {}
        for i, zone in enumerate(zones):
            public = aws.ec2.Subnet(f"public-{zone}", vpc_id=vpc.id, availability_zone=zone,
                                    cidr_block=str(publics[i]), map_public_ip_on_launch=False,
                                    tags={**self.tags, **owned, TAG_ELB_PUBLIC: "1",
                                          TAG_NAME: f"{self.name}-public-{zone}"})
            aws.ec2.RouteTableAssociation(f"public-{zone}", subnet_id=public.id, route_table_id=public_rt.id)
            if net.nat == "per_zone" or i == 0:
                eip = aws.ec2.Eip(f"nat-{zone}", domain="vpc", tags={**self.tags, TAG_NAME: f"{self.name}-nat-{zone}"})
                nats[zone] = aws.ec2.NatGateway(f"nat-{zone}", subnet_id=public.id, allocation_id=eip.id,
                                                tags={**self.tags, TAG_NAME: f"{self.name}-{zone}"},
                                                opts=pulumi.ResourceOptions(depends_on=[igw]))
            nat = nats.get(zone, nats[zones[0]])
            subnet = aws.ec2.Subnet(f"private-{zone}", vpc_id=vpc.id, availability_zone=zone,
                                    cidr_block=str(quarters[i]),
                                    tags={**self.tags, **owned, TAG_ELB_INTERNAL: "1",
                                          TAG_NAME: f"{self.name}-private-{zone}"})
            rt = aws.ec2.RouteTable(f"private-{zone}", vpc_id=vpc.id,
                                    routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}],
                                    tags={**self.tags, TAG_NAME: f"{self.name}-private-{zone}"})
            aws.ec2.RouteTableAssociation(f"private-{zone}", subnet_id=subnet.id, route_table_id=rt.id)
            private[zone] = subnet.id
        return vpc.id, private

    # --- control plane ---------------------------------------------------------------------------
    def _cluster(self) -> None:
        s = self.settings
        role = aws.iam.Role("cluster", assume_role_policy=_trust("eks.amazonaws.com"), tags=self.tags)
        attach = aws.iam.RolePolicyAttachment("cluster-eks", role=role.name,
                                              policy_arn=MANAGED_POLICY + "AmazonEKSClusterPolicy")
        key = aws.kms.Key("secrets", description=f"{self.name}: envelope encryption of Kubernetes secrets",
                          enable_key_rotation=True, deletion_window_in_days=30, tags=self.tags)
        logs = aws.cloudwatch.LogGroup("control-plane", name=f"/aws/eks/{self.name}/cluster",
                                       retention_in_days=s.log_retention_days, tags=self.tags)
        self.cluster = aws.eks.Cluster(
            "cluster",
            name=self.name,
            version=s.kubernetes_version,
            role_arn=role.arn,
            vpc_config={
                "subnet_ids": [self.subnets[z] for z in sorted(self.subnets)],
                "endpoint_private_access": True,
                "endpoint_public_access": s.endpoint.public,
                "public_access_cidrs": s.endpoint.public_cidrs if s.endpoint.public else None,
            },
            access_config={"authentication_mode": "API", "bootstrap_cluster_creator_admin_permissions": True},
            bootstrap_self_managed_addons=False,
            encryption_config={"provider": {"key_arn": key.arn}, "resources": ["secrets"]},
            enabled_cluster_log_types=["api", "audit", "authenticator"],
            tags=self.tags,
            opts=pulumi.ResourceOptions(depends_on=[attach, logs]),
        )
        for i, principal in enumerate(s.admins):
            entry = aws.eks.AccessEntry(f"admin-{i}", cluster_name=self.cluster.name, principal_arn=principal,
                                        type="STANDARD", tags=self.tags)
            aws.eks.AccessPolicyAssociation(f"admin-{i}", cluster_name=self.cluster.name, principal_arn=principal,
                                            policy_arn=CLUSTER_ADMIN_ACCESS_POLICY, access_scope={"type": "cluster"},
                                            opts=pulumi.ResourceOptions(depends_on=[entry]))
        self.issuer = self.cluster.identities.apply(lambda ids: ids[0].oidcs[0].issuer)  # type: ignore[index]
        self.oidc = aws.iam.OpenIdConnectProvider("oidc", url=self.issuer, client_id_lists=["sts.amazonaws.com"],
                                                  tags=self.tags)

    # --- what every node shares ------------------------------------------------------------------
    def _nodes(self) -> None:
        self.node_role = aws.iam.Role("node", assume_role_policy=_trust("ec2.amazonaws.com"), tags=self.tags)
        attachments = [aws.iam.RolePolicyAttachment(f"node-{p}", role=self.node_role.name,
                                                    policy_arn=MANAGED_POLICY + p) for p in NODE_POLICIES]
        self.profile = aws.iam.InstanceProfile("node", role=self.node_role.name, tags=self.tags)
        self.node_access = aws.eks.AccessEntry("nodes", cluster_name=self.cluster.name,
                                               principal_arn=self.node_role.arn, type="EC2_LINUX", tags=self.tags,
                                               opts=pulumi.ResourceOptions(depends_on=attachments))
        self.node_sg = aws.ec2.SecurityGroup(
            "nodes", vpc_id=self.vpc_id, description=f"{self.name}: node to node (incl. NCCL) and egress",
            ingress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "self": True,
                      "description": "node to node"}],
            egress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "cidr_blocks": ["0.0.0.0/0"],
                     "description": "image pulls, AWS APIs"}],
            # Not tagged kubernetes.io/cluster/<name>: the cluster security group EKS made carries that tag,
            # and the cloud provider and the load balancer controller want exactly one tagged group a node.
            tags={**self.tags, TAG_NAME: f"{self.name}-nodes"},
        )
        # Nodes also carry the cluster security group EKS made: it admits the control plane both ways.
        self.cluster_sg = self.cluster.vpc_config.apply(lambda v: v.cluster_security_group_id)

    # --- one launch template and Auto Scaling group per pool -------------------------------------
    def _pool(self, pool: Pool) -> aws.autoscaling.Group:
        ref = str(pool.provider_ref)
        ami = aws.ssm.get_parameter_output(name=ami_parameter(self.settings.kubernetes_version, pool)).value
        boot = pulumi.Output.all(self.cluster.endpoint, self.cluster.certificate_authority.data,
                                 self.cluster.kubernetes_network_config.service_ipv4_cidr).apply(
            lambda a: base64.b64encode(user_data(pool, cluster=self.name, endpoint=a[0], certificate_authority=a[1],
                                                 service_cidr=a[2]).encode()).decode())
        owned = {**self.tags, keys.TAG_POOL: pool.name}
        template = aws.ec2.LaunchTemplate(
            pool.name,
            name=ref,
            description=f"{self.name} pool {pool.name}",
            image_id=ami,
            user_data=boot,
            iam_instance_profile={"arn": self.profile.arn},
            vpc_security_group_ids=[self.cluster_sg, self.node_sg.id],
            metadata_options={"http_endpoint": "enabled", "http_tokens": "required",
                              "http_put_response_hop_limit": 1},
            block_device_mappings=[{"device_name": ROOT_DEVICE, "ebs": {
                "volume_size": pool.root_volume_gib, "volume_type": "gp3", "encrypted": "true",
                "delete_on_termination": "true"}}],
            tag_specifications=[{"resource_type": "volume", "tags": owned},
                                {"resource_type": "network-interface", "tags": owned}],
            update_default_version=True,
            tags=owned,
            **block_market(pool),
            # A warm pool's group launches from the template (AWS refuses a warm pool with a mixed instances policy).
            **({"instance_type": pool.instance_types[0]} if pool.warm is not None else {}),
        )
        if pool.capacity_type == "spot":
            distribution = {"on_demand_base_capacity": 0, "on_demand_percentage_above_base_capacity": 0,
                            "spot_allocation_strategy": "price-capacity-optimized"}
        else:
            distribution = {"on_demand_base_capacity": 0, "on_demand_percentage_above_base_capacity": 100,
                            "on_demand_allocation_strategy": "prioritized"}
        spec = {"launch_template_id": template.id, "version": template.latest_version.apply(str)}
        # A Capacity Block's group launches its one instance type from the template (market type capacity-block);
        # the others through a mixed instances policy.
        launch: dict[str, Any] = {"launch_template": {"id": template.id, "version": spec["version"]}} \
            if pool.capacity_type == "capacity-block" or pool.warm is not None else {
            "mixed_instances_policy": {
                "instances_distribution": distribution,
                "launch_template": {"launch_template_specification": spec,
                                    "overrides": [{"instance_type": t} for t in pool.instance_types]},
            }}
        return aws.autoscaling.Group(
            pool.name,
            name=ref,
            min_size=pool.min_size,
            max_size=pool.max_size,
            desired_capacity=pool.min_size,  # at creation only: the scaler owns it (ignore_changes)
            protect_from_scale_in=True,
            vpc_zone_identifiers=[self.subnets[z] for z in pool.zones],
            **launch,
            **reserved_capacity(pool),
            **warm_pool(pool),
            suspended_processes=["AZRebalance"],  # only the scaler removes nodes
            capacity_rebalance=False,  # rebalance recommendations reach the scaler through the queue
            health_check_type="EC2",
            wait_for_capacity_timeout="0",
            force_delete=True,  # protected instances would otherwise keep `pulumi destroy` waiting forever
            tags=group_tags(self.stack, pool),
            opts=pulumi.ResourceOptions(ignore_changes=["desiredCapacity"], depends_on=[self.node_access]),
        )

    def ready(self) -> list[pulumi.Resource]:
        """What in-cluster deployments wait for: the core add-ons (which wait for the system nodes)."""
        return list(self.addons)

    def _addons(self) -> None:
        system = [g for p, g in self.groups.items() if self.stack.scaler.pool(p).role == "system"]
        self.addons = [
            aws.eks.Addon(name, cluster_name=self.cluster.name, addon_name=name,
                          resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="PRESERVE",
                          configuration_values=json.dumps(VPC_CNI_CONFIGURATION) if name == "vpc-cni" else None,
                          tags=self.tags,
                          opts=pulumi.ResourceOptions(depends_on=system if name == "coredns" else []))
            for name in CORE_ADDONS
        ]

    # --- spot interruptions and the scaler's identity --------------------------------------------
    def _interruptions(self) -> None:
        self.queue = aws.sqs.Queue("interruptions", name=f"{self.name}-interruptions",
                                   message_retention_seconds=300, sqs_managed_sse_enabled=True, tags=self.tags)
        rules = []
        for name, detail_type in AWS_INTERRUPTION_EVENTS.items():
            rule = aws.cloudwatch.EventRule(name, name=aws_interruption_rule_name(self.name, name), tags=self.tags,
                                            description=f"{detail_type} -> {self.name}'s scaler",
                                            event_pattern=json.dumps({"source": ["aws.ec2"],
                                                                      "detail-type": [detail_type]}))
            aws.cloudwatch.EventTarget(name, rule=rule.name, arn=self.queue.arn)
            rules.append(rule)
        policy = pulumi.Output.all(self.queue.arn, *(r.arn for r in rules)).apply(
            lambda a: json.dumps(aws_interruption_queue_policy(a[0], list(a[1:]))))
        aws.sqs.QueuePolicy("interruptions", queue_url=self.queue.url, policy=policy)

    def _scaler_identity(self) -> None:
        scaler = self.settings.scaler
        subject = f"system:serviceaccount:{scaler.namespace}:{scaler.service_account}"
        trust = pulumi.Output.all(self.oidc.arn, self.issuer).apply(
            lambda a: json.dumps(aws_irsa_trust_policy(a[0], a[1], subject)))
        self.scaler_role = aws.iam.Role("scaler", name=f"{self.name}-scaler", assume_role_policy=trust,
                                        description=f"gpuburst scaler of {self.name} (IRSA: {subject})", tags=self.tags)
        aws.iam.RolePolicy("scaler", role=self.scaler_role.id,
                           policy=self.queue.arn.apply(lambda arn: json.dumps(aws_scaler_policy(self.name, arn))))

    # --- outputs -----------------------------------------------------------------------------------
    def kubeconfig(self) -> pulumi.Output[str]:
        def render(a: list[Any]) -> str:
            cluster = {"server": a[0], "certificate-authority-data": a[1]}
            user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
                             "args": ["eks", "get-token", "--cluster-name", self.name,
                                      "--region", self.stack.region, "--output", "json"]}}
            return yaml.safe_dump({
                "apiVersion": "v1", "kind": "Config", "current-context": self.name,
                "clusters": [{"name": self.name, "cluster": cluster}],
                "users": [{"name": self.name, "user": user}],
                "contexts": [{"name": self.name, "context": {"cluster": self.name, "user": self.name}}],
            }, sort_keys=False)
        return pulumi.Output.secret(pulumi.Output.all(self.cluster.endpoint,
                                                      self.cluster.certificate_authority.data).apply(render))

    def outputs(self) -> dict[str, Any]:
        scaler = self.settings.scaler
        return {
            "kubeconfig": self.kubeconfig(),
            "clusterName": self.cluster.name,
            "region": self.stack.region,
            "poolGroups": {p: g.name for p, g in self.groups.items()},
            "interruptionQueueUrl": self.queue.url,
            "scalerRoleArn": self.scaler_role.arn,
            "scalerNamespace": scaler.namespace,
            "scalerServiceAccount": scaler.service_account,
            "oidcProviderArn": self.oidc.arn,
            "nodeRoleArn": self.node_role.arn,
        }


def block_market(pool: Pool) -> dict[str, Any]:
    """A Capacity Block pool's launch template: market type capacity-block, into the block's reservation."""
    r = pool.reservation
    if pool.capacity_type != "capacity-block" or r is None:
        return {}
    return {"instance_market_options": {"market_type": "capacity-block"},
            "capacity_reservation_specification": {"capacity_reservation_target": {"capacity_reservation_id": r.id}}}


def reserved_capacity(pool: Pool) -> dict[str, Any]:
    """A reserved pool's group: launch into its On-Demand Capacity Reservation (by id or resource group), only
    there or there first, as the pool says."""
    r = pool.reservation
    if pool.capacity_type != "reserved" or r is None:
        return {}
    target = {"capacity_reservation_ids": [r.id]} if r.id else {"capacity_reservation_resource_group_arns":
                                                                 [r.resource_group]}
    return {"capacity_reservation_specification": {"capacity_reservation_preference": r.preference,
                                                   "capacity_reservation_target": target}}


def warm_pool(pool: Pool) -> dict[str, Any]:
    """A pool's warm pool on its group: exactly `size` instances (MinSize = MaxGroupPreparedCapacity = size, so the
    group keeps that many whatever its desired size), stopped or running (scaler/core/config/warm.py)."""
    w = pool.warm
    if w is None or not w.size:
        return {}
    return {"warm_pool": {"pool_state": w.state.capitalize(), "min_size": w.size,
                          "max_group_prepared_capacity": w.size}}
