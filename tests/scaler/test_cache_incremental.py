"""The watch-fed cache converts each pod and node once, when its event arrives (issue 28): a pass reads the
converted objects, an unchanged object is not converted again, and what one pass does to its view does
not leak into the next."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client

from scaler.core.model import keys
from scaler.kube import cache as cache_module
from scaler.kube import view as kube_view
from scaler.kube.cache import ClusterCache
from scaler.kube.view import cluster_view
from tests.fakes.kubeapi import node, pod

JSON = dict[str, Any]


def at(obj: JSON, rv: int) -> JSON:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the pods converted, in order."""
    seen: list[str] = []
    real = kube_view.pod_entry

    def counting(obj: Any) -> Any:
        seen.append(obj["metadata"]["name"])
        return real(obj)

    monkeypatch.setattr("scaler.kube.cache.pod_entry", counting)
    return seen


def synced_cache() -> ClusterCache:
    c = ClusterCache(client.ApiClient())
    for inf in c.informers:
        inf.synced.set()
    return c


def test_a_pod_is_converted_when_its_event_arrives_not_by_every_pass(conversions: list[str]) -> None:
    c = synced_cache()
    c.nodes.apply("ADDED", at(node("n1", cpu="8"), 1))
    c.pods.apply("ADDED", at(pod("web", node_name="n1"), 2))
    c.pods.apply("ADDED", at(pod("train", pending=True, gpus=1), 3))
    for _ in range(3):
        view = c.observe(lambda _: None)
        assert [p.name for p in view.pending] == ["train"]
        assert [p.name for p in view.nodes[0].pods] == ["web"]
    assert conversions == ["web", "train"]
    c.pods.apply("MODIFIED", at(pod("web", node_name="n1"), 2))  # the same version again (a resync)
    assert conversions == ["web", "train"]
    c.pods.apply("MODIFIED", at(pod("train", node_name="n1", gpus=1), 4))  # bound: converted anew
    view = c.observe(lambda _: None)
    assert view.pending == [] and sorted(p.name for p in view.nodes[0].pods) == ["train", "web"]
    c.pods.apply("DELETED", at(pod("web", node_name="n1"), 5))
    assert [p.name for p in c.observe(lambda _: None).nodes[0].pods] == ["train"]
    assert conversions == ["web", "train", "train"]


def test_an_unchanged_node_is_handed_out_again_a_changed_one_anew() -> None:
    """A pass changes no node of its view (provreq books on copies, `test_a_pass_leaves_its_nodes_as_they_were`):
    the node of the last pass is given again while its version stands, and the converted one never changes."""
    c = synced_cache()
    c.nodes.apply("ADDED", at(node("n1", provider_id="aws:///us-east-1a/i-1"), 1))
    c.nodes.apply("ADDED", at(node("n2", provider_id="aws:///us-east-1a/i-2"), 1))
    c.pods.apply("ADDED", at(pod("web", node_name="n1"), 2))
    first = c.observe(lambda _: "gpu-od")
    assert first.nodes[0].pool == "gpu-od" and [p.name for p in first.nodes[0].pods] == ["web"]
    c.pods.apply("ADDED", at(pod("train", node_name="n2"), 3))
    again = c.observe(lambda _: "gpu-od")
    assert again.nodes[0] is first.nodes[0]  # n1: nothing changed
    assert again.nodes[1] is not first.nodes[1] and [p.name for p in again.nodes[1].pods] == ["train"]
    assert first.nodes[1].pods == [] and again.nodes[1].version != first.nodes[1].version
    moved = c.observe(lambda _: "gpu-spot")  # the pools' answer changed: every node anew
    assert all(m is not a and m.pool == "gpu-spot" for m, a in zip(moved.nodes, again.nodes, strict=True))
    assert [n.pool for n in again.nodes] == ["gpu-od", "gpu-od"]
    assert all(model.pods == [] and model.pool is None for model, _ in c.nodes.models())


def test_a_nodes_version_changes_with_the_node_its_pods_or_its_pool_and_only_then() -> None:
    """The version the planner's memo keys per-node answers on (`Node.version`)."""
    c = synced_cache()
    c.nodes.apply("ADDED", at(node("n1", provider_id="aws:///us-east-1a/i-1"), 1))
    c.pods.apply("ADDED", at(pod("web", node_name="n1"), 2))
    pool = {"of": "gpu-od"}

    def version() -> int:
        return c.observe(lambda _: pool["of"]).nodes[0].version

    first = version()
    c.pods.apply("ADDED", at(pod("other", pending=True), 3))  # not on the node
    c.pods.apply("MODIFIED", at(pod("web", node_name="n1"), 2))  # the same version again (a resync)
    assert version() == first
    steps = [lambda: c.pods.apply("MODIFIED", at(pod("other", node_name="n1"), 4)),  # bound to it
             lambda: c.pods.apply("MODIFIED", at(pod("web", node_name="n1", cpu="1"), 5)),  # a pod changed
             lambda: c.pods.apply("DELETED", at(pod("web", node_name="n1"), 6)),
             lambda: c.nodes.apply("MODIFIED", at(node("n1", provider_id="aws:///us-east-1a/i-1", cpu="8"), 7)),
             lambda: pool.update({"of": "gpu-spot"})]
    seen = [first]
    for step in steps:
        step()
        seen.append(version())
        assert version() == seen[-1]  # and not again without a change
    assert len(set(seen)) == len(seen)


