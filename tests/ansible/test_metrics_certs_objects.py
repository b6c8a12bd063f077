"""The Kubernetes side of the metrics_certs role, on the objects it renders.

The role runs for real on this machine (connection local, community.crypto issuing the
certificates) with the cluster calls switched off and the objects written to a file; the test then
reads them as the API server would: the official client's models, the Secret's PEM data and the
APIService's caBundle checked with `cryptography`.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes.client import ApiClient

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: gpuburst.cluster.metrics_certs
"""


def _run_role(tmp_path: Path, **extra: object) -> str:
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    variables = {"metrics_certs_dir": str(tmp_path / "pki"), "metrics_certs_render_dir": str(tmp_path),
                 "metrics_certs_kubernetes": False, "metrics_certs_service": "prometheus-adapter",
                 "metrics_certs_namespace": "monitoring", "ansible_python_interpreter": sys.executable,
                 **extra}
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0"}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-e", json.dumps(variables),
         str(tmp_path / "play.yml")],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def _objects(tmp_path: Path) -> list[dict[str, Any]]:
    return list(yaml.safe_load((tmp_path / "metrics-certs.yml").read_text()))


def _model(obj: dict[str, Any], kind: str) -> Any:
    client = ApiClient()
    return client._ApiClient__deserialize(obj, kind)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]], str]:
    tmp = tmp_path_factory.mktemp("metrics-certs")
    apiservices = {"metrics_certs_apiservices": ["v1beta1.custom.metrics.k8s.io", "v1beta1.external.metrics.k8s.io"]}
    _run_role(tmp, **apiservices)
    second = _run_role(tmp, **apiservices)
    return tmp, _objects(tmp), second


def test_secret_is_a_tls_secret_holding_the_issued_files(rendered: tuple[Path, list[dict[str, Any]], str]) -> None:
    tmp, objects, _ = rendered
    secret = _model(objects[0], "V1Secret")
    assert (secret.kind, secret.type) == ("Secret", "kubernetes.io/tls")
    assert (secret.metadata.name, secret.metadata.namespace) == ("prometheus-adapter-tls", "monitoring")
    assert set(secret.data) == {"tls.crt", "tls.key", "ca.crt"}
    assert base64.b64decode(secret.data["tls.crt"]) == (tmp / "pki" / "server.crt").read_bytes()
    key = serialization.load_pem_private_key(base64.b64decode(secret.data["tls.key"]), password=None)
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret.data["tls.crt"]))
    assert key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) \
        == cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def test_apiservices_trust_the_ca_that_signed_the_serving_certificate(
        rendered: tuple[Path, list[dict[str, Any]], str]) -> None:
    _, objects, _ = rendered
    services = objects[1:]
    assert sorted(s["metadata"]["name"] for s in services) == [
        "v1beta1.custom.metrics.k8s.io", "v1beta1.external.metrics.k8s.io"]
    server = x509.load_pem_x509_certificate(base64.b64decode(objects[0]["data"]["tls.crt"]))
    for service in services:
        spec = service["spec"]
        assert spec["insecureSkipTLSVerify"] is False
        assert spec["service"] == {"name": "prometheus-adapter", "namespace": "monitoring"}
        ca = x509.load_pem_x509_certificate(base64.b64decode(spec["caBundle"]))
        server.verify_directly_issued_by(ca)
        assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    sans = sans.get_values_for_type(x509.DNSName)
    assert sorted(sans) == ["prometheus-adapter", "prometheus-adapter.monitoring", "prometheus-adapter.monitoring.svc"]


def test_second_run_changes_nothing(rendered: tuple[Path, list[dict[str, Any]], str]) -> None:
    *_, second = rendered
    assert "changed=0" in second


def _pem(tmp: Path, name: str) -> dict[str, Any]:
    return {o["metadata"]["name"]: o for o in yaml.safe_load((tmp / name).read_text())}


def test_the_ca_is_kept_as_a_secret_and_read_back_on_a_fresh_machine(tmp_path: Path) -> None:
    """A CI deploy runs on a new runner each time: the CA must come from the cluster, not from the
    runner's disk, or every run would mint a CA the APIServices do not trust yet."""
    first = tmp_path / "first"
    first.mkdir()
    work_dirs = set(Path(tempfile.gettempdir()).glob("*.gpuburst-pki"))
    _run_role(first, metrics_certs_dir="")  # a temporary working directory
    assert set(Path(tempfile.gettempdir()).glob("*.gpuburst-pki")) == work_dirs, "the working directory is left"
    ca_secret = _pem(first, "metrics-certs-ca.yml")["prometheus-adapter-ca"]
    assert ca_secret["type"] == "Opaque" and set(ca_secret["data"]) == {"ca.crt", "ca.key"}
    ca = x509.load_pem_x509_certificate(base64.b64decode(ca_secret["data"]["ca.crt"]))
    key = serialization.load_pem_private_key(base64.b64decode(ca_secret["data"]["ca.key"]), password=None)
    assert key.public_key() == ca.public_key()
    # A second run on "another machine": an empty working directory, the same store (the rendered
    # objects here, the cluster's Secrets for real): the same CA, and the serving certificate kept.
    before = _objects(first)[0]["data"]
    _run_role(first, metrics_certs_dir=str(tmp_path / "other-runner"))
    assert _pem(first, "metrics-certs-ca.yml")["prometheus-adapter-ca"]["data"] == ca_secret["data"]
    assert _objects(first)[0]["data"] == before


def test_a_renewal_rotates_the_serving_key_and_keeps_the_ca(tmp_path: Path) -> None:
    _run_role(tmp_path)
    old = _objects(tmp_path)[0]["data"]
    old_ca = _pem(tmp_path, "metrics-certs-ca.yml")["prometheus-adapter-ca"]["data"]
    _run_role(tmp_path, metrics_certs_renew_days=400)  # the 365-day serving certificate is due
    new = _objects(tmp_path)[0]["data"]
    assert new["tls.crt"] != old["tls.crt"]
    assert new["tls.key"] != old["tls.key"], "a renewed certificate must come with a new key"
    assert _pem(tmp_path, "metrics-certs-ca.yml")["prometheus-adapter-ca"]["data"] == old_ca
    ca = x509.load_pem_x509_certificate(base64.b64decode(old_ca["ca.crt"]))
    x509.load_pem_x509_certificate(base64.b64decode(new["tls.crt"])).verify_directly_issued_by(ca)

