"""GPUs shared by memory (DRA consumable capacity, DRAConsumableCapacity beta and on in 1.37) on the real
control plane: a pool declaring `gpu_sharing: {memory: {step_gib: 4}}` scales from zero, the node agent
publishes the slices of the nodes the scaler bought (GPUs that allow multiple allocations, `memory`
consumable in 4 GiB steps), and the real kube-scheduler allocates the pods' claims as shares of them: as many
nodes as the planner bought, no GPU holding more than its memory. Then pods that fit beside the shares the
running nodes hold (read back from the claims' status.allocation ...consumedCapacity) buy nothing."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal

import pytest

from scaler.core.dra import nvidia
from scaler.core.model.quantity import parse_quantity
from tests.controlplane import diffgen
from tests.controlplane.fixtures import Cluster
from tests.controlplane.world import RealWorld, claim_pod, create_all, moto_world
from tests.fakes.aws import MotoAws

pytestmark = pytest.mark.integration

CONFIG = {
    "cluster": "burst", "cloud": "aws", "region": "us-east-1",
    "timings": {"scan_interval": 10, "unneeded_time": 600, "provision_timeout": 600},
    "pools": [{"name": "l4-shared", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 4,
               "gpu_allocation": "dra", "gpu_sharing": {"memory": {"step_gib": 4}}}],
}
TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu-4gi", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": nvidia.GPU_CLASS.name, "capacity": {"requests": {"memory": "4Gi"}}}}]}}}}


@pytest.fixture
def world(aws: MotoAws, cluster: Cluster) -> Iterator[RealWorld]:
    with moto_world(aws, cluster, CONFIG, kubelet=True) as w:
        yield w


def shares(cluster: Cluster) -> dict[tuple[str, str], list[Decimal]]:
    """Per GPU (pool, device), the memory each allocated claim's share of it consumes."""
    claims = cluster.custom.list_namespaced_custom_object("resource.k8s.io", "v1", "default", "resourceclaims")
    out: dict[tuple[str, str], list[Decimal]] = defaultdict(list)
    for c in claims["items"]:
        for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []):
            assert r.get("shareID"), r  # a share, not the whole device
            out[(r["pool"], r["device"])].append(parse_quantity(r["consumedCapacity"]["memory"]))
    return out


def test_the_real_scheduler_shares_the_gpus_the_scaler_bought_as_it_planned(world: RealWorld,
                                                                            cluster: Cluster) -> None:
    create_all(cluster.admin, [diffgen.device_class(c) for c in nvidia.DEVICE_CLASSES])
    create_all(cluster.admin, [TEMPLATE, *(claim_pod(f"infer-{i}", "gpu-4gi") for i in range(7))])
    plan = world.step()
    assert plan is not None and [(u.pool, u.count) for u in plan.scale_ups] == [("l4-shared", 2)], plan
    for _ in range(4):
        world.step(20)  # the kubelets register, the driver publishes, kube-scheduler binds
        if not world.pending():
            break
    line = world.report(2)
    assert world.pending() == [] and len(world.bought) == 2, line
    memory = world.config.pool("l4-shared").dra_slices("n")[0].devices[0].capacity["memory"]  # one L4's
    held = shares(cluster)
    assert sum(len(v) for v in held.values()) == 7 and len(held) == 2, held
    assert all(sum(v) <= memory and all(x == 4 * 2**30 for x in v) for v in held.values()), held

    # Room is left beside the shares the two GPUs hold (10 fit, 7 held): three more buy nothing.
    create_all(cluster.admin, [claim_pod(f"more-{i}", "gpu-4gi") for i in range(3)])
    plan = world.step()
    assert plan is not None and plan.scale_ups == [], plan.scale_ups
    assert {v.outcome for v in plan.verdicts.values()} <= {"fits-existing"}, plan.verdicts
    world.step(20)
    assert world.pending() == [] and len(world.bought) == 2, world.report(2)
    assert sum(len(v) for v in shares(cluster).values()) == 10