def test_a_pod_that_does_not_convert_is_skipped_on_every_pass() -> None:
    c = synced_cache()
    bad = at(pod("bad", pending=True), 1)
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    c.pods.apply("ADDED", bad)
    c.pods.apply("ADDED", at(pod("good", pending=True), 2))
    for _ in range(2):
        view = c.observe(lambda _: None)
        assert [p.name for p in view.pending] == ["good"]
        assert [(s.kind, s.name) for s in view.skipped] == [("Pod", "bad")]
        assert "requests.cpu" in view.skipped[0].message
    # Of a pod that converted only what names it is kept (its model holds the rest); a bad one stays whole.
    kept = {o["metadata"]["name"]: o for o in c.pods.items()}
    assert kept["good"] == {"metadata": {"name": "good", "namespace": "default", "resourceVersion": "2"}}
    assert kept["bad"] == bad


def test_a_relist_converts_only_what_changed(conversions: list[str]) -> None:
    body = {"items": [at(pod("a", pending=True), 1), at(pod("b", pending=True), 2)],
            "metadata": {"resourceVersion": "2"}}
    inf = cache_module.Informer("pods", lambda **_: SimpleNamespace(data=json.dumps(body)),
                                convert=cache_module.pod_entry)  # type: ignore[attr-defined]
    inf._relist()
    body["items"] = [at(pod("a", pending=True), 1), at(pod("b", pending=True, gpus=1), 3)]
    inf._relist()
    assert conversions == ["a", "b", "b"]
    assert [m[0].requests.get("nvidia.com/gpu", 0) for m, _ in inf.models()] == [0, 1]


# --- property: the incremental view is the from-scratch conversion of the same objects --------------------
NAMES = ("a", "b", "c", "d")
NODE_NAMES = ("n1", "n2")


@st.composite
def event_sequences(draw: st.DrawFn) -> list[tuple[str, str, JSON]]:
    """Watch events on pods and nodes, each change with a new resourceVersion; some re-deliver an object
    unchanged (same version), some pods do not convert, some have ended; a RELIST lists the pods anew (in the
    API server's order)."""
    out: list[tuple[str, str, JSON]] = []
    rv = 0
    last: dict[tuple[str, str], JSON] = {}
    for _ in range(draw(st.integers(1, 30))):
        resource = draw(st.sampled_from(("pods", "pods", "pods", "nodes")))
        name = draw(st.sampled_from(NODE_NAMES if resource == "nodes" else NAMES))
        kind = draw(st.sampled_from(("ADDED", "MODIFIED", "MODIFIED", "DELETED", "RESYNC", "RELIST")))
        if kind == "RELIST":
            out.append(("RELIST", "pods", {}))
            continue
        if kind == "RESYNC":
            if (resource, name) in last:
                out.append(("MODIFIED", resource, last[(resource, name)]))
            continue
        rv += 1
        if resource == "nodes":
            obj = at(node(name, cpu=draw(st.sampled_from(("2", "8"))), pool=draw(st.sampled_from((None, "p")))), rv)
        else:
            obj = at(pod(name, node_name=draw(st.sampled_from((None, *NODE_NAMES, "gone"))),
                         pending=draw(st.booleans()), gpus=draw(st.integers(0, 1))), rv)
            if obj["spec"].get("nodeName") is None:
                obj["spec"].pop("nodeName", None)
            state = draw(st.integers(0, 9))
            if state == 0:
                obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
            elif state == 1:
                obj["status"] = {"phase": "Succeeded"}
        last[(resource, name)] = obj
        out.append((kind, resource, obj))
    return out


@settings(max_examples=200, deadline=None, derandomize=True)
@given(event_sequences())
def test_the_incremental_view_equals_the_conversion_from_scratch(events: list[tuple[str, str, JSON]]) -> None:
    c = synced_cache()
    api: dict[str, dict[str, JSON]] = {"pods": {}, "nodes": {}}  # what the API server holds
    seen: dict[tuple[str, int], str] = {}  # (node, version) -> the node as a pass saw it
    for kind, resource, obj in events:
        if kind == "RELIST":
            listed = {"items": list(api["pods"].values()), "metadata": {"resourceVersion": "0"}}
            c.pods._list_fn = lambda listed=listed, **_: SimpleNamespace(data=json.dumps(listed))
            c.pods._relist()
        else:
            getattr(c, resource).apply(kind, obj)
        if kind == "RELIST":
            pass
        elif kind == "DELETED":
            api[resource].pop(obj["metadata"]["name"], None)
        else:
            api[resource][obj["metadata"]["name"]] = obj
        view = c.observe(lambda pid: None)
        skipped: list[tuple[str, str]] = []

        def skip(err: Exception, o: Any, into: list[tuple[str, str]] = skipped) -> None:
            into.append((o["metadata"]["name"], str(err)))

        want = cluster_view(api["nodes"].values(), api["pods"].values(), keys.LABEL_POOL, skip=skip)
        assert view.pending == want.pending
        assert [dataclasses.replace(n, version=0) for n in view.nodes] == list(want.nodes.values())
        for n in view.nodes:  # a version stands for one content: the planner's memo keys on it
            assert n.version and seen.setdefault((n.name, n.version), repr(n)) == repr(n)
        assert [(s.name, s.message) for s in view.skipped] == skipped
        assert sorted(o["metadata"]["name"] for o in c.pods.items()) == sorted(api["pods"])
