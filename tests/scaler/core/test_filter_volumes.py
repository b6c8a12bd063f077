"""VolumeBinding, VolumeZone, VolumeRestrictions (ReadWriteOncePod) and NodeVolumeLimits, table-driven.

Cases ported (rewritten in Python, same volumes, nodes and expected reasons) from kube-scheduler's
pkg/scheduler/framework/plugins/volumezone/volume_zone_test.go (TestSingleZone, TestMultiZone),
volumebinding/volume_binding_test.go (TestVolumeBinding's PreFilter and Filter cases),
volumerestrictions/volume_restrictions_test.go (the ReadWriteOncePod cases) and
nodevolumelimits/csi_test.go (TestCSILimits); plus templates: a new node's attach limit comes from
its instance type.
"""

from __future__ import annotations

import pytest
from filter_builders import cluster, node, pod, verdicts

from scaler.core.model import keys
from scaler.core.model.objects import (
    ClaimRef,
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    SelectorRequirement,
    StorageClass,
)
from scaler.core.model.storage import Storage
from scaler.core.scheduling.attach import template_limits
from scaler.core.scheduling.filters import reasons
from scaler.kube.convert_storage import pv_from_json, pvc_from_json, storage_class_from_json

BETA_ZONE, BETA_REGION = keys.LABEL_ZONE_BETA, keys.LABEL_REGION_BETA
ZONE, REGION = keys.LABEL_ZONE, keys.LABEL_REGION
GiB = 1 << 30


def bound(name: str, pv: str, ns: str = "default") -> PersistentVolumeClaim:
    return PersistentVolumeClaim(name, ns, volume_name=pv, storage_class="sc", phase="Bound", bind_completed=True)


def zone_storage() -> Storage:
    pvs = [PersistentVolume("Vol_1", {BETA_ZONE: "us-west1-a"}),
           PersistentVolume("Vol_2", {BETA_REGION: "us-west1-b", "uselessLabel": "none"}),
           PersistentVolume("Vol_3", {BETA_REGION: "us-west1-c"}),
           PersistentVolume("Vol_Stable_1", {ZONE: "us-west1-a"}),
           PersistentVolume("Vol_Stable_2", {REGION: "us-west1-b", "uselessLabel": "none"}),
           PersistentVolume("Vol_Stable_3", {REGION: "us-west1-c"}),
           PersistentVolume("Vol_multi", {ZONE: "us-west1-a__us-west1-b"})]
    s = Storage(volumes={pv.name: pv for pv in pvs})
    for pv in pvs:
        c = bound(f"PVC_{pv.name}", pv.name)
        s.claims[c.key] = c
    return s


ZONE_CASES = [
    ("pod without volume", None, {BETA_ZONE: "us-west1-a"}, None),
    ("node without labels", "Vol_1", {}, None),
    ("beta zone label matched", "Vol_1", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, None),
    ("beta region label matched", "Vol_2", {BETA_REGION: "us-west1-b", "uselessLabel": "none"}, None),
    ("beta region label doesn't match", "Vol_2", {BETA_REGION: "no_us-west1-b", "uselessLabel": "none"},
     reasons.VOLUME_ZONE),
    ("beta zone label doesn't match", "Vol_1", {BETA_ZONE: "no_us-west1-a", "uselessLabel": "none"},
     reasons.VOLUME_ZONE),
    ("zone label matched", "Vol_Stable_1", {ZONE: "us-west1-a", "uselessLabel": "none"}, None),
    ("region label matched", "Vol_Stable_2", {REGION: "us-west1-b", "uselessLabel": "none"}, None),
    ("region label doesn't match", "Vol_Stable_2", {REGION: "no_us-west1-b"}, reasons.VOLUME_ZONE),
    ("zone label doesn't match", "Vol_Stable_1", {ZONE: "no_us-west1-a"}, reasons.VOLUME_ZONE),
    ("pv with beta zone label matches a node's GA zone label", "Vol_1", {ZONE: "us-west1-a"}, None),
    ("pv with a zone set matches either zone", "Vol_multi", {ZONE: "us-west1-b"}, None),
    ("pv with a zone set, node elsewhere", "Vol_multi", {ZONE: "us-west1-c"}, reasons.VOLUME_ZONE),
    ("node with a zone label only, pv with a region label", "Vol_Stable_2", {ZONE: "us-west1-b"},
     reasons.VOLUME_ZONE),
]


