"""Issue 23: what a real control plane showed, one test per defect, on the fake API server (and moto).

1. a PDB watch that is not synced held back every scale-down, empty nodes too, and delayed every start;
2. a removed instance whose Node stayed Ready was picked every pass and used up the scale-down budget;
3. check-capacity said Provisioned without capacity, and booked nothing;
4. waits (a pool at its max, backoff, a cluster cap, an incomplete gang) had no Event;
5. same-second queue ties were ordered so that nodes were bought that no pod got;
6. one malformed object (ProvisioningRequest, Pod, Node, PDB) failed every pass.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.core.config.settings import parse_config
from scaler.core.planning import provreq
from tests.fakes.aws import MotoAws
from tests.fakes.kubeapi import FakeKube, pod
from tests.fakes.world import World
from tests.integration.test_provisioning_requests import CONFIG as PROVREQ_CONFIG
from tests.integration.test_provisioning_requests import SimWorld
from tests.integration.test_run_command import EXAMPLE, aws_env, run

pytestmark = pytest.mark.integration

CONFIG: dict[str, Any] = {
    "cluster": "burst", "cloud": "aws", "region": "us-east-1",
    "timings": {"scan_interval": 10, "unneeded_time": 60, "provision_timeout": 300, "backoff_initial": 120,
                "unavailable_ttl": 900},
    "pools": [{"name": "gpu-od", "instance_types": ["g6.xlarge"], "zones": ["us-east-1a"], "max": 20}],
}


def make_world(aws: MotoAws, kube: FakeKube, tmp: Path, config: dict[str, Any] | None = None) -> World:
    return World(aws, kube, parse_config(config or CONFIG, "test"), tmp)


@pytest.fixture
def world(aws: MotoAws, kube: FakeKube, tmp_path: Path) -> Iterator[World]:
    w = make_world(aws, kube, tmp_path)
    yield w
    w.close()


def nodes_of(world: World, pool: str, n: int) -> list[str]:
    world.provider.observe(0)
    world.provider.set_desired(pool, n)
    return world.register(pool)


def pdb_watch_failing(world: World, kube: FakeKube) -> None:
    kube.broken = {"poddisruptionbudgets"}
    deadline = time.monotonic() + 5
    while world.cache.pdbs_fresh and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not world.cache.pdbs_fresh


# --- 1 -------------------------------------------------------------------------------------------------
def test_an_unsynced_pdb_watch_still_removes_empty_nodes_and_says_why_drains_wait(world: World,
                                                                                  kube: FakeKube) -> None:
    empty, web, busy = nodes_of(world, "gpu-od", 3)
    kube.put("pods", pod("web-0", node_name=web, labels={"app": "web"}))  # no GPU: its node is idle
    kube.put("pods", pod("train-0", node_name=busy, gpus=1))
    pdb_watch_failing(world, kube)
    notes: list[str] = []
    for _ in range(14):  # past unneeded_time (60 s), then a cordon and a removal
        plan = world.step(settle=False)
        notes += plan.notes if plan else []
    alive = {n["metadata"]["name"] for n in kube.objects("nodes")}
    assert empty not in alive and world.desired("gpu-od") == 2  # the empty node is gone
    obj = kube.get("nodes", f"/{web}")
    assert obj is not None and not obj["spec"].get("unschedulable")  # its drain would evict: it waits
    assert any("PodDisruptionBudget watch is failing" in n and "evict pods" in n and web in n for n in notes)


def test_the_first_pass_does_not_wait_for_the_pdb_watch(aws: MotoAws, kube: FakeKube, tmp_path: Path) -> None:
    from scaler.configfile import load_config

    aws.make_groups(load_config(EXAMPLE), desired={"system": 2})
    kube.put("pods", pod("train-0", gpus=1, pending=True))
    kube.broken = {"poddisruptionbudgets"}  # an API server without policy/v1, or a role without PDBs
    started = time.monotonic()
    result = run(["--dry-run", "--once", "--config", str(EXAMPLE), "--kubeconfig",
                  str(kube.kubeconfig(tmp_path / "kc")), "--metrics-port", "0", "--log-format", "text",
                  "--sync-timeout", "40"], aws_env(aws))
    assert result.returncode == 0, result.stderr
    assert any("plan (dry run)" in ln and "scale-ups ['gpu1-spot-" in ln for ln in result.stderr.splitlines())
    assert time.monotonic() - started < 30


# --- 2 -------------------------------------------------------------------------------------------------
def test_a_terminated_instance_with_a_ready_node_is_never_a_candidate_again(world: World, kube: FakeKube) -> None:
    nodes_of(world, "gpu-od", 3)
    world.node_gc = False  # no cloud controller manager, and the kubelets' Nodes stay Ready for a while
    world.node_lifecycle = lambda: None  # type: ignore[method-assign]
    refused: list[str] = []
    real_start = world.runtime.actuator._start  # type: ignore[union-attr]

    def start(down: Any, node: Any, now: float) -> None:
        if world.provider.pool_of(down.provider_id) != down.pool:
            refused.append(down.node)
        real_start(down, node, now)

    world.runtime.actuator._start = start  # type: ignore[union-attr,method-assign]
    for _ in range(14):  # unneeded_time (6 passes), then one cordon and one removal per pass and node
        world.step()
    assert world.instance_ids("gpu-od") == set() and world.desired("gpu-od") == 0  # all three went
    assert refused == []  # no pass spent its budget on a node whose instance is gone


# --- 3 -------------------------------------------------------------------------------------------------
@pytest.fixture
def sim(kube: FakeKube, tmp_path: Path) -> Iterator[SimWorld]:
    w = SimWorld(kube, parse_config(PROVREQ_CONFIG, "test"), tmp_path)
    yield w
    w.cache.stop()


def test_check_capacity_answers_from_the_nodes_that_are_up_and_books_them(sim: SimWorld) -> None:
    sim.request("early", provreq.CHECK_CAPACITY, [1])
    sim.step()
    status, reason, _ = sim.conditions("early")["Provisioned"]
    assert (status, reason) == ("False", "CapacityIsNotFound")  # no GPU node: no capacity, whatever the pools
    assert sim.desired() == 0
    sim.kube.delete("provisioningrequests", "ml/early")
    sim.provider.set_desired("gpu8-od", 1)
    sim.run(130)  # one 8-GPU node boots and registers, empty
    sim.request("first", provreq.CHECK_CAPACITY, [1])
    sim.step()
    assert sim.conditions("first")["Provisioned"][:2] == ("True", "CapacityIsFound")
    sim.request("second", provreq.CHECK_CAPACITY, [1])  # the same room again
    sim.run(60)
    assert sim.conditions("second")["Provisioned"][:2] == ("False", "CapacityIsNotFound")
    assert sim.desired() == 1 and len(sim.kube.objects("nodes")) == 1  # the booked node is kept


# --- 4 -------------------------------------------------------------------------------------------------
def not_triggered(kube: FakeKube, name: str) -> str:
    [event] = [e for e in kube.objects("events") if e["involvedObject"]["name"] == name]
    assert event["reason"] == "NotTriggerScaleUp"
    return str(event["message"])


def with_pools(**changes: Any) -> dict[str, Any]:
    cfg = {**CONFIG, "pools": [{**CONFIG["pools"][0], **changes.pop("pool", {})}]}
    return {**cfg, **changes}


def test_a_pod_whose_pool_is_at_its_max_gets_an_event(aws: MotoAws, kube: FakeKube, tmp_path: Path) -> None:
    world = make_world(aws, kube, tmp_path, with_pools(pool={"max": 1}))
    try:
        [node] = nodes_of(world, "gpu-od", 1)
        kube.put("pods", pod("busy", node_name=node, gpus=1))
        kube.put("pods", pod("waits", gpus=1, pending=True))
        world.step()
        assert "gpu-od" in not_triggered(kube, "waits") and "max" in not_triggered(kube, "waits")
    finally:
        world.close()


def test_a_pod_held_by_a_cluster_cap_gets_an_event(aws: MotoAws, kube: FakeKube, tmp_path: Path) -> None:
    world = make_world(aws, kube, tmp_path, with_pools(limits={"max_gpus": 1}))
    try:
        [node] = nodes_of(world, "gpu-od", 1)
        kube.put("pods", pod("busy", node_name=node, gpus=1))
        kube.put("pods", pod("waits", gpus=1, pending=True))
        world.step()
        assert "max_gpus" in not_triggered(kube, "waits")
    finally:
        world.close()


def test_a_pod_of_a_pool_in_backoff_gets_an_event(aws: MotoAws, kube: FakeKube, tmp_path: Path) -> None:
    world = make_world(aws, kube, tmp_path)
    try:
        kube.put("pods", pod("first", gpus=1, pending=True))
        world.step()
        assert world.desired("gpu-od") == 1
        for _ in range(31):  # the node never registers: provision_timeout (300 s), then backoff
            world.step()
        kube.put("pods", pod("waits", gpus=1, pending=True))
        world.step()
        assert "backoff" in not_triggered(kube, "waits")
    finally:
        world.close()


def test_a_pod_of_an_incomplete_gang_gets_an_event(world: World, kube: FakeKube) -> None:
    gang = world.config.gang_label
    member = pod("worker-0", gpus=1, pending=True, labels={gang: "job"})
    member["metadata"]["annotations"] = {world.config.gang_min_annotation: "4"}
    kube.put("pods", member)
    world.step()
    assert "gang" in not_triggered(kube, "worker-0") and "1 of 4" in not_triggered(kube, "worker-0")
    assert world.desired("gpu-od") == 0


# --- 5 -------------------------------------------------------------------------------------------------
def test_same_second_ties_buy_no_node_nobody_gets(aws: MotoAws, kube: FakeKube, tmp_path: Path) -> None:
    """An empty 8-GPU node; two 3-GPU and two 5-GPU pods of one priority created in the same second. In
    the scheduler's order for such ties (largest first, the order needing fewest nodes) a 5 and a 3 take the
    node and one new node holds the rest; small ones first would have bought two."""
    cfg = with_pools(pool={"instance_types": ["g6.48xlarge"]})
    world = make_world(aws, kube, tmp_path, cfg)
    try:
        nodes_of(world, "gpu-od", 1)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(world.clock.t - 5))
        for name, gpus in (("small-0", 3), ("small-1", 3), ("big-0", 5), ("big-1", 5)):
            obj = pod(name, gpus=gpus, cpu="1", pending=True)
            obj["metadata"]["creationTimestamp"] = stamp
            kube.put("pods", obj)
        plan = world.step()
        assert plan is not None
        assert [(u.pool, u.count) for u in plan.scale_ups] == [("gpu-od", 1)]
        assert world.desired("gpu-od") == 2
    finally:
        world.close()


# --- 6 -------------------------------------------------------------------------------------------------
def test_malformed_objects_are_skipped_with_a_warning_and_the_pass_goes_on(aws: MotoAws, kube: FakeKube,
                                                                          tmp_path: Path) -> None:
    bad_pod = pod("bad-pod", gpus=1, pending=True)
    bad_pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "two"
    kube.put("pods", bad_pod)
    kube.put("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bad-node", "labels": {}},
                       "spec": {"taints": "none"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    kube.put("poddisruptionbudgets", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                      "metadata": {"name": "bad-pdb", "namespace": "default"},
                                      "spec": {"selector": {"matchLabels": {"app": "web"}}},
                                      "status": {"disruptionsAllowed": "many"}})
    world = make_world(aws, kube, tmp_path)
    world.node_gc = False  # the bad Node names no instance: no cloud controller deletes it here
    try:
        world.gpu_pods("train", 2, pending=True)
        world.step()
        assert world.desired("gpu-od") == 2  # everything else is scaled
        warnings = {(e["involvedObject"]["kind"], e["involvedObject"]["name"]): e for e in kube.objects("events")
                    if e["reason"] == "FailedToRead" and e["type"] == "Warning"}
        assert set(warnings) == {("Pod", "bad-pod"), ("Node", "bad-node"), ("PodDisruptionBudget", "bad-pdb")}
        assert "resources" in warnings[("Pod", "bad-pod")]["message"]
        assert "spec.taints" in warnings[("Node", "bad-node")]["message"]
        assert "status.disruptionsAllowed" in warnings[("PodDisruptionBudget", "bad-pdb")]["message"]
        sample = world.runtime.metrics.registry.get_sample_value
        assert sample("gpuburst_skipped_objects", {"kind": "PodDisruptionBudget"}) == 1
    finally:
        world.close()


@pytest.mark.parametrize(("field", "value", "named"), [
    ("count", "two", "spec.podSets[0].count"),
    ("podSet", "not-an-object", "spec.podSets[0]"),
    ("parameters", ["ValidUntilSeconds"], "spec.parameters"),
])
def test_a_malformed_provisioning_request_is_skipped_and_the_others_served(sim: SimWorld, field: str,
                                                                          value: Any, named: str) -> None:
    sim.request("bad", provreq.ATOMIC_SCALE_UP, [1])
    bad = sim.kube.get("provisioningrequests", "ml/bad")
    assert bad is not None
    if field == "count":
        bad["spec"]["podSets"][0]["count"] = value
    elif field == "podSet":
        bad["spec"]["podSets"][0] = value
    else:
        bad["spec"]["parameters"] = value
    sim.kube.put("provisioningrequests", bad)
    sim.request("good", provreq.ATOMIC_SCALE_UP, [2])
    sim.step()
    assert sim.desired() == 2  # the good request is served
    assert sim.conditions("good")["Provisioned"][:2] == ("False", "Provisioning")
    [warning] = [e for e in sim.kube.objects("events") if e["involvedObject"]["name"] == "bad"]
    assert warning["type"] == "Warning" and warning["involvedObject"]["kind"] == "ProvisioningRequest"
    assert named in warning["message"]


# --- import-pools is read-only without --apply ------------------------------------------------------------
def test_import_pools_changes_nothing_without_apply(aws: MotoAws, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from scaler.cli import main
    from scaler.core.model import keys
    from tests.integration.test_import_pools import seed_groups

    seed_groups(aws, "ml")
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.endpoint)

    def tags() -> set[str]:
        return {t["Key"] for t in aws.asg.describe_auto_scaling_groups(AutoScalingGroupNames=["ml-p3-spot"])
                ["AutoScalingGroups"][0]["Tags"]}

    assert main(["import-pools", "--cloud", "aws", "--cluster", "ml"]) == 0
    assert "import-pools --apply adds them" in capsys.readouterr().out
    assert keys.TAG_CA_ENABLED not in tags()
    assert main(["import-pools", "--cloud", "aws", "--cluster", "ml", "--apply"]) == 0
    assert keys.TAG_CA_ENABLED in tags()
