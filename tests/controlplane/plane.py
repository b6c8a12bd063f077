"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-scheduler and
kube-controller-manager of the version our users run, built from upstream's Go modules (build.sh).

TLS everywhere (a CA of its own; every private key 0600), RBAC on, each component with its own client
certificate, features at their 1.37 defaults (DRA on), plus what EKS and AKS do not switch on by default
and a test needs, switched on by name below. No kubelet: tests/controlplane/agent.py keeps Nodes Ready.

    python -m tests.controlplane.plane up [--dir DIR]     # prints `export KUBECONFIG=...` last
    python -m tests.controlplane.plane down [--dir DIR]   # stops every process it started
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import ipaddress
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("GPUBURST_KUBE_BIN", ROOT / ".cache" / "kube" / "bin"))
DEFAULT_DIR = ROOT / ".cache" / "kube" / "run"
VERSION = "v1.37.2"  # go.mod's k8s.io/kubernetes; build.sh refuses binaries of another version

# Beta features and APIs off by default in 1.37 that the tests need: the Workload API (gangs as
# PodGroups, KEP-4671). Everything else (DRA with device taints, DeviceTaintRules, extended resources,
# partitionable devices, consumable capacity, prioritized lists) is on by default in 1.37.
FEATURE_GATES = "GenericWorkload=true"
RUNTIME_CONFIG = "scheduling.k8s.io/v1beta1=true"
COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- certificates ----------------------------------------------------------------------------------
def _write_key(path: Path, key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _cert(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
          issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool = False,
          sans: list[x509.GeneralName] | None = None, server: bool = False) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
         .not_valid_after(now + dt.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
    else:
        b = b.add_extension(x509.KeyUsage(True, True, False, False, False, False, False, False, False),
                            critical=True)
        usage = [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH] if server else [x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]
        b = b.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def make_pki(d: Path) -> None:
    """CA, the API server's serving certificate, a client certificate per component and for the admin,
    and the service-account signing key."""
    d.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("gpuburst-test-ca")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    (d / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    _write_key(d / "ca.key", ca_key)
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in ("localhost", "kubernetes", "kubernetes.default",
                                                               "kubernetes.default.svc")]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", "10.0.0.1")]
    certs = {"apiserver": (_name("kube-apiserver"), True),
             "admin": (_name("gpuburst-admin", "system:masters"), False),
             "kube-scheduler": (_name("system:kube-scheduler"), False),
             "kube-controller-manager": (_name("system:kube-controller-manager"), False)}
    for name, (subject, server) in certs.items():
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _cert(subject, key, ca_name, ca_key, server=server, sans=sans if server else None)
        (d / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(d / f"{name}.key", key)
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(d / "sa.key", sa)
    (d / "sa.pub").write_bytes(sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                            serialization.PublicFormat.SubjectPublicKeyInfo))


def kubeconfig(path: Path, server: str, ca: Path, *, cert: Path | None = None, key: Path | None = None,
               token: str | None = None, user: str = "admin") -> Path:
    auth: dict[str, str] = {"token": token} if token else {"client-certificate": str(cert),
                                                           "client-key": str(key)}
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": user,
        "clusters": [{"name": "gpuburst-test", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": auth}],
        "contexts": [{"name": user, "context": {"cluster": "gpuburst-test", "user": user}}],
    }, indent=1))
    path.chmod(0o600)
    return path


# --- the processes ---------------------------------------------------------------------------------
@dataclass
class ControlPlane:
    dir: Path = DEFAULT_DIR
    bin: Path = BIN
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    port: int = 0

    @property
    def pki(self) -> Path:
        return self.dir / "pki"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.dir / "admin.kubeconfig"

    def _spawn(self, name: str, args: list[str]) -> None:
        exe = self.bin / name
        if not exe.exists():
            raise SystemExit(f"{exe}: missing; build the control plane first: tests/controlplane/build.sh")
        log = (self.dir / f"{name}.log").open("ab")
        # Own process group: `down` (or a dying test session) stops the component and nothing else.
        self.procs[name] = subprocess.Popen([str(exe), *args], stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        (self.dir / f"{name}.pid").write_text(str(self.procs[name].pid))

    def start(self, timeout: float = 120.0) -> ControlPlane:
        if self.dir.exists():
            stop_dir(self.dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        make_pki(self.pki)
        p = self.pki
        etcd_port, peer_port, self.port = free_port(), free_port(), free_port()
        self._spawn("etcd", [
            "--name=gpuburst-test", f"--data-dir={self.dir / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=gpuburst-test=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync=true",  # a test's etcd: its data dies with the test anyway
            "--log-level=warn",
        ])
        self._spawn("kube-apiserver", [
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.port}",
            f"--tls-cert-file={p / 'apiserver.crt'}", f"--tls-private-key-file={p / 'apiserver.key'}",
            f"--client-ca-file={p / 'ca.crt'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={p / 'sa.pub'}", f"--service-account-signing-key-file={p / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=RBAC",
            "--endpoint-reconciler-type=none",  # no kubernetes Service endpoint on loopback: nothing uses it
            f"--feature-gates={FEATURE_GATES}", f"--runtime-config={RUNTIME_CONFIG}",
            f"--cert-dir={self.dir / 'certs'}", "--v=1",
        ])
        self._wait_ready(timeout)
        for name in ("kube-scheduler", "kube-controller-manager"):
            kc = kubeconfig(self.dir / f"{name}.kubeconfig", self.server, p / "ca.crt",
                            cert=p / f"{name}.crt", key=p / f"{name}.key", user=name)
            common = [f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
                      "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
                      f"--feature-gates={FEATURE_GATES}", f"--cert-dir={self.dir / ('certs-' + name)}", "--v=1"]
            if name == "kube-controller-manager":
                common += [f"--kubeconfig={kc}", "--leader-elect=false",
                           f"--service-account-private-key-file={p / 'sa.key'}",
                           f"--root-ca-file={p / 'ca.crt'}", "--use-service-account-credentials=true"]
            else:
                common += [f"--config={self._scheduler_config(kc)}"]
            self._spawn(name, common)
        kubeconfig(self.admin_kubeconfig, self.server, p / "ca.crt", cert=p / "admin.crt", key=p / "admin.key")
        self._wait_components(timeout)
        return self

    def _scheduler_config(self, kc: Path) -> Path:
        """kube-scheduler's defaults, but a pod that did not fit is retried within a second (upstream's
        default backoff grows to 10 s), so a test sees the binding a node's arrival causes without waiting
        for it. Profiles, plugins and their weights are the defaults."""
        path = self.dir / "kube-scheduler.yaml"
        path.write_text(json.dumps({
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(kc)}, "leaderElection": {"leaderElect": False},
            "podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 1}))
        return path

    def _ssl(self, client: bool = True) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        if client:
            ctx.load_cert_chain(self.pki / "admin.crt", self.pki / "admin.key")
        return ctx

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.server + path, context=self._ssl(), timeout=5) as r:
            return bytes(r.read())

    def _check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                tail = (self.dir / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{tail}")

    def _wait(self, path: str, done: Callable[[bytes], bool], what: str, timeout: float) -> None:
        """Polls `path` until `done` says so; a component that exits fails at once, with its log's tail."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            with contextlib.suppress(OSError):
                if done(self.get(path)):
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} after {timeout} s (logs in {self.dir})")
            time.sleep(0.3)

    def _wait_ready(self, timeout: float) -> None:
        self._wait("/readyz", lambda body: body == b"ok", "kube-apiserver not ready", timeout)

    def _wait_components(self, timeout: float) -> None:
        """Until the controller-manager has made the default ServiceAccount (its controllers run)."""
        self._wait("/api/v1/namespaces/default/serviceaccounts/default",
                   lambda body: json.loads(body).get("kind") == "ServiceAccount",
                   "controller-manager has not started", timeout)

    def stop(self) -> None:
        stop_dir(self.dir)
        self.procs.clear()


def stop_dir(d: Path) -> list[str]:
    """Stops every component whose pid file is in `d` (SIGTERM, then SIGKILL), in reverse start order;
    returns the names it stopped."""
    stopped = []
    for name in reversed(COMPONENTS):
        pidfile = d / f"{name}.pid"
        if not pidfile.exists():
            continue
        pid = int(pidfile.read_text())
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            end = time.monotonic() + wait
            while time.monotonic() < end and _alive(pid):
                time.sleep(0.1)
            if not _alive(pid):
                break
        pidfile.unlink()
        stopped.append(name)
    return stopped


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.controlplane.plane")
    ap.add_argument("action", choices=["up", "down"])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = ap.parse_args(argv)
    if args.action == "down":
        stopped = stop_dir(args.dir)
        print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        return 0
    plane = ControlPlane(args.dir).start()
    version = json.loads(plane.get("/version"))["gitVersion"]
    groups = json.loads(plane.get("/apis/resource.k8s.io"))["versions"]
    print(f"kube-apiserver {version} on {plane.server}; resource.k8s.io: "
          f"{', '.join(v['version'] for v in groups)}; logs in {plane.dir}")
    print(f"export KUBECONFIG={plane.admin_kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