@pytest.mark.parametrize(("pv", "labels", "want"), [c[1:] for c in ZONE_CASES], ids=[c[0] for c in ZONE_CASES])
def test_volume_zone(pv, labels, want) -> None:
    c = cluster([node("host1", labels)], storage=zone_storage())
    incoming = pod("p", claims=[f"PVC_{pv}"] if pv else [])
    assert verdicts(c, incoming) == {"host1": want}


# --- VolumeBinding ---------------------------------------------------------------------------------
WFFC = StorageClass("wait", "ebs.csi.aws.com", "WaitForFirstConsumer")
IMMEDIATE = StorageClass("immediate", "ebs.csi.aws.com", "Immediate")
ZONAL = StorageClass("zonal", "ebs.csi.aws.com", "WaitForFirstConsumer",
                     allowed_topologies=((SelectorRequirement(ZONE, "In", ("us-east-1a",)),),))
STATIC = StorageClass("static", keys.NO_PROVISIONER, "WaitForFirstConsumer")


def binding_storage() -> Storage:
    pv_a = PersistentVolume("pv-a", node_affinity=((SelectorRequirement(ZONE, "In", ("us-east-1a",)),),),
                            storage_class="wait", capacity=10 * GiB, access_modes=("ReadWriteOnce",),
                            claim="default/pvc-a", phase="Bound")
    pv_free = PersistentVolume("pv-local", node_affinity=((SelectorRequirement("kubernetes.io/hostname", "In",
                                                                               ("node-1",)),),),
                               storage_class="static", capacity=100 * GiB, access_modes=("ReadWriteOnce",))
    claims = [bound("pvc-a", "pv-a"),
              PersistentVolumeClaim("pvc-wait", "default", storage_class="wait", request=GiB),
              PersistentVolumeClaim("pvc-imm", "default", storage_class="immediate", request=GiB),
              PersistentVolumeClaim("pvc-zonal", "default", storage_class="zonal", request=GiB),
              PersistentVolumeClaim("pvc-static", "default", storage_class="static", request=10 * GiB,
                                    access_modes=("ReadWriteOnce",)),
              PersistentVolumeClaim("pvc-big", "default", storage_class="static", request=500 * GiB),
              PersistentVolumeClaim("pvc-picked", "default", storage_class="wait", selected_node="node-1"),
              bound("pvc-gone", "pv-missing"),
              PersistentVolumeClaim("pvc-lost", "default", volume_name="pv-x", storage_class="wait", phase="Lost"),
              PersistentVolumeClaim("pvc-deleting", "default", storage_class="wait", terminating=True)]
    return Storage(claims={c.key: c for c in claims}, volumes={"pv-a": pv_a, "pv-local": pv_free},
                   classes={sc.name: sc for sc in (WFFC, IMMEDIATE, ZONAL, STATIC)})


def binding_nodes() -> list:
    return [node("node-1", {ZONE: "us-east-1a", "kubernetes.io/hostname": "node-1"}),
            node("node-2", {ZONE: "us-east-1b", "kubernetes.io/hostname": "node-2"})]


BINDING_CASES = [
    ("pod has no pvcs", [], {"node-1": None, "node-2": None}),
    ("all bound: the PV's node affinity decides", ["pvc-a"],
     {"node-1": None, "node-2": reasons.VOLUME_NODE_CONFLICT}),
    ("PVC does not exist", ["pvc-nope"],
     {"node-1": reasons.claim_not_found("pvc-nope"), "node-2": reasons.claim_not_found("pvc-nope")}),
    ("part of PVCs do not exist", ["pvc-a", "pvc-nope"],
     {"node-1": reasons.claim_not_found("pvc-nope"), "node-2": reasons.claim_not_found("pvc-nope")}),
    ("immediate claims not bound", ["pvc-imm"],
     {"node-1": reasons.UNBOUND_IMMEDIATE, "node-2": reasons.UNBOUND_IMMEDIATE}),
    ("unbound WaitForFirstConsumer claim with a provisioner: anywhere", ["pvc-wait"],
     {"node-1": None, "node-2": None}),
    ("unbound claim, the class's allowedTopologies pick the zone", ["pvc-zonal"],
     {"node-1": None, "node-2": reasons.VOLUME_BIND_CONFLICT}),
    ("unbound claim, no provisioner: a free local PV on node-1 only", ["pvc-static"],
     {"node-1": None, "node-2": reasons.VOLUME_BIND_CONFLICT}),
    ("unbound claim, no PV large enough", ["pvc-big"],
     {"node-1": reasons.VOLUME_BIND_CONFLICT, "node-2": reasons.VOLUME_BIND_CONFLICT}),
    ("provisioning already picked a node", ["pvc-picked"],
     {"node-1": None, "node-2": reasons.VOLUME_BIND_CONFLICT}),
    ("bound and unbound unsatisfied: the node conflict is reported first", ["pvc-a", "pvc-zonal"],
     {"node-1": None, "node-2": reasons.VOLUME_NODE_CONFLICT}),
    ("pv not found", ["pvc-gone"], {"node-1": reasons.VOLUME_PV_MISSING, "node-2": reasons.VOLUME_PV_MISSING}),
    ("claim lost", ["pvc-lost"], {n: reasons.claim_lost("pvc-lost", "pv-x") for n in ("node-1", "node-2")}),
    ("claim being deleted", ["pvc-deleting"], {n: reasons.claim_deleting("pvc-deleting") for n in ("node-1",
                                                                                                     "node-2")}),
]


