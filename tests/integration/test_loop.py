"""The control loop end to end: real planner, AWS provider on moto's server, kube adapter on the fake
API server. Each fault of the issue has its own test."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler.core import keys
from scaler.core.config import ScalerConfig, parse_config
from scaler.loop import LostLease
from tests.fakes.aws import FailedLaunch, Faults, MotoAws
from tests.fakes.kubeapi import FakeKube, pdb, pod
from tests.fakes.world import World

pytestmark = pytest.mark.integration

CONFIG = {
    "cluster": "burst", "cloud": "aws", "region": "us-east-1",
    "timings": {"scan_interval": 10, "unneeded_time": 60, "provision_timeout": 300, "backoff_initial": 120,
                "unavailable_ttl": 900},
    "pools": [
        {"name": "gpu-spot-a", "capacity_type": "spot", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"],
         "max": 20, "fallback": "gpu-od"},
        {"name": "gpu-od", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a", "us-east-1b"], "max": 20},
    ],
}


@pytest.fixture
def config() -> ScalerConfig:
    return parse_config(CONFIG, "test")


@pytest.fixture
def world(aws: MotoAws, kube: FakeKube, config: ScalerConfig, tmp_path: Path) -> Iterator[World]:
    w = World(aws, kube, config, tmp_path, queue=True)
    yield w
    w.close()


def test_pending_gpu_pods_scale_up_spot_then_idle_nodes_go(world: World, kube: FakeKube) -> None:
    pods = world.gpu_pods("train", 3, pending=True)
    kube.put("pods", pod("huge", gpus=16, pending=True))  # no pool has 16 GPUs a node
    plan = world.step()
    assert plan is not None
    assert [(u.pool, u.new_desired) for u in plan.scale_ups] == [("gpu-spot-a", 3)]
    assert world.desired("gpu-spot-a") == 3 and world.desired("gpu-od") == 0
    events = {(e["involvedObject"]["name"], e["reason"]) for e in kube.objects("events")}
    assert {(p, "TriggeredScaleUp") for p in pods} <= events
    [up] = [e for e in kube.objects("events") if e["involvedObject"]["name"] == pods[0]]
    assert up["message"] == "pod triggered scale-up: [{gpu-spot-a 0->3 (max: 20)}]"
    [stuck] = [e for e in kube.objects("events") if e["involvedObject"]["name"] == "huge"]
    assert stuck["reason"] == "NotTriggerScaleUp"
    assert "gpu-od: Insufficient nvidia.com/gpu" in stuck["message"]
    assert "gpu-spot-a: Insufficient nvidia.com/gpu" in stuck["message"]
    # Nothing more is asked while the nodes boot.
    assert world.step().scale_ups == []  # type: ignore[union-attr]
    nodes = world.register("gpu-spot-a")
    for p, n in zip(pods, nodes, strict=True):
        world.bind(p, n)
    world.step()
    assert world.desired("gpu-spot-a") == 3
    # The jobs finish: the nodes are idle, and after unneeded_time they are drained and removed.
    for p in [*pods, "huge"]:
        kube.delete("pods", f"default/{p}")
    # unneeded_time is 6 passes; then one node per pass (the budget) is cordoned, and terminated the
    # pass after, on a pod list read after the cordon.
    for _ in range(14):
        world.step()
    assert world.desired("gpu-spot-a") == 0
    assert world.instance_ids("gpu-spot-a") == set()
    status = kube.get("configmaps", "gpuburst-system/gpuburst-scaler-status")
    assert status is not None and '"gpu-spot-a"' in status["data"]["status.json"]
    assert any(e["reason"] == "ScaleDown" and e["involvedObject"]["kind"] == "Node" for e in kube.objects("events"))


def idle_node_world(world: World, kube: FakeKube) -> str:
    """gpu-od with one registered, empty node: unneeded, removable after unneeded_time (60 s)."""
    world.provider.observe(0)
    world.provider.set_desired("gpu-od", 1)
    [node] = world.register("gpu-od")
    return node


def test_fault_cloud_throttling_and_server_errors(world: World, kube: FakeKube) -> None:
    world.gpu_pods("train", 2, pending=True)
    deadline = time.monotonic() + 5
    while not world.caught_up() and time.monotonic() < deadline:
        time.sleep(0.02)
    throttled = Faults(world.provider.asg, "DescribeAutoScalingGroups", "Throttling", 400, count=1000)
    assert world.runtime.run(once=True) == 1  # the pass fails as a whole: nothing acted on half-read data
    assert world.runtime.metrics.cloud_errors.labels("throttled")._value.get() == 1
    assert world.desired("gpu-spot-a") == 0
    throttled.left = 0  # the API calms down: the next pass works
    broken = Faults(world.provider.asg, "SetDesiredCapacity", "InternalFailure", 500, count=1000)
    plan = world.step()
    assert plan is not None and plan.scale_ups  # decided, but the cloud refused to act
    assert world.runtime.metrics.cloud_errors.labels("server")._value.get() == 1
    assert world.desired("gpu-spot-a") == 0
    broken.left = 0
    world.step()
    assert world.desired("gpu-spot-a") == 2  # retried next pass, not doubled
    # Errors back off with jitter, growing and bounded.
    delays = [world.runtime._backoff(n) for n in (1, 3, 10)]
    assert 10 <= delays[0] <= 30 and 40 <= delays[1] <= 120 and 150 <= delays[2] <= 450


def test_fault_node_never_registers(world: World, kube: FakeKube) -> None:
    world.gpu_pods("train", 1, pending=True)
    world.step()
    assert world.desired("gpu-spot-a") == 1
    world.step(310)  # past provision_timeout (300 s) and no node registered
    for _ in range(3):
        world.step()
    assert world.desired("gpu-spot-a") == 0  # the request is given back
    # and the instance that never became a node is terminated: the group is protected from scale-in,
    # so lowering the size alone would leave it running (and billed).
    assert world.instance_ids("gpu-spot-a") == set()
    assert world.desired("gpu-od") == 1  # and the pod goes to the fallback pool
    assert ("gpu-spot-a", "us-east-1a") in world.runtime.state.unavailable
    for _ in range(3):
        world.step()
    assert world.desired("gpu-spot-a") == 0  # not asked again while it is backed off


def test_fault_spot_interruption_storm(world: World, kube: FakeKube) -> None:
    """30% of the spot nodes reclaimed within 2 minutes: replacements planned at once, no pod lost."""
    world.provider.observe(0)
    world.provider.set_desired("gpu-spot-a", 10)
    nodes = world.register("gpu-spot-a")
    pods = world.gpu_pods("train", 10, pending=True)
    for p, n in zip(pods, nodes, strict=True):
        world.bind(p, n)
    world.step()
    kube.recreate_evicted = True  # the ReplicaSet controller recreates an evicted pod (pending)
    by_node = {n["metadata"]["name"]: n["spec"]["providerID"].rsplit("/", 1)[-1] for n in kube.objects("nodes")}
    victims = nodes[:3]
    asked_at: dict[str, float] = {}
    for i, victim in enumerate(victims):
        notice_time = world.clock.t + 1
        world.aws.send_event(world.queue, "EC2 Spot Instance Interruption Warning", by_node[victim],  # type: ignore[arg-type]
                             at=notice_time)
        plan = world.step(30 if i else 10)
        assert plan is not None
        # The replacement is a scale-up for the victim's pod, planned by the core in the notice's pass.
        [up] = [u for u in plan.scale_ups if f"default/{pods[i]}" in u.pods]
        assert up.count == 1
        asked_at[victim] = world.clock.t - notice_time
        node = kube.get("nodes", f"/{victim}")
        assert node is not None and node["spec"]["unschedulable"] is True
    assert all(delay < 120 for delay in asked_at.values())
    for _ in range(3):
        world.step()
    # The reclaimed instances are terminated with the group's desired size decremented: 7 survivors and
    # the 3 replacements, nothing asked for twice.
    assert not {by_node[v] for v in victims} & world.instance_ids("gpu-spot-a")
    assert world.desired("gpu-spot-a") + world.desired("gpu-od") == 10
    # No pod lost: 7 still run, the 3 evicted ones were recreated and wait for the 3 replacements.
    names = {p["metadata"]["name"] for p in kube.objects("pods")}
    assert names == set(pods[3:]) | {f"{p}-r" for p in pods[:3]}
    plan = world.step()
    assert plan is not None
    assert {v.outcome for k, v in plan.verdicts.items() if k.endswith("-r")} == {"fits-in-flight"}
    assert world.runtime.metrics.interruptions.labels("gpu-spot-a", "spot-interruption")._value.get() == 3


def test_fault_kube_api_down_five_minutes(world: World, kube: FakeKube) -> None:
    node = idle_node_world(world, kube)
    world.step()
    kube.set_down(True)
    for _ in range(30):  # five minutes of passes, every 10 s, with the API server gone
        world.step(settle=False)
    assert world.desired("gpu-od") == 1 and len(world.instance_ids("gpu-od")) == 1
    kube.set_down(False)
    # Only the pod list broken, the Lease fine: the leader plans but, on stale data, removes nothing.
    kube.broken = {"pods"}
    deadline = time.monotonic() + 5
    while world.cache.fresh and time.monotonic() < deadline:
        time.sleep(0.02)
    plan = world.step(120, settle=False)
    assert plan is not None and plan.scale_downs == []
    assert any("not fresh" in n or "stale" in n for n in plan.notes)
    assert len(world.instance_ids("gpu-od")) == 1
    kube.broken = set()
    for _ in range(8):  # recovery: the cache resyncs and the idle node goes after unneeded_time
        world.step()
    assert world.desired("gpu-od") == 0 and world.instance_ids("gpu-od") == set()
    assert kube.get("nodes", f"/{node}") is None


def test_fault_restart_in_the_middle_of_a_scale_up(world: World, kube: FakeKube) -> None:
    world.gpu_pods("train", 4, pending=True)
    world.step()
    assert world.desired("gpu-spot-a") == 4
    world.runtime = world.new_runtime()  # the scaler restarts: no memory of the request
    plan = world.step()
    assert plan is not None and plan.scale_ups == []
    assert world.desired("gpu-spot-a") == 4
    world.register("gpu-spot-a")  # two nodes arrive, then another restart
    world.runtime = world.new_runtime()
    world.step()
    assert world.desired("gpu-spot-a") == 4 and world.desired("gpu-od") == 0


def test_fault_pdb_blocks_eviction(world: World, kube: FakeKube) -> None:
    world.provider.observe(0)
    world.provider.set_desired("gpu-od", 2)
    idle, busy = world.register("gpu-od")
    kube.put("pods", pod("web-0", node_name=idle, labels={"app": "web"}))  # no GPU: the GPU node is idle
    kube.put("pods", pod("train-0", node_name=busy, gpus=1, labels={"app": "train"}))
    kube.put("poddisruptionbudgets", pdb("web", {"app": "web"}, allowed=1))
    world.step()
    # Between the cache's view and the eviction another web replica turned unready: the API server now
    # refuses (429) what the cached PDB still allows (a watch event on its way).
    blocked = kube.get("poddisruptionbudgets", "default/web")
    assert blocked is not None
    blocked["status"]["disruptionsAllowed"] = 0
    kube.put("poddisruptionbudgets", blocked, quiet=True)
    for _ in range(9):
        world.step()
    assert ("default/web-0", 429) in kube.evictions
    node = kube.get("nodes", f"/{idle}")
    assert node is not None and node["spec"]["unschedulable"] is True  # cordoned, waiting
    assert len(world.instance_ids("gpu-od")) == 2 and world.desired("gpu-od") == 2  # never terminated
    assert kube.get("pods", "default/web-0") is not None
    world.step(600)  # the drain deadline passes: the scale-down is abandoned and the node given back
    node = kube.get("nodes", f"/{idle}")
    assert node is not None and not node["spec"]["unschedulable"]
    assert all(t["key"] != keys.TAINT_DISRUPTING for t in node["spec"]["taints"])
    assert any(e["reason"] == "ScaleDownFailed" for e in kube.objects("events"))
    assert len(world.instance_ids("gpu-od")) == 2


def test_launch_failure_marks_the_offering_unavailable(world: World, kube: FakeKube) -> None:
    world.gpu_pods("train", 1, pending=True)
    world.step()
    assert world.desired("gpu-spot-a") == 1
    FailedLaunch(world.provider.asg, world.groups["gpu-spot-a"],
                 "There is no Spot capacity available that matches your request. Launching EC2 instance failed.",
                 "us-east-1a", world.clock.t + 5)
    world.step()
    until = world.runtime.state.unavailable.get(("gpu-spot-a", "us-east-1a"))
    assert until is not None and until > world.clock.t
    metrics = world.runtime.metrics
    assert metrics.unavailable.labels("gpu-spot-a", "us-east-1a")._value.get() == 1
    # What the alerts read: the failure by pool and kind, the spot pool's pods going to its fallback, sizes.
    sample = metrics.registry.get_sample_value
    assert sample("gpuburst_launch_failures_total", {"pool": "gpu-spot-a", "kind": "capacity"}) == 1
    assert sample("gpuburst_fallback_active", {"pool": "gpu-spot-a", "fallback": "gpu-od"}) == 1
    assert sample("gpuburst_pool_max_nodes", {"pool": "gpu-od"}) == 20
    desired = {p: sample("gpuburst_pool_desired_nodes", {"pool": p}) for p in ("gpu-spot-a", "gpu-od")}
    price = {p: sample("gpuburst_pool_price_per_node_hour", {"pool": p}) for p in ("gpu-spot-a", "gpu-od")}
    cost = sum(desired[p] * price[p] for p in desired)  # type: ignore[operator]
    assert cost > 0 and sample("gpuburst_cost_per_hour") == pytest.approx(cost)
    status = kube.get("configmaps", "gpuburst-system/gpuburst-scaler-status")
    assert status is not None and '"gpu-spot-a/us-east-1a"' in status["data"]["status.json"]


def test_a_removed_node_stays_cordoned_until_it_leaves(world: World, kube: FakeKube) -> None:
    """Between the instance's termination and the Node's deletion nothing may be scheduled onto it."""
    node = idle_node_world(world, kube)
    world.node_gc = False  # the cloud controller is slow to delete the Node
    for _ in range(10):
        world.step()
        if not world.instance_ids("gpu-od"):
            break
    assert world.instance_ids("gpu-od") == set()
    for _ in range(3):
        world.step()
        obj = kube.get("nodes", f"/{node}")
        assert obj is not None and obj["spec"]["unschedulable"] is True
        assert any(t["key"] == keys.TAINT_DISRUPTING for t in obj["spec"]["taints"])
    world.node_gc = True
    world.step()
    assert kube.get("nodes", f"/{node}") is None
    assert world.runtime.actuator is not None and world.runtime.actuator.removed == set()


def test_restart_gives_back_a_node_an_earlier_process_left_cordoned(world: World, kube: FakeKube) -> None:
    world.provider.observe(0)
    world.provider.set_desired("gpu-od", 1)
    [node] = world.register("gpu-od")
    world.bind(world.gpu_pods("train", 1, pending=True)[0], node)  # busy: not a scale-down candidate
    obj = kube.get("nodes", f"/{node}")
    assert obj is not None
    obj["spec"]["unschedulable"] = True  # the previous process died in the middle of its drain
    obj["spec"]["taints"].append({"key": keys.TAINT_DISRUPTING, "value": "true", "effect": "NoSchedule"})
    kube.put("nodes", obj)
    world.runtime = world.new_runtime()
    world.step()
    obj = kube.get("nodes", f"/{node}")
    assert obj is not None and not obj["spec"]["unschedulable"]
    assert all(t["key"] != keys.TAINT_DISRUPTING for t in obj["spec"]["taints"])


def test_stale_node_list_never_terminates_instances_as_unregistered(world: World, kube: FakeKube) -> None:
    """Two instances run; the Node list cannot be read (a 403 or an overloaded API server), so the
    cache never sees their Nodes. Past provision_timeout the planner wants to give the size back, but
    on stale data nothing that removes capacity is acted on."""
    world.provider.observe(0)
    world.provider.set_desired("gpu-od", 2)
    kube.broken = {"nodes"}
    deadline = time.monotonic() + 5
    while world.cache.fresh and time.monotonic() < deadline:
        time.sleep(0.02)
    notes: list[str] = []
    for _ in range(40):  # 400 s, beyond the 300 s provision timeout
        plan = world.step(settle=False)
        notes += plan.notes if plan else []
    assert len(world.instance_ids("gpu-od")) == 2 and world.desired("gpu-od") == 2
    assert any("size reset(s) below the existing instances held back" in n for n in notes)


def test_a_pod_bound_between_plan_and_cordon_stops_the_scale_down(world: World, kube: FakeKube) -> None:
    node = idle_node_world(world, kube)
    for _ in range(12):  # until the idle node is cordoned for its removal
        world.step()
        obj = kube.get("nodes", f"/{node}")
        if obj is not None and obj["spec"].get("unschedulable"):
            break
    else:
        pytest.fail("the idle node was never cordoned")
    # The scheduler had bound a bare pod (no controller: nothing would recreate it) just before the cordon.
    kube.put("pods", pod("notebook", node_name=node, gpus=1, owner=None))
    world.step()
    assert kube.get("pods", "default/notebook") is not None
    assert not any(key == "default/notebook" for key, _ in kube.evictions)
    assert len(world.instance_ids("gpu-od")) == 1
    obj = kube.get("nodes", f"/{node}")
    assert obj is not None and not obj["spec"]["unschedulable"]
    failed = [e for e in kube.objects("events") if e["reason"] == "ScaleDownFailed"]
    assert failed and "default/notebook" in failed[0]["message"]


def test_rebalance_recommendation_does_not_evict_pods_that_may_not_move(world: World, kube: FakeKube) -> None:
    world.provider.observe(0)
    world.provider.set_desired("gpu-spot-a", 1)
    [node] = world.register("gpu-spot-a")
    kube.put("pods", pod("notebook", node_name=node, gpus=1, owner=None))
    world.step()
    iid = next(iter(world.instance_ids("gpu-spot-a")))
    world.aws.send_event(world.queue, "EC2 Instance Rebalance Recommendation", iid,  # type: ignore[arg-type]
                         at=world.clock.t + 1)
    for _ in range(3):
        world.step()
    assert kube.evictions == [] and kube.get("pods", "default/notebook") is not None
    obj = kube.get("nodes", f"/{node}")
    assert obj is not None and not obj["spec"].get("unschedulable")
    assert world.instance_ids("gpu-spot-a") == {iid} and world.desired("gpu-od") == 0
    assert any(e["reason"] == "SpotRebalanceIgnored" for e in kube.objects("events"))


def test_a_lease_lost_during_the_pass_stops_every_change(world: World, kube: FakeKube) -> None:
    world.gpu_pods("train", 2, pending=True)
    leader = world.runtime.leader
    assert leader is not None
    leader.holds = lambda: False  # type: ignore[method-assign]  # the renewal is older than the renew deadline
    assert world.step() is None
    assert world.desired("gpu-spot-a") == 0 and world.desired("gpu-od") == 0
    assert world.runtime.metrics.leader._value.get() == 0
    del leader.holds  # renewed again: the next pass acts
    world.step()
    assert world.desired("gpu-spot-a") == 2


def test_an_instance_the_cloud_will_not_remove_is_given_back_after_the_deadline(world: World, kube: FakeKube) -> None:
    """The group's MinSize (set outside gpuburst) is above the config's min: AWS refuses to terminate
    with a decrement. The drained, empty node must not stay cordoned for good."""
    node = idle_node_world(world, kube)
    Faults(world.provider.asg, "TerminateInstanceInAutoScalingGroup", "ValidationError", 400, count=1000,
           message="Currently, desiredSize equals minSize (1). Terminating instance without replacement will "
                   "violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to "
                   "false or lower group's min size.")
    for _ in range(12):  # unneeded_time, then the cordon
        world.step()
    obj = kube.get("nodes", f"/{node}")
    assert obj is not None and obj["spec"]["unschedulable"] is True
    world.step(600)  # past the drain deadline
    obj = kube.get("nodes", f"/{node}")
    assert obj is not None and not obj["spec"]["unschedulable"]
    assert len(world.instance_ids("gpu-od")) == 1
    failed = [e for e in kube.objects("events") if e["reason"] == "ScaleDownFailed"]
    assert failed and "could not be removed" in failed[0]["message"]


def test_an_interruption_read_in_a_pass_that_stopped_is_handled_in_the_next(world: World, kube: FakeKube) -> None:
    """Reading a notice deletes it from the queue: a pass that stops before handling it (here the lease
    ran out) must not lose the two-minute warning."""
    world.provider.observe(0)
    world.provider.set_desired("gpu-spot-a", 1)
    [node] = world.register("gpu-spot-a")
    world.bind(world.gpu_pods("train", 1, pending=True)[0], node)
    world.step()
    iid = next(iter(world.instance_ids("gpu-spot-a")))
    world.aws.send_event(world.queue, "EC2 Spot Instance Interruption Warning", iid,  # type: ignore[arg-type]
                         at=world.clock.t + 1)
    leader = world.runtime.leader
    assert leader is not None
    real_guard = world.runtime._guard
    calls = iter([None])

    def guard_once() -> None:  # the lease runs out at the first change this pass tries
        if next(calls, "gone") is None:
            raise LostLease("the leader lease expired during the pass")
        real_guard()

    assert world.runtime.actions is not None and world.runtime.actuator is not None
    world.runtime.actuator.guard = guard_once  # every cloud change the actuator makes
    world.runtime.actions.before_change = guard_once  # every cordon and eviction
    assert world.step() is None
    assert world.desired("gpu-spot-a") + world.desired("gpu-od") == 1  # nothing done in the stopped pass
    world.step()
    obj = kube.get("nodes", f"/{node}")
    assert obj is not None and obj["spec"]["unschedulable"] is True
    # the replacement, one pass late but not lost
    assert world.desired("gpu-spot-a") + world.desired("gpu-od") == 2
