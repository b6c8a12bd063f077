"""A real Prometheus holding the kube-state-metrics series of a known workload, for `trace export` tests.

`write_series` writes, as OpenMetrics, what kube-state-metrics would have exposed at each scrape for a
list of pods (its real series names and labels: docs/metrics/workload/pod-metrics.md of
kubernetes/kube-state-metrics; resource names sanitized, nvidia.com/gpu -> nvidia_com_gpu);
`start_prometheus` backfills them with `promtool tsdb create-blocks-from openmetrics` into a fresh
data dir and starts Debian's `prometheus` on it, on a free port, until it is ready.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
MISSING = "prometheus/promtool not installed (Debian: apt-get install prometheus)"


@dataclass(frozen=True)
class KsmPod:
    name: str
    uid: str
    owner: tuple[str, str] | None  # (kind, name); None: a bare pod
    created: float
    started: float | None
    completed: float | None
    deleted: float  # the last moment kube-state-metrics still lists it
    gpus: int
    cpu: float  # cores
    memory: int  # bytes
    namespace: str = "trace"


def _labels(pod: KsmPod, **extra: str) -> str:
    labels = {"namespace": pod.namespace, "pod": pod.name, "uid": pod.uid, **extra}
    return ",".join(f'{k}="{v}"' for k, v in labels.items())


def write_series(path: Path, pods: list[KsmPod], first: float, last: float, scrape: float) -> int:
    """The OpenMetrics file of every scrape from `first` to `last`; the number of samples."""
    families: dict[str, list[str]] = {n: [] for n in ("kube_pod_created", "kube_pod_start_time",
                                                      "kube_pod_completion_time", "kube_pod_owner",
                                                      "kube_pod_container_resource_requests")}
    for pod in pods:
        k0 = max(0, int((pod.created - first) // scrape) + 1)
        k1 = int((min(pod.deleted, last) - first) // scrape)
        times = [first + k * scrape for k in range(k0, k1 + 1)]
        owner = _labels(pod, owner_kind=pod.owner[0], owner_name=pod.owner[1], owner_is_controller="true") \
            if pod.owner else _labels(pod, owner_kind="<none>", owner_name="<none>", owner_is_controller="<none>")
        requests_ = [(_labels(pod, container="main", node="n1", resource=r, unit=u), v) for r, u, v in
                     (("nvidia_com_gpu", "integer", pod.gpus), ("cpu", "core", pod.cpu),
                      ("memory", "byte", pod.memory)) if v]
        plain = _labels(pod)
        for name, labels, value, since in (("kube_pod_created", plain, pod.created, pod.created),
                                           ("kube_pod_start_time", plain, pod.started, pod.started),
                                           ("kube_pod_completion_time", plain, pod.completed, pod.completed),
                                           ("kube_pod_owner", owner, 1, pod.created),
                                           *(("kube_pod_container_resource_requests", lab, v, pod.created)
                                             for lab, v in requests_)):
            if value is None or since is None:
                continue
            families[name] += [f"{name}{{{labels}}} {value:.15g} {t:.0f}" for t in times if t >= since]
    lines = []
    for name, samples in families.items():
        lines += [f"# TYPE {name} gauge", *samples]
    path.write_text("\n".join(lines) + "\n# EOF\n", encoding="utf-8")
    return sum(len(s) for s in families.values())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def start_prometheus(series: Path, workdir: Path) -> Iterator[str]:
    """Backfill `series` into a new TSDB and serve it; yields the base URL."""
    assert PROMETHEUS and PROMTOOL, MISSING
    data = workdir / "data"
    data.mkdir()
    subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=24h",
                    str(series), str(data)], check=True, capture_output=True, timeout=120)
    config = workdir / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n", encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (workdir / "prometheus.log").open("wb")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={data}",
                             "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{url}/-/ready", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, \
                (workdir / "prometheus.log").read_text(errors="replace")[-2000:]
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