@pytest.mark.parametrize(("claims", "want"), [c[1:] for c in BINDING_CASES], ids=[c[0] for c in BINDING_CASES])
def test_volume_binding(claims, want) -> None:
    c = cluster(binding_nodes(), storage=binding_storage())
    assert verdicts(c, pod("p", claims=claims)) == want


def test_prefilter_failure_is_a_pod_level_reason() -> None:
    c = cluster(binding_nodes(), storage=binding_storage())
    assert c.check(pod("p", claims=["pvc-imm"])).pod_reason == reasons.UNBOUND_IMMEDIATE
    assert c.check(pod("p", claims=["pvc-zonal"])).pod_reason is None


def test_generic_ephemeral_volume_claims() -> None:
    storage = Storage(claims={}, classes={"wait": WFFC})
    incoming = pod("p", uid="u1")
    incoming.claims = (ClaimRef("p-scratch", ephemeral=True),)
    c = cluster(binding_nodes(), storage=storage)
    assert c.check(incoming).pod_reason == reasons.ephemeral_claim_missing("p-scratch")
    storage.claims["default/p-scratch"] = PersistentVolumeClaim("p-scratch", "default", storage_class="wait",
                                                                owner_uid="someone-else")
    assert c.check(incoming).pod_reason == reasons.claim_not_for_pod("p-scratch")
    storage.claims["default/p-scratch"] = PersistentVolumeClaim("p-scratch", "default", storage_class="wait",
                                                                owner_uid="u1")
    assert verdicts(c, incoming) == {"node-1": None, "node-2": None}


# --- VolumeRestrictions: ReadWriteOncePod --------------------------------------------------------
def test_read_write_once_pod_claim_in_use_fails_everywhere() -> None:
    rwop = PersistentVolumeClaim("solo", "default", volume_name="pv-solo", storage_class="wait",
                                 access_modes=("ReadWriteOncePod",), phase="Bound", bind_completed=True)
    rwo = PersistentVolumeClaim("shared", "default", volume_name="pv-shared", storage_class="wait",
                                access_modes=("ReadWriteOnce",), phase="Bound", bind_completed=True)
    storage = Storage(claims={rwop.key: rwop, rwo.key: rwo},
                      volumes={"pv-solo": PersistentVolume("pv-solo"), "pv-shared": PersistentVolume("pv-shared")})
    nodes = binding_nodes()
    c = cluster(nodes, [pod("user", node="node-1", claims=["solo", "shared"])], storage=storage)
    assert verdicts(c, pod("p", claims=["solo"])) == {"node-1": reasons.RWOP_CONFLICT,
                                                      "node-2": reasons.RWOP_CONFLICT}
    assert verdicts(c, pod("p", claims=["shared"])) == {"node-1": None, "node-2": None}
    c.unplace(next(iter(c.placed.pods["node-1"].values())), "node-1")
    assert verdicts(c, pod("p", claims=["solo"])) == {"node-1": None, "node-2": None}


# --- NodeVolumeLimits (CSI) ----------------------------------------------------------------------
def limits_storage(n: int) -> Storage:
    claims, pvs = {}, {}
    for i in range(n):
        pv = PersistentVolume(f"pv-{i}", driver=keys.CSI_EBS, handle=f"vol-{i}")
        pvs[pv.name] = pv
        c = bound(f"pvc-{i}", pv.name)
        claims[c.key] = c
    unbound = PersistentVolumeClaim("pvc-new", "default", storage_class="wait")
    claims[unbound.key] = unbound
    return Storage(claims=claims, volumes=pvs, classes={"wait": WFFC},
                   csinodes={"node-1": CSINode("node-1", {keys.CSI_EBS: 4})})


