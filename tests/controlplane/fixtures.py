"""pytest fixtures on the real control plane (plane.py) and the node agent (agent.py).

- `control_plane` (session): etcd, kube-apiserver, kube-scheduler and kube-controller-manager of 1.37,
  with the CRDs the scaler reads (ProvisioningRequest as cluster-autoscaler installs it, CapacityBuffer from
  our chart) and the scaler's ServiceAccount bound to the chart's generated RBAC, nothing more: a
  permission the chart lacks fails the test that needs it.
- `cluster` (per test): an admin client, the scaler's client (its ServiceAccount's token), a running node
  agent; everything a test made is deleted after it.

Import the fixtures into a conftest: `from tests.controlplane.fixtures import cluster, control_plane`.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from kubernetes import client, config, utils
from kubernetes.client.rest import ApiException

from tests.controlplane.agent import NodeAgent
from tests.controlplane.plane import BIN, ROOT, ControlPlane, kubeconfig

CHART = ROOT / "charts" / "gpuburst-scaler"
CRDS = (Path(__file__).parent / "crds" / "provisioningrequests.autoscaling.x-k8s.io.yaml",
        *sorted((CHART / "crds").glob("*.yaml")))
SCALER_NAMESPACE = "gpuburst-system"
SCALER_SA = "gpuburst-scaler"
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


def admin_client(plane: ControlPlane) -> client.ApiClient:
    return config.new_client_from_config(str(plane.admin_kubeconfig))


def _chart_rbac() -> list[dict[str, Any]]:
    """The ServiceAccount and RBAC objects our chart renders (helm's Go SDK, no helm binary)."""
    values = yaml.safe_load((CHART / "ci" / "eksctl-discover.yaml").read_text())  # an EKS install of the chart
    with helm.Chart.load(str(CHART)) as chart:
        manifests = chart.render(values, name="gpuburst", namespace=SCALER_NAMESPACE, is_install=True)
    return [doc for template, text in manifests.items() if not template.endswith(".txt")
            for doc in yaml.safe_load_all(text) if doc and doc.get("kind") in RBAC_KINDS]


def install(plane: ControlPlane) -> Path:
    """CRDs, the scaler's namespace and identity; returns the scaler's kubeconfig (a bound token)."""
    api = admin_client(plane)
    core = client.CoreV1Api(api)
    for path in CRDS:
        for doc in yaml.safe_load_all(path.read_text()):
            utils.create_from_dict(api, doc)
    core.create_namespace({"metadata": {"name": SCALER_NAMESPACE}})
    for doc in _chart_rbac():
        utils.create_from_dict(api, doc, namespace=SCALER_NAMESPACE)
    ext = client.ApiextensionsV1Api(api)
    for path in CRDS:
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        _until(lambda n=name: any(c.type == "Established" and c.status == "True"
                                  for c in (ext.read_custom_resource_definition(n).status.conditions or [])),
               f"CRD {name} established")
    token = core.create_namespaced_service_account_token(SCALER_SA, SCALER_NAMESPACE, {
        "spec": {"expirationSeconds": 86400}}).status.token
    return kubeconfig(plane.dir / "scaler.kubeconfig", plane.server, plane.pki / "ca.crt", token=token,
                      user=f"system:serviceaccount:{SCALER_NAMESPACE}:{SCALER_SA}")


def _until(check: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.1)


@dataclass
class Cluster:
    plane: ControlPlane
    admin: client.ApiClient
    scaler_kubeconfig: Path
    agent: NodeAgent

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.admin)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.admin)

    def create(self, obj: dict[str, Any]) -> Any:
        """Any object, as `kubectl create -f` would (the real server validates it)."""
        return utils.create_from_dict(self.admin, obj, namespace=obj.get("metadata", {}).get("namespace", "default"))

    def pods(self, namespace: str = "default") -> list[Any]:
        return list(self.core.list_namespaced_pod(namespace).items)

    def wait(self, check: Any, what: str, timeout: float = 30.0) -> None:
        _until(check, what, timeout)

    def clean(self) -> None:
        """Back to an empty cluster: what the test made goes, the platform (CRDs, RBAC) stays."""
        for name in list(self.agent.nodes):
            self.agent.forget(name)
        core, custom = self.core, self.custom
        for ns in core.list_namespace().items:
            name = ns.metadata.name
            if name in ("kube-system", "kube-public", "kube-node-lease", SCALER_NAMESPACE):
                continue
            apps = client.AppsV1Api(self.admin)  # controllers first, or they make the pods again
            for delete_apps in (apps.delete_collection_namespaced_deployment,
                                apps.delete_collection_namespaced_replica_set):
                with contextlib.suppress(ApiException):
                    delete_apps(name, propagation_policy="Background")
            with contextlib.suppress(ApiException):
                core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
            for group, version, plural in (("policy", "v1", "poddisruptionbudgets"),
                                           ("resource.k8s.io", "v1", "resourceclaims"),
                                           ("resource.k8s.io", "v1", "resourceclaimtemplates"),
                                           ("autoscaling.x-k8s.io", "v1", "provisioningrequests"),
                                           ("autoscaling.x-k8s.io", "v1beta1", "capacitybuffers"),
                                           ("scheduling.k8s.io", "v1beta1", "podgroups")):
                with contextlib.suppress(ApiException):
                    custom.delete_collection_namespaced_custom_object(group, version, name, plural)
            for delete in (core.delete_collection_namespaced_pod_template, core.delete_collection_namespaced_event,
                           core.delete_collection_namespaced_persistent_volume_claim):
                with contextlib.suppress(ApiException):
                    delete(name)
            if name != "default":
                with contextlib.suppress(ApiException):
                    core.delete_namespace(name)
        for plural in ("resourceslices", "deviceclasses", "devicetaintrules"):
            with contextlib.suppress(ApiException):
                custom.delete_collection_cluster_custom_object("resource.k8s.io", "v1", plural)
        with contextlib.suppress(ApiException):
            core.delete_collection_persistent_volume()
        with contextlib.suppress(ApiException):
            client.StorageV1Api(self.admin).delete_collection_storage_class()
        keep = {"default", "kube-system", "kube-public", "kube-node-lease", SCALER_NAMESPACE}
        _until(lambda: {ns.metadata.name for ns in core.list_namespace().items} <= keep,
               "the test's namespaces deleted (namespace controller)", timeout=60)
        for ns in (SCALER_NAMESPACE, "default"):
            with contextlib.suppress(ApiException):
                client.CoordinationV1Api(self.admin).delete_collection_namespaced_lease(ns)
            with contextlib.suppress(ApiException):
                core.delete_collection_namespaced_config_map(ns, field_selector="metadata.name!=kube-root-ca.crt")
            with contextlib.suppress(ApiException):
                core.delete_collection_namespaced_event(ns)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, Path]]:
    if not (BIN / "kube-apiserver").exists():
        pytest.fail(f"{BIN}: no control plane binaries; build them: tests/controlplane/build.sh (make kube-build)")
    plane = ControlPlane(tmp_path_factory.mktemp("kube")).start()
    try:
        yield plane, install(plane)
    finally:
        plane.stop()


@pytest.fixture
def cluster(control_plane: tuple[ControlPlane, Path]) -> Iterator[Cluster]:
    plane, scaler_kc = control_plane
    api = admin_client(plane)
    agent = NodeAgent(api).start()
    c = Cluster(plane, api, scaler_kc, agent)
    try:
        yield c
    finally:
        agent.stop()
        c.clean()
        assert not agent.errors, agent.errors


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, default=str)
