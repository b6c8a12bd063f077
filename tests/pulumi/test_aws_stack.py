"""The AWS stack, run offline with mocks on Pulumi.aws-dev.yaml and Pulumi.aws-prod.yaml.

What a user would notice: GPU groups that cannot scale from zero, lose their protection, lack the
node-template tags cluster-autoscaler / the scaler read, boot nodes whose labels and taints differ
from the pool model, or a scaler role that can touch groups of other clusters.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from stack_helpers import ROOT, asg_tags, kubelet_flags, parse_labels, parse_taints, policy, rendered

from scaler.core.config.pool import Pool
from scaler.core.config.settings import parse_config
from scaler.core.model import keys

STACKS = ["aws-dev", "aws-prod"]
GROUP = "aws:autoscaling/group:Group"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


def _stack(name: str) -> Any:
    from gpuburst_infra.offline import stack_file_config
    from gpuburst_infra.stack import load_stack

    config, _ = stack_file_config(ROOT / f"Pulumi.{name}.yaml")
    decoded = {k: json.loads(v) if v[:1] in "[{" else v for k, v in config.items()}
    return load_stack(decoded, f"Pulumi.{name}.yaml")


class _Call:
    def __init__(self, token: str, args: dict[str, Any]) -> None:
        self.token, self.args, self.provider = token, args, ""


def _zone_of_subnet(r: Any) -> dict[str, str]:
    """subnet id -> zone (the ASG's vpcZoneIdentifiers hold ids)."""
    return {x.id: x.inputs["availabilityZone"] for x in r.of_type("aws:ec2/subnet:Subnet")}


@pytest.mark.parametrize("stack", STACKS)
def test_every_pool_has_one_group_sized_by_the_model_and_owned_by_the_scaler(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    groups = {g.name: g for g in r.of_type(GROUP)}
    assert set(groups) == {p.name for p in s.pools}
    for pool in s.pools:
        g = groups[pool.name]
        assert g.inputs["name"] == pool.provider_ref == f"{s.cluster}-{pool.name}"
        assert (g.inputs["minSize"], g.inputs["maxSize"]) == (pool.min_size, pool.max_size)
        assert g.inputs["desiredCapacity"] == pool.min_size  # at creation only ...
        assert g.ignore_changes == ["desiredCapacity"]  # ... then the scaler owns it
        assert g.inputs["protectFromScaleIn"] is True
        assert "AZRebalance" in g.inputs["suspendedProcesses"]
        if pool.role == "gpu":
            assert pool.min_size == 0 and g.inputs["minSize"] == 0
    assert r.outputs["poolGroups"] == {p.name: p.provider_ref for p in s.pools}


@pytest.mark.parametrize("stack", STACKS)
def test_mixed_instances_policy_follows_capacity_type(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    for pool in s.pools:
        mip = r.one(GROUP, pool.name).inputs["mixedInstancesPolicy"]
        dist = mip["instancesDistribution"]
        assert [o["instanceType"] for o in mip["launchTemplate"]["overrides"]] == pool.instance_types
        if pool.capacity_type == "spot":
            assert dist["spotAllocationStrategy"] == "price-capacity-optimized"
            assert dist["onDemandPercentageAboveBaseCapacity"] == 0 and dist["onDemandBaseCapacity"] == 0
        else:
            assert dist["onDemandPercentageAboveBaseCapacity"] == 100
            assert "spotAllocationStrategy" not in dist


@pytest.mark.parametrize("stack", STACKS)
def test_groups_span_exactly_the_pools_zones(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    zone_of = _zone_of_subnet(r)
    for pool in s.pools:
        subnets = r.one(GROUP, pool.name).inputs["vpcZoneIdentifiers"]
        assert sorted(zone_of[x] for x in subnets) == sorted(pool.zones)


@pytest.mark.parametrize("stack", STACKS)
def test_gpu_groups_carry_the_node_template_tags_of_their_labels_taints_and_gpus(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    gpu_pools = [p for p in s.pools if p.role == "gpu"]
    assert gpu_pools
    for pool in gpu_pools:
        tags = asg_tags(r.one(GROUP, pool.name).inputs)
        assert tags[keys.TAG_CA_ENABLED] == "true"
        assert tags[keys.tag_ca_cluster(s.cluster)] == "owned"
        assert tags[keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_GPU] == str(pool.gpus) != "0"
        assert tags[keys.TAG_CA_TEMPLATE_LABEL + keys.LABEL_GPU_PRESENT] == "true"
        for k, v in pool.node_labels().items():
            assert tags[keys.TAG_CA_TEMPLATE_LABEL + k] == v
        for t in pool.node_taints():
            assert tags[keys.TAG_CA_TEMPLATE_TAINT + t.key] == f"{t.value}:{t.effect}"
        assert keys.TAG_CA_TEMPLATE_TAINT + keys.TAINT_GPU in tags
        if pool.min_pod_gpus > 1:
            assert tags[keys.TAG_CA_TEMPLATE_TAINT + keys.TAINT_MIN_GPUS] == f"{pool.min_pod_gpus}:NoSchedule"


@pytest.mark.parametrize("stack", STACKS)
def test_group_tags_round_trip_through_from_tags_to_the_same_pool(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    zone_of = _zone_of_subnet(r)
    for pool in s.pools:
        g = r.one(GROUP, pool.name).inputs
        back = Pool.from_tags(
            asg_tags(g), cloud="aws", cluster=s.cluster, provider_ref=g["name"],
            instance_types=[o["instanceType"] for o in g["mixedInstancesPolicy"]["launchTemplate"]["overrides"]],
            zones=sorted(zone_of[x] for x in g["vpcZoneIdentifiers"]),
            min_size=g["minSize"], max_size=g["maxSize"], catalogue=s.scaler.full_catalogue(),
        )
        expected = pool.model_copy(update={"zones": sorted(pool.zones)})
        assert back.model_dump() == expected.model_dump(), pool.name
        assert back.template_node().labels == expected.template_node().labels
        assert back.template_node().taints == expected.template_node().taints


def test_only_identity_tags_propagate_to_instances() -> None:
    r, s = rendered("aws-prod"), _stack("aws-prod")
    for pool in s.pools:
        propagated = {t["key"] for t in r.one(GROUP, pool.name).inputs["tags"] if t["propagateAtLaunch"]}
        assert keys.TAG_POOL in propagated and keys.TAG_CLUSTER in propagated and "cost-center" in propagated
        assert not any(k.startswith(keys.TAG_CA_PREFIX) for k in propagated)


@pytest.mark.parametrize("stack", STACKS)
def test_launch_templates_boot_nodes_with_the_pools_labels_and_taints(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    for pool in s.pools:
        lt = r.one(TEMPLATE, pool.name).inputs
        flags = kubelet_flags(lt["userData"])
        assert parse_labels(flags["node-labels"]) == pool.node_labels()
        expected_taints = {(t.key, t.value, t.effect) for t in pool.node_taints()}
        assert parse_taints(flags["register-with-taints"]) if expected_taints else "register-with-taints" not in flags
        if expected_taints:
            assert parse_taints(flags["register-with-taints"]) == expected_taints
        # The ASG uses this template's newest version.
        spec = r.one(GROUP, pool.name).inputs["mixedInstancesPolicy"]["launchTemplate"]["launchTemplateSpecification"]
        assert spec["version"] == "1"


@pytest.mark.parametrize("stack", STACKS)
def test_launch_templates_require_imdsv2_and_encrypt_a_gp3_root_volume(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    for pool in s.pools:
        lt = r.one(TEMPLATE, pool.name).inputs
        assert lt["metadataOptions"]["httpTokens"] == "required"
        assert lt["metadataOptions"]["httpPutResponseHopLimit"] == 1
        (root,) = lt["blockDeviceMappings"]
        assert root["deviceName"] == "/dev/xvda"
        assert root["ebs"]["encrypted"] == "true" and root["ebs"]["volumeType"] == "gp3"
        assert root["ebs"]["volumeSize"] == pool.root_volume_gib


@pytest.mark.parametrize("stack", STACKS)
def test_amis_come_from_the_eks_al2023_parameter_for_the_cluster_version(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    version = s.settings.kubernetes_version
    from gpuburst_infra.offline import CloudMocks

    asked = {a["name"] for token, a in r.calls if token == "aws:ssm/getParameter:getParameter"}
    answer = CloudMocks(s.region)
    for pool in s.pools:
        variant = "nvidia" if pool.gpus else "standard"
        param = f"/aws/service/eks/optimized-ami/{version}/amazon-linux-2023/x86_64/{variant}/recommended/image_id"
        assert param in asked
        ami = answer.call(_Call("aws:ssm/getParameter:getParameter", {"name": param}))["value"]
        assert r.one(TEMPLATE, pool.name).inputs["imageId"] == ami
    assert r.one("aws:eks/cluster:Cluster", "cluster").inputs["version"] == version


def _mutating(action: str) -> bool:
    verb = action.split(":", 1)[1]
    return not verb.startswith(("Describe", "List", "Get"))


@pytest.mark.parametrize("stack", STACKS)
def test_scaler_policy_has_no_unconditioned_mutating_action(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    doc = policy(r.one("aws:iam/rolePolicy:RolePolicy", "scaler").inputs["policy"])
    queue_arn = f"arn:aws:sqs:{s.region}:123456789012:queue/{s.cluster}-interruptions"
    mutating = 0
    for st in doc["Statement"]:
        assert st["Effect"] == "Allow"
        actions = [st["Action"]] if isinstance(st["Action"], str) else st["Action"]
        assert not any("*" in a for a in actions)
        for action in filter(_mutating, actions):
            mutating += 1
            if st["Resource"] == "*":
                cond = st["Condition"]["StringEquals"]
                assert cond[f"aws:ResourceTag/{keys.tag_ca_cluster(s.cluster)}"] == "owned", action
            else:
                assert st["Resource"] == queue_arn, action
    assert mutating >= 2


@pytest.mark.parametrize("stack", STACKS)
def test_scaler_role_trusts_only_its_service_account_through_the_clusters_oidc_provider(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    role = r.one("aws:iam/role:Role", "scaler").inputs
    (st,) = policy(role["assumeRolePolicy"])["Statement"]
    assert st["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert st["Principal"]["Federated"] == r.outputs["oidcProviderArn"]
    cond = st["Condition"]["StringEquals"]
    issuer = r.one("aws:iam/openIdConnectProvider:OpenIdConnectProvider", "oidc").inputs["url"]
    host = issuer.removeprefix("https://")
    assert cond == {f"{host}:sub": f"system:serviceaccount:{r.outputs['scalerNamespace']}:"
                                   f"{r.outputs['scalerServiceAccount']}", f"{host}:aud": "sts.amazonaws.com"}
    assert r.outputs["scalerRoleArn"].endswith(f":role/{s.cluster}-scaler")


@pytest.mark.parametrize("stack", STACKS)
def test_interruption_events_reach_the_queue(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    rules = {x.name: json.loads(x.inputs["eventPattern"]) for x in r.of_type("aws:cloudwatch/eventRule:EventRule")}
    assert {tuple(p["detail-type"]) for p in rules.values()} == {
        ("EC2 Spot Instance Interruption Warning",), ("EC2 Instance Rebalance Recommendation",),
        ("EC2 Instance State-change Notification",)}
    queue_arn = f"arn:aws:sqs:{s.region}:123456789012:queue/{s.cluster}-interruptions"
    targets = r.of_type("aws:cloudwatch/eventTarget:EventTarget")
    assert {t.inputs["arn"] for t in targets} == {queue_arn} and len(targets) == 3
    qp = policy(r.one("aws:sqs/queuePolicy:QueuePolicy", "interruptions").inputs["policy"])
    allow = next(x for x in qp["Statement"] if x["Effect"] == "Allow")
    assert len(allow["Condition"]["ArnEquals"]["aws:SourceArn"]) == 3
    assert r.outputs["interruptionQueueUrl"].endswith(f"/{s.cluster}-interruptions")


@pytest.mark.parametrize("stack", STACKS)
def test_cluster_uses_access_entries_encryption_and_core_addons(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    cluster = r.one("aws:eks/cluster:Cluster", "cluster").inputs
    assert cluster["accessConfig"]["authenticationMode"] == "API"
    assert cluster["encryptionConfig"]["resources"] == ["secrets"]
    nodes = r.one("aws:eks/accessEntry:AccessEntry", "nodes").inputs
    assert nodes["type"] == "EC2_LINUX"
    assert {a.inputs["addonName"] for a in r.of_type("aws:eks/addon:Addon")} == {"vpc-cni", "kube-proxy", "coredns"}
    admins = r.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert [a.inputs["principalArn"] for a in admins] == s.settings.admins


@pytest.mark.parametrize("stack", STACKS)
def test_nodes_get_addresses_for_the_pods_they_promise(stack: str) -> None:
    # maxPods is 110 on every pool (and in the planner's templates); the VPC CNI hands out /28 prefixes
    # so that a g6.xlarge is not limited to the 58 addresses of its ENIs.
    r, s = rendered(stack), _stack(stack)
    cni = r.one("aws:eks/addon:Addon", "vpc-cni").inputs
    assert json.loads(cni["configurationValues"])["env"]["ENABLE_PREFIX_DELEGATION"] == "true"
    assert {p.max_pods for p in s.pools} == {110}
    # One security group a node carries the cluster tag (EKS's cluster group); the node group must not,
    # or LoadBalancer Services fail with "multiple tagged security groups".
    sg = r.one("aws:ec2/securityGroup:SecurityGroup", "nodes").inputs
    assert not any(k.startswith("kubernetes.io/cluster/") for k in sg["tags"])


def test_prod_network_has_a_nat_gateway_per_zone_and_dev_one() -> None:
    prod, dev = rendered("aws-prod"), rendered("aws-dev")
    assert len(prod.of_type("aws:ec2/natGateway:NatGateway")) == 3
    assert len(dev.of_type("aws:ec2/natGateway:NatGateway")) == 1
    for r in (prod, dev):
        private = [x for x in r.of_type("aws:ec2/subnet:Subnet") if x.name.startswith("private-")]
        assert all("kubernetes.io/role/internal-elb" in x.inputs["tags"] for x in private)


@pytest.mark.parametrize("stack", STACKS)
def test_outputs_kubeconfig_is_secret_and_scaler_config_is_the_same_pools(stack: str) -> None:
    r, s = rendered(stack), _stack(stack)
    assert "kubeconfig" in r.secret_outputs
    kubeconfig = yaml.safe_load(r.outputs["kubeconfig"])
    assert kubeconfig["users"][0]["user"]["exec"]["args"][:4] == ["eks", "get-token", "--cluster-name", s.cluster]
    assert r.outputs["clusterName"] == s.cluster
    config = parse_config(yaml.safe_load(r.outputs["scalerConfig"]), "scalerConfig")
    assert config == s.scaler
    assert [p.provider_ref for p in config.pools] == [g for g in r.outputs["poolGroups"].values()]


def test_existing_network_is_used_as_given(tmp_path: Any) -> None:
    from gpuburst_infra.offline import render
    from stack_helpers import write_stack

    subnets = {"us-east-1a": "subnet-0aaaaaaaaaaaaaaaa", "us-east-1b": "subnet-0bbbbbbbbbbbbbbbb"}

    def edit(c: dict[str, Any]) -> None:
        c["gpuburst:network"] = {"vpc_id": "vpc-0123456789abcdef0", "private_subnets": subnets}

    r = render(write_stack(ROOT / "Pulumi.aws-dev.yaml", tmp_path, edit))
    assert not r.of_type("aws:ec2/vpc:Vpc") and not r.of_type("aws:ec2/subnet:Subnet")
    assert r.one(GROUP, "gpu1-spot-b").inputs["vpcZoneIdentifiers"] == [subnets["us-east-1b"]]
    assert r.one("aws:ec2/securityGroup:SecurityGroup", "nodes").inputs["vpcId"] == "vpc-0123456789abcdef0"


def test_reserved_and_block_pools_launch_into_their_reservations(tmp_path: Any) -> None:
    """The same pool model: a reserved pool's group targets its On-Demand Capacity Reservation (only there, or
    there first), a Capacity Block's launch template buys into the block with market type capacity-block."""
    from gpuburst_infra.offline import render
    from stack_helpers import write_stack

    rg_arn = "arn:aws:resource-groups:us-east-1:123456789012:group/gpu-reservations"

    def edit(c: dict[str, Any]) -> None:
        c["gpuburst:pools"] += [
            {"name": "gpu1-reserved", "capacity_type": "reserved", "instance_types": ["g6.xlarge"],
             "zones": ["us-east-1a"], "max": 4, "fallback": "gpu1-spot-a",
             "reservation": {"id": "cr-0123456789abcdef0"}},
            {"name": "gpu1-reserved-rg", "capacity_type": "reserved", "instance_types": ["g6.xlarge", "g5.xlarge"],
             "zones": ["us-east-1a"], "max": 4, "fallback": "gpu1-spot-a",
             "reservation": {"resource_group": rg_arn, "preference": "capacity-reservations-first"}},
            {"name": "gpu8-block", "capacity_type": "capacity-block", "instance_types": ["p5.48xlarge"],
             "zones": ["us-east-1a"], "min_pod_gpus": 8, "max": 2, "fallback": "gpu8-od",
             "reservation": {"id": "cr-0fedcba9876543210", "start": "2026-12-01T11:30:00Z",
                             "end": "2026-12-08T11:30:00Z"}},
            {"name": "gpu8-od", "instance_types": ["g6.48xlarge"], "zones": ["us-east-1a"], "min_pod_gpus": 8,
             "max": 2}]

    r = render(write_stack(ROOT / "Pulumi.aws-dev.yaml", tmp_path, edit))
    assert r.one(GROUP, "gpu1-reserved").inputs["capacityReservationSpecification"] == {
        "capacityReservationPreference": "capacity-reservations-only",
        "capacityReservationTarget": {"capacityReservationIds": ["cr-0123456789abcdef0"]}}
    assert r.one(GROUP, "gpu1-reserved-rg").inputs["capacityReservationSpecification"] == {
        "capacityReservationPreference": "capacity-reservations-first",
        "capacityReservationTarget": {"capacityReservationResourceGroupArns": [rg_arn]}}
    assert "instanceMarketOptions" not in r.one(TEMPLATE, "gpu1-reserved").inputs
    block = r.one(TEMPLATE, "gpu8-block").inputs
    assert block["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert block["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0fedcba9876543210"}}
    group = r.one(GROUP, "gpu8-block").inputs
    assert "mixedInstancesPolicy" not in group and group["launchTemplate"]["id"]
    assert "capacityReservationSpecification" not in r.one(GROUP, "gpu1-spot-a").inputs
    assert "capacityReservationSpecification" not in r.one(TEMPLATE, "gpu1-spot-a").inputs
    # The block's dates and the reservations are tags the scaler reads back (Pool.from_tags).
    tags = {t["key"]: t["value"] for t in group["tags"]}
    assert tags[keys.TAG_RESERVATION_PREFIX + "end"] == "2026-12-08T11:30:00Z"


def test_a_warm_pool_is_declared_on_its_group_from_the_pool_model(tmp_path: Any) -> None:
    """`warm:` becomes the group's warm pool of exactly that size (MinSize = MaxGroupPreparedCapacity), launched from
    the template (AWS refuses a warm pool with a mixed instances policy), and its nodes join only once in service."""
    import base64
    import email

    from gpuburst_infra.offline import render
    from stack_helpers import write_stack

    def edit(c: dict[str, Any]) -> None:
        c["gpuburst:pools"] += [
            {"name": "gpu1-warm", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 8,
             "warm": {"size": 2}},
            {"name": "gpu1-hot", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 8,
             "warm": {"size": 1, "state": "running"}}]

    r = render(write_stack(ROOT / "Pulumi.aws-dev.yaml", tmp_path, edit))
    group = r.one(GROUP, "gpu1-warm").inputs
    assert group["warmPool"] == {"poolState": "Stopped", "minSize": 2, "maxGroupPreparedCapacity": 2}
    assert r.one(GROUP, "gpu1-hot").inputs["warmPool"]["poolState"] == "Running"
    assert "mixedInstancesPolicy" not in group and group["launchTemplate"]["id"]
    template = r.one(TEMPLATE, "gpu1-warm").inputs
    assert template["instanceType"] == "g6.xlarge"
    scripts = [p.get_payload() for p in email.message_from_string(base64.b64decode(template["userData"]).decode())
               .walk() if p.get_content_type() == "text/x-shellscript"]
    assert len(scripts) == 1 and "target-lifecycle-state" in scripts[0] and "Warmed:*" in scripts[0]
    for cold in ("gpu1-spot-a",):  # a pool without one: as before
        assert "warmPool" not in r.one(GROUP, cold).inputs and "mixedInstancesPolicy" in r.one(GROUP, cold).inputs
        assert "instanceType" not in r.one(TEMPLATE, cold).inputs