LIMIT_CASES = [
    ("fits under the limit", ["pvc-0", "pvc-1"], ["pvc-2", "pvc-3"], None),
    ("one volume over the limit", ["pvc-0", "pvc-1"], ["pvc-2", "pvc-3", "pvc-4"], reasons.MAX_VOLUMES),
    ("a volume already attached is not counted twice", ["pvc-0", "pvc-1", "pvc-2", "pvc-3"], ["pvc-3"], None),
    ("an unbound claim counts for its class's driver", ["pvc-0", "pvc-1", "pvc-2", "pvc-3"], ["pvc-new"],
     reasons.MAX_VOLUMES),
]


@pytest.mark.parametrize(("existing", "incoming", "want"), [c[1:] for c in LIMIT_CASES],
                         ids=[c[0] for c in LIMIT_CASES])
def test_csi_limits(existing, incoming, want) -> None:
    c = cluster([node("node-1")], [pod("e", node="node-1", claims=existing)], storage=limits_storage(6))
    assert verdicts(c, pod("p", claims=incoming)) == {"node-1": want}


def test_node_without_csinode_has_no_limit_and_templates_use_the_instance_type() -> None:
    storage = limits_storage(40)
    many = [f"pvc-{i}" for i in range(30)]
    c = cluster([node("node-9")], storage=storage)
    assert verdicts(c, pod("p", claims=many)) == {"node-9": None}
    tmpl = node("tmpl", {keys.LABEL_INSTANCE_TYPE: "g6.xlarge"}, template=True)
    assert c.check(pod("p", claims=many)).reason(tmpl) == reasons.MAX_VOLUMES
    assert c.check(pod("p", claims=many[:20])).reason(tmpl) is None


def test_template_limits() -> None:
    """28 Nitro slots - ENI - root - NVMe stores - GPUs; Xen 39; Azure: the size's data disks."""
    assert template_limits("m6i.xlarge") == {keys.CSI_EBS: 26}
    assert template_limits("g6.xlarge") == {keys.CSI_EBS: 24}
    assert template_limits("p4d.24xlarge") == {keys.CSI_EBS: 10}
    assert template_limits("p3.8xlarge") == {keys.CSI_EBS: 39}
    assert template_limits("Standard_NC24ads_A100_v4") == {keys.CSI_AZURE_DISK: 8}
    assert template_limits("unknown.type") == {}


# --- conversion from the API's JSON ------------------------------------------------------------------
def test_storage_objects_from_json() -> None:
    pvc = pvc_from_json({"metadata": {"name": "data", "namespace": "ml", "annotations": {
        keys.ANNOTATION_BIND_COMPLETED: "yes", keys.ANNOTATION_SELECTED_NODE: "n1"}},
        "spec": {"volumeName": "pv-1", "storageClassName": "gp3", "accessModes": ["ReadWriteOncePod"],
                 "resources": {"requests": {"storage": "100Gi"}}}, "status": {"phase": "Bound"}})
    assert (pvc.key, pvc.bound, pvc.request, pvc.selected_node) == ("ml/data", True, 100 * GiB, "n1")
    pv = pv_from_json({"metadata": {"name": "pv-1", "labels": {ZONE: "us-east-1a"}}, "spec": {
        "capacity": {"storage": "100Gi"}, "storageClassName": "gp3", "claimRef": {"namespace": "ml", "name": "data"},
        "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": ["us-east-1a"]}]}]}}}, "status": {"phase": "Bound"}})
    assert (pv.claim, pv.driver, pv.handle, pv.capacity) == ("ml/data", keys.CSI_EBS, "vol-1", 100 * GiB)
    assert pv.node_affinity == ((SelectorRequirement(ZONE, "In", ("us-east-1a",)),),)
    intree = pv_from_json({"metadata": {"name": "old"}, "spec": {"awsElasticBlockStore": {"volumeID": "vol-9"}}})
    assert (intree.driver, intree.handle) == (keys.CSI_EBS, "vol-9")
    sc = storage_class_from_json({"metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com",
                                  "volumeBindingMode": "WaitForFirstConsumer", "allowedTopologies": [
                                      {"matchLabelExpressions": [{"key": ZONE, "values": ["us-east-1a"]}]}]})
    assert sc.allowed_topologies == ((SelectorRequirement(ZONE, "In", ("us-east-1a",)),),)
    assert sc.binding_mode == "WaitForFirstConsumer"
