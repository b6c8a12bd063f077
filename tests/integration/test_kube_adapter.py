"""The Kubernetes adapter through the official client against the fake API server."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from scaler.core.model import keys
from scaler.kube.actions import KubeActions, Leader
from scaler.kube.cache import ClusterCache
from scaler.kube.client import api_client
from scaler.ports import KubeError, ObjectRef
from tests.fakes.kubeapi import FakeKube, node, pdb, pod

pytestmark = pytest.mark.integration


def eventually(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


@pytest.fixture
def api(kube: FakeKube, tmp_path: Path):  # type: ignore[no-untyped-def]
    return api_client(str(kube.kubeconfig(tmp_path / "kubeconfig")))


@pytest.fixture
def cache(api) -> Iterator[ClusterCache]:  # type: ignore[no-untyped-def]
    c = ClusterCache(api, watch_timeout=5, backoff_initial=0.05, backoff_max=0.2)
    c.start()
    yield c
    c.stop()


def test_list_then_watch_builds_the_snapshot_parts(kube: FakeKube, cache: ClusterCache) -> None:
    kube.put("nodes", node("gpu-1", pool="gpu1-od", provider_id="aws:///us-east-1a/i-0aa", gpus=1))
    kube.put("pods", pod("train-0", node_name="gpu-1", gpus=1))
    kube.put("pods", pod("train-1", pending=True, gpus=1))
    kube.put("pods", pod("done", node_name="gpu-1") | {"status": {"phase": "Succeeded"}})
    assert cache.wait_synced(5)
    assert eventually(lambda: len(cache.observe(lambda _: None).pending) == 1 and len(cache.nodes.items()) == 1
                      and len(cache.pods.items()) == 3)
    view = cache.observe(lambda pid: "gpu1-od" if pid.endswith("i-0aa") else None)
    pending, nodes = view.pending, view.nodes
    assert [p.name for p in pending] == ["train-1"]
    assert [(n.name, n.pool, [p.name for p in n.pods]) for n in nodes] == [("gpu-1", "gpu1-od", ["train-0"])]
    # A pod that is merely pending (not yet marked Unschedulable by the scheduler) is not "pending".
    kube.put("pods", pod("fresh", pending=True) | {"status": {"phase": "Pending"}})
    kube.put("pods", pod("train-2", pending=True, gpus=1))
    assert eventually(lambda: {p.name for p in cache.observe(lambda _: None).pending} == {"train-1", "train-2"})
    kube.delete("pods", "default/train-1")
    assert eventually(lambda: {p.name for p in cache.observe(lambda _: None).pending} == {"train-2"})


def test_storage_objects_and_namespaces_are_watched_for_the_filters(kube: FakeKube, cache: ClusterCache) -> None:
    """PVCs, PVs, StorageClasses, CSINodes and Namespaces are listed and watched like pods."""
    kube.put("storageclasses", {"metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com",
                                "volumeBindingMode": "WaitForFirstConsumer"})
    kube.put("persistentvolumeclaims", {"metadata": {"name": "ckpt", "namespace": "ml"},
                                        "spec": {"storageClassName": "gp3", "volumeName": "pv-1"},
                                        "status": {"phase": "Bound"}})
    kube.put("persistentvolumes", {"metadata": {"name": "pv-1", "labels": {keys.LABEL_ZONE: "us-east-1a"}},
                                   "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"}}})
    kube.put("csinodes", {"metadata": {"name": "gpu-1"}, "spec": {"drivers": [
        {"name": "ebs.csi.aws.com", "allocatable": {"count": 24}}]}})
    kube.put("namespaces", {"metadata": {"name": "ml", "labels": {"team": "research"}}})
    assert cache.wait_synced(5)
    assert eventually(lambda: len(cache.observe(lambda _: None).storage.claims) == 1
                      and len(cache.namespaces.items()) == 1
                      and len(cache.csinodes.items()) == 1 and len(cache.pvs.items()) == 1
                      and len(cache.storage_classes.items()) == 1)
    view = cache.observe(lambda _: None)
    storage, namespaces = view.storage, view.namespaces
    assert storage.claims["ml/ckpt"].bound and storage.volumes["pv-1"].labels[keys.LABEL_ZONE] == "us-east-1a"
    assert storage.classes["gp3"].binding_mode == "WaitForFirstConsumer"
    assert storage.csinodes["gpu-1"].limits == {"ebs.csi.aws.com": 24}
    assert namespaces["ml"] == {keys.LABEL_NAMESPACE_NAME: "ml", "team": "research"}
    kube.delete("persistentvolumeclaims", "ml/ckpt")
    assert eventually(lambda: not cache.observe(lambda _: None).storage.claims)


def test_410_gone_relists_and_misses_nothing(kube: FakeKube, cache: ClusterCache) -> None:
    assert cache.wait_synced(5)
    relists = cache.pods.relists
    kube.expire_watches()
    kube.put("pods", pod("after-expiry", pending=True))
    assert eventually(lambda: cache.pods.relists > relists)
    assert eventually(lambda: [p.name for p in cache.observe(lambda _: None).pending] == ["after-expiry"])
    assert eventually(lambda: cache.fresh)


def test_api_server_down_marks_the_cache_stale_then_recovers(kube: FakeKube, cache: ClusterCache) -> None:
    assert cache.wait_synced(5)
    kube.set_down(True)
    assert eventually(lambda: not cache.fresh)
    kube.put("nodes", node("came-while-down"))
    kube.set_down(False)
    assert eventually(lambda: cache.fresh, timeout=5)
    assert eventually(lambda: [n.name for n in cache.observe(lambda _: None).nodes] == ["came-while-down"])


def test_cordon_evict_and_uncordon(kube: FakeKube, api) -> None:  # type: ignore[no-untyped-def]
    kube.put("nodes", node("n1", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]))
    kube.put("pods", pod("web-0", node_name="n1", labels={"app": "web"}))
    kube.put("pods", pod("batch-0", node_name="n1", labels={"app": "batch"}))
    kube.put("poddisruptionbudgets", pdb("web", {"app": "web"}, allowed=0))
    actions = KubeActions(api, "gpuburst-system")
    actions.cordon(kube.get("nodes", "/n1"))  # type: ignore[arg-type]
    spec = kube.get("nodes", "/n1")["spec"]  # type: ignore[index]
    assert spec["unschedulable"] is True
    assert {t["key"] for t in spec["taints"]} == {"nvidia.com/gpu", keys.TAINT_DISRUPTING}
    assert actions.evict("default", "web-0") == "blocked"  # the PDB allows no disruption: HTTP 429
    assert kube.get("pods", "default/web-0") is not None
    assert actions.evict("default", "batch-0") == "evicted"
    assert kube.get("pods", "default/batch-0") is None
    assert actions.evict("default", "batch-0") == "gone"
    assert actions.uncordon(kube.get("nodes", "/n1")) is True  # type: ignore[arg-type]
    spec = kube.get("nodes", "/n1")["spec"]  # type: ignore[index]
    assert spec["unschedulable"] is False and [t["key"] for t in spec["taints"]] == ["nvidia.com/gpu"]
    # A node cordoned by someone else (no taint of ours) is left cordoned.
    kube.put("nodes", node("n2") | {"spec": {"unschedulable": True}})
    assert actions.uncordon(kube.get("nodes", "/n2")) is False  # type: ignore[arg-type]
    assert kube.get("nodes", "/n2")["spec"]["unschedulable"] is True  # type: ignore[index]


def test_events_are_recorded_once_per_interval_and_status_is_written(kube: FakeKube, api) -> None:  # type: ignore[no-untyped-def]
    actions = KubeActions(api, "gpuburst-system", event_interval=300)
    ref = ObjectRef("Pod", "train-1", "ml", "uid-1")
    for _ in range(3):
        actions.event(ref, "TriggeredScaleUp", "pod triggered scale-up: [{gpu1-spot-a 0->1 (max: 400)}]")
    events = kube.objects("events")
    assert len(events) == 1
    ev = events[0]
    assert ev["metadata"]["namespace"] == "ml" and ev["reason"] == "TriggeredScaleUp"
    assert ev["involvedObject"] == {"kind": "Pod", "name": "train-1", "namespace": "ml", "uid": "uid-1",
                                    "apiVersion": "v1"}
    assert ev["source"]["component"] == "gpuburst-scaler"
    actions.write_status({"scale_ups": 1})
    actions.write_status({"scale_ups": 2})
    cms = kube.objects("configmaps")
    assert len(cms) == 1 and '"scale_ups": 2' in cms[0]["data"]["status.json"]


def test_only_one_of_two_replicas_leads(kube: FakeKube, api) -> None:  # type: ignore[no-untyped-def]
    a = Leader(api, "gpuburst-system", "replica-a", lease_seconds=15)
    b = Leader(api, "gpuburst-system", "replica-b", lease_seconds=15)
    assert a.try_lead() is True
    assert b.try_lead() is False
    assert a.try_lead() is True  # renews
    lease = kube.objects("leases")[0]
    assert lease["spec"]["holderIdentity"] == "replica-a" and lease["spec"]["leaseDurationSeconds"] == 15
    kube.set_down(True)
    assert a.try_lead() is False  # cannot renew: stop acting at once


def test_large_lists_are_read_page_by_page(kube: FakeKube, api) -> None:  # type: ignore[no-untyped-def]
    for i in range(7):
        kube.put("pods", pod(f"p-{i}", pending=True))
    cache = ClusterCache(api, watch_timeout=5, page_size=3)
    cache.start()
    try:
        assert cache.wait_synced(5)
        assert sorted(p.name for p in cache.observe(lambda _: None).pending) == [f"p-{i}" for i in range(7)]
        assert [off for res, off in kube.lists if res == "pods"] == [0, 3, 6]
    finally:
        cache.stop()


def test_an_unreachable_api_server_is_a_kube_error_not_a_crash() -> None:
    # Connection refused (an API server restarting) surfaces as urllib3's MaxRetryError inside the
    # client; the actions turn it into KubeError, which the loop handles per node.
    conf = client.Configuration()
    conf.host = "http://127.0.0.1:9"  # discard port: nothing listens
    conf.retries = 0
    actions = KubeActions(client.ApiClient(conf), "gpuburst-system")
    with pytest.raises(KubeError, match="evict default/p"):
        actions.evict("default", "p")
    with pytest.raises(KubeError, match="patch node n1"):
        actions.cordon({"metadata": {"name": "n1"}, "spec": {}})
    actions.event(ObjectRef("Node", "n1"), "ScaleDown", "x")  # logged, not raised
    actions.write_status({"x": 1})


def test_cordon_on_a_stale_copy_fails_instead_of_wiping_a_new_taint(kube: FakeKube, api) -> None:  # type: ignore[no-untyped-def]
    # The cache's copy predates a NoExecute taint the node lifecycle controller just added: writing the
    # whole taint list from that copy would remove it. The patch carries the copy's resourceVersion.
    actions = KubeActions(api, "gpuburst-system")
    kube.put("nodes", node("n3"))
    stale = kube.get("nodes", "/n3")
    assert stale is not None
    stale = json.loads(json.dumps(stale))
    fresh = kube.get("nodes", "/n3")
    assert fresh is not None
    fresh["spec"]["taints"] = [*fresh["spec"].get("taints", []),
                               {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]
    kube.put("nodes", fresh)
    with pytest.raises(KubeError, match="HTTP 409"):
        actions.cordon(stale)
    now = kube.get("nodes", "/n3")
    assert now is not None and not now["spec"].get("unschedulable")
    assert any(t["key"] == "node.kubernetes.io/unreachable" for t in now["spec"]["taints"])
    actions.cordon(now)  # on the current copy it goes through, keeping the controller's taint
    now = kube.get("nodes", "/n3")
    assert now is not None and now["spec"]["unschedulable"] is True
    assert {t["key"] for t in now["spec"]["taints"]} >= {"node.kubernetes.io/unreachable", keys.TAINT_DISRUPTING}


def test_a_stopped_cache_says_nothing_when_its_server_goes(  # type: ignore[no-untyped-def]
        kube: FakeKube, api, caplog: pytest.LogCaptureFixture) -> None:
    """Its watch threads end quietly: a watch cut after `stop` is no failure to log (nor to retry), so nothing
    is written later into a stream its process (or a test) has closed. The fake server: it ends the open watches
    on cue (`set_down`), which the real one does only when it stops."""
    c = ClusterCache(api, watch_timeout=5, backoff_initial=0.05, backoff_max=0.2)
    c.start()
    assert c.wait_synced(5)
    c.stop(wait=0)
    kube.set_down(True)  # ends the open watches
    assert eventually(lambda: not any(inf._thread and inf._thread.is_alive() for inf in c.informers))
    assert [r.getMessage() for r in caplog.records if r.name == "scaler.kube.cache"] == []
