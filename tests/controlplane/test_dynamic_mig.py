"""Dynamic MIG (the NVIDIA DRA driver's DynamicMIG on Hopper, partitionable devices: DRAPartitionableDevices, beta
and on in 1.37) on the real control plane: a pool declaring `gpu_sharing: {mig: {dynamic: true}}` scales from
zero for whole-GPU claims and MIG slices together, the node agent publishes each H100 whole beside every MIG
device it could hold on the GPU's memory-slice counters, and the real kube-scheduler allocates the claims as the
planner did: all of them on the one node it bought, no memory slice of a GPU given twice, a whole GPU alone."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from scaler.core.dra import nvidia
from tests.controlplane import diffgen
from tests.controlplane.fixtures import Cluster
from tests.controlplane.world import RealWorld, claim_pod, create_all, moto_world
from tests.fakes.aws import MotoAws

pytestmark = pytest.mark.integration

CONFIG = {
    "cluster": "burst", "cloud": "aws", "region": "us-east-1",
    "timings": {"scan_interval": 10, "unneeded_time": 600, "provision_timeout": 600},
    "pools": [{"name": "h100-dynamic", "instance_types": ["p5.48xlarge"], "zones": ["us-east-1a"], "max": 3,
               "gpu_allocation": "dra", "gpu_sharing": {"mig": {"dynamic": True}}}],
}


def _template(name: str, cls: str, *selectors: str) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}


def _profile(p: str) -> str:
    return f"device.attributes['{nvidia.DRIVER}'].profile == '{p}'"


TEMPLATES = [_template("whole", nvidia.GPU_CLASS.name), _template("mig-3g", nvidia.MIG_CLASS.name, _profile("3g.40gb")),
             _template("mig-1g", nvidia.MIG_CLASS.name, _profile("1g.10gb"))]


@pytest.fixture
def world(aws: MotoAws, cluster: Cluster) -> Iterator[RealWorld]:
    with moto_world(aws, cluster, CONFIG, kubelet=True) as w:
        yield w


def memory_slices(world: RealWorld, cluster: Cluster) -> dict[tuple[str, str], list[str]]:
    """Per GPU (pool, counter set), the memory-slice counters the allocated claims' devices consume."""
    consumes = {(s.pool.name, d.name): d.consumes_counters[0] for node in world.names.values()
                for s in world.config.pool("h100-dynamic").dra_slices(node) for d in s.devices}
    claims = cluster.custom.list_namespaced_custom_object("resource.k8s.io", "v1", "default", "resourceclaims")
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for c in claims["items"]:
        for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []):
            use = consumes[(r["pool"], r["device"])]
            out[(r["pool"], use.counter_set)].extend(use.counters)
    return out


def test_the_real_scheduler_cuts_the_gpus_the_scaler_bought_as_it_planned(world: RealWorld, cluster: Cluster) -> None:
    """Five whole GPUs, two 3g.40gb and seven 1g.10gb fit one p5 in whatever order kube-scheduler takes them: its
    allocator gives each claim the first device whose memory slices are free, so a 1g.10gb taken between the two
    3g.40gb can push the second onto a third GPU (3 GPUs of slices, 5 whole). Six whole GPUs would fit only in the
    order that packs the slices onto two GPUs, and after the node registers the scheduler's queue order is its
    own (a CI run bound them so and needed a second p5, which the scaler then bought:
    `scaler.core.planning.queue_order.tie_break`)."""
    create_all(cluster.admin, [diffgen.device_class(c) for c in nvidia.DEVICE_CLASSES])
    pods = [*(claim_pod(f"train-{i}", "whole") for i in range(5)), *(claim_pod(f"mid-{i}", "mig-3g") for i in range(2)),
            *(claim_pod(f"small-{i}", "mig-1g") for i in range(7))]
    create_all(cluster.admin, [*TEMPLATES, *pods])
    plan = world.step()
    assert plan is not None and [(u.pool, u.count) for u in plan.scale_ups] == [("h100-dynamic", 1)], plan
    for _ in range(4):
        world.step(20)  # the kubelet registers, the driver publishes, kube-scheduler binds
        if not world.pending():
            break
    assert world.pending() == [] and len(world.bought) == 1, world.report(1)
    held = memory_slices(world, cluster)
    assert len(held) in (7, 8), held  # five whole GPUs, the slices on two GPUs (or three, in a splitting order)
    assert all(len(v) == len(set(v)) for v in held.values()), held  # no memory slice given twice

    # The node is as full as its counters say: of two more whole-GPU claims, a GPU no slice was cut from takes
    # one (if the slices left one; bound now or planned there), and the rest buy one more node.
    create_all(cluster.admin, [claim_pod(f"train-{i}", "whole") for i in (5, 6)])
    plan = world.step()
    assert plan is not None and [(u.pool, u.count) for u in plan.scale_ups] == [("h100-dynamic", 1)], plan
    waiting = set(world.pending())  # (kube-scheduler may have bound one before the pass)
    on_node = [k for k in ("default/train-5", "default/train-6")
               if k not in waiting or plan.verdicts[k].outcome == "fits-existing"]
    assert len(on_node) == 8 - len(held), (on_node, held, plan.verdicts)
