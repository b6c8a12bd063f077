"""`python -m scaler trace export` against a real Prometheus (Debian's package) holding kube-state-metrics series.

Round trip: the first 300 jobs of PHILLY-A become the pods kube-state-metrics would have listed (a gang's
workers owned by one PyTorchJob, pending up to 135 s before starting, kept 10 minutes after completing, or
deleted at once so that no scrape sees their completion), scraped every minute for 9 hours, backfilled
with promtool; the export of those 9 hours has the same jobs: submit, GPUs and workers exact, duration
within the scrape interval, jobs still running at the end cut there.
"""

from __future__ import annotations

import csv
import http.server
import json
import re
import shlex
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from ksm_prometheus import MISSING, PROMETHEUS, PROMTOOL, KsmPod, free_port, start_prometheus, write_series

from scaler.cli import main
from scaler.sim.export import PodSeries, Window, jobs, write_trace
from scaler.sim.trace import load_trace

T0 = 1_790_000_000.0  # 2026-09-21T14:13:20Z
SCRAPE = 60.0
HOURS = 9
END = T0 + HOURS * 3600
JOBS = 300
LINGER = 600.0  # a completed pod stays listed this long (the Job's ttlSecondsAfterFinished)
ROOT = Path(__file__).resolve().parents[3]
PHILLY = ROOT.parent / "shared/traces/PHILLY-A.csv"

pytestmark = pytest.mark.skipif(PROMETHEUS is None or PROMTOOL is None or not PHILLY.exists(),
                                reason=MISSING + " or ../shared/traces missing")


def _workload() -> tuple[list[KsmPod], dict[str, tuple[float, int, int, float]]]:
    """The pods, and the jobs the export should find: job id -> (submit_s, gpus, workers, duration_s)."""
    with PHILLY.open(encoding="utf-8") as f:
        rows = [r for _, r in zip(range(JOBS), csv.DictReader(f), strict=False)]
    pods: list[KsmPod] = []
    expected: dict[str, tuple[float, int, int, float]] = {}
    for i, row in enumerate(rows):
        job, gpus, workers = row["job_id"], int(row["gpus"]), int(row["num_workers"])
        duration = float(row["duration_s"])
        created = T0 + float(row["submit_s"])
        started = created + (i % 4) * 45  # pending up to 135 s: duration counts from the start, not the creation
        completed = started + duration
        deleted = completed if i % 7 == 0 and duration >= 3 * SCRAPE else completed + LINGER
        kind = "PyTorchJob" if workers > 1 else "Job"
        for w in range(workers):
            pods.append(KsmPod(f"job-{job}-{w}", f"uid-{job}-{w}", (kind, f"job-{job}"), created, started,
                               completed, deleted, gpus // workers, 4.0 * gpus / workers, 16 * 2**30 * gpus // workers))
        expected[f"trace/job-{job}"] = (created - T0, gpus, workers, min(completed, END) - started)
    # A Job whose second pod comes 30 minutes after the first: two jobs, not a gang.
    for n, at in enumerate((1000.0, 2800.0)):
        pods.append(KsmPod(f"sweep-{n}", f"uid-sweep-{n}", ("Job", "sweep"), T0 + at, T0 + at, T0 + at + 600,
                           T0 + at + 900, 1, 2.0, 2**30))
    expected["trace/sweep"] = (1000.0, 1, 1, 600.0)
    expected["trace/sweep-2"] = (2800.0, 1, 1, 600.0)
    # A bare pod (no owner) is a job of its own.
    pods.append(KsmPod("notebook", "uid-notebook", None, T0 + 100, T0 + 130, T0 + 4000, T0 + 4600, 2, 8.0, 2**33))
    expected["trace/notebook"] = (100.0, 2, 1, 3870.0)
    # Not jobs of the range: a CPU-only pod, a GPU pod created before the start, one that never started.
    pods += [KsmPod("web-1", "uid-web", ("ReplicaSet", "web-5d8f"), T0 + 50, T0 + 55, None, END + 3600, 0, 1.0, 2**30),
             KsmPod("early", "uid-early", ("Job", "early"), T0 - 3600, T0 - 3500, T0 + 3600, T0 + 4200, 1, 1.0, 2**30),
             KsmPod("stuck", "uid-stuck", ("Job", "stuck"), T0 + 600, None, None, T0 + 1800, 8, 1.0, 2**30)]
    return pods, expected


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, tuple[float, int, int,
                                                                                                  float]], int]]:
    workdir = tmp_path_factory.mktemp("prometheus")
    pods, expected = _workload()
    write_series(workdir / "series.om", pods, T0 - 3600, END + 1200, SCRAPE)
    running = sum(1 for p in pods if p.gpus and p.started is not None and p.created >= T0 and
                  (p.completed is None or p.completed > END) and p.deleted > END)
    with start_prometheus(workdir / "series.om", workdir) as url:
        yield url, expected, running


def _export(capsys: pytest.CaptureFixture[str], url: str, out: Path, *extra: str,
            start: str = str(T0), end: str = str(END)) -> tuple[int, str, str]:
    code = main(["trace", "export", "--prometheus", url, "--start", start, "--end", end, "--out", str(out), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_round_trip_has_the_same_jobs_within_the_scrape_interval(
        prometheus: tuple[str, dict[str, tuple[float, int, int, float]], int], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    url, expected, running = prometheus
    out = tmp_path / "exported.csv"
    code, stdout, err = _export(capsys, url, out, "--step", "1h")
    assert code == 0, err
    header = out.read_text(encoding="utf-8").splitlines()[0]
    assert header.startswith(f"# source: kube-state-metrics through Prometheus {url}, between "
                             "2026-09-21T14:13:20Z and 2026-09-21T23:13:20Z")
    assert f"{running} pods still running at --end (duration cut there)" in header
    assert "left out: 1 pods that never started; left out: 1 pods created before --start" in header
    assert stdout.startswith(f"{out}: {len(expected)} jobs")
    jobs = {j.job_id: j for j in load_trace(out)}  # the simulator's own reader takes it
    assert sorted(jobs) == sorted(expected)
    wrong = []
    for job_id, (submit, gpus, workers, duration) in expected.items():
        job = jobs[job_id]
        if (abs(job.submit_s - submit) > 1 or job.gpus != gpus or job.num_workers != workers
                or abs(job.duration_s - duration) > SCRAPE):
            wrong.append((job_id, (submit, gpus, workers, duration),
                          (job.submit_s, job.gpus, job.num_workers, job.duration_s)))
    assert wrong == []
    assert jobs["trace/notebook"].cpu_m == 8000 and jobs["trace/notebook"].memory == 2**33
    gang = next(j for j in jobs.values() if j.num_workers == 4)
    assert gang.cpu_m == 4000 * gang.gpus


def _docs_commands() -> list[list[str]]:
    """The page's `trace export` command and the `simulate` of its output, as argv after `python -m scaler`."""
    text = (ROOT / "docs/simulator.md").read_text(encoding="utf-8")
    export = re.search(r"^\.venv/bin/python -m scaler (trace export --prometheus http.*)$", text, re.M)
    assert export is not None
    out = shlex.split(export.group(1))[shlex.split(export.group(1)).index("--out") + 1]
    simulate = re.search(rf"^\.venv/bin/python -m scaler (simulate --trace {re.escape(out)} .*)$", text, re.M)
    assert simulate is not None
    return [shlex.split(export.group(1)), shlex.split(simulate.group(1))]


def test_the_documented_commands_export_and_simulate(
        prometheus: tuple[str, dict[str, tuple[float, int, int, float]], int], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/simulator.md's commands as written, but for this Prometheus' address and range (and the simulation
    cut to the first hour, to keep the test short)."""
    export, simulate = _docs_commands()
    values = {"--prometheus": prometheus[0], "--start": str(T0), "--end": str(END)}
    export = [values.get(export[i - 1], a) if i else a for i, a in enumerate(export)]
    monkeypatch.chdir(tmp_path)
    assert "mkdir -p out" in (ROOT / "docs/simulator.md").read_text(encoding="utf-8")
    (tmp_path / "out").mkdir()  # the page's `mkdir -p out`, before its commands
    simulate = [str(ROOT / a) if a.startswith("examples/") else a for a in simulate]
    assert main(export) == 0, capsys.readouterr().err
    assert main([*simulate, "--hours", "1", "--quiet"]) == 0, capsys.readouterr().err
    assert "jobs_never_started           0" in capsys.readouterr().out


def test_a_range_without_kube_state_metrics_series_is_one_line(
        prometheus: tuple[str, dict[str, tuple[float, int, int, float]], int], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "none.csv"
    code, _, err = _export(capsys, prometheus[0], out, start="2020-01-01T00:00:00Z", end="2020-01-02T00:00:00Z")
    assert code == 2 and not out.exists()
    assert err.count("\n") == 1 and "has no kube-state-metrics series (kube_pod_created) between " \
        "2020-01-01T00:00:00Z and 2020-01-02T00:00:00Z" in err


@pytest.mark.parametrize(("args", "wanted"), [
    (("--start", "2026-01-02T00:00:00Z", "--end", "2026-01-02T00:00:00Z"), "an empty time range"),
    (("--start", "now-1d", "--end", "now-2d"), "an empty time range"),
    (("--start", "yesterday", "--end", "now"), "--start 'yesterday': expected RFC 3339"),
    (("--start", "2026-01-01T00:00:00", "--end", "now"), "give the time zone"),
    (("--start", "now-1h", "--end", "now", "--bearer-token-file", "/nonexistent/token"),
     "--bearer-token-file /nonexistent/token: cannot read"),
    (("--start", "now-1h", "--end", "now", "--out", "/nonexistent/t.csv"), "--out /nonexistent/t.csv: no such folder"),
])
def test_bad_input_is_one_line_before_any_request(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  args: tuple[str, ...], wanted: str) -> None:
    out = tmp_path / "t.csv"
    # Port 9 (discard): nothing answers there, so a request would fail with another message.
    code = main(["trace", "export", "--prometheus", "http://127.0.0.1:9", "--out", str(out), *args])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert err.count("\n") == 1 and wanted in err, err


def test_an_unreachable_prometheus_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.csv"
    code, _, err = _export(capsys, f"http://127.0.0.1:{free_port()}", out)
    assert code == 2 and not out.exists()
    assert err.count("\n") == 1 and err.startswith("error: trace export: cannot reach Prometheus at http://127.0.0.1:")


# --- a stand-in server: what a Prometheus behind a proxy, or not a Prometheus, answers --------------------
EMPTY = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}).encode()


@contextmanager
def _server(token: str | None, html: bool = False, tls: tuple[Path, Path] | None = None) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            if token is not None and self.headers.get("Authorization") != f"Bearer {token}":
                self.send_response(401)
                self.end_headers()
                return
            body = b"<html>Grafana</html>" if html else (
                b'{"status":"success","data":[]}' if "/label/" in self.path else EMPTY)
            self.send_response(200)
            self.send_header("Content-Type", "text/html" if html else "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls[0], tls[1])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_bearer_token_comes_from_its_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret-token\n", encoding="utf-8")
    with _server("s3cret-token") as url:
        code, _, err = _export(capsys, url, tmp_path / "a.csv")
        assert code == 2 and "refused the request: HTTP 401 (its token: --bearer-token-file)" in err
        code, _, err = _export(capsys, url, tmp_path / "b.csv", "--bearer-token-file", str(token))
    # Past the proxy's check: an empty Prometheus, so no kube-state-metrics series.
    assert code == 2 and "has no kube-state-metrics series" in err and "s3cret" not in err


def test_an_answer_that_is_not_prometheus_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with _server(None, html=True) as url:
        code, _, err = _export(capsys, url, tmp_path / "a.csv")
    assert code == 2 and err.count("\n") == 1
    assert "/api/v1/query_range did not answer as Prometheus' HTTP API (HTTP 200, text/html)" in err


def test_tls_is_verified_and_a_private_ca_is_given_by_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    with _server(None, tls=(cert, key)) as url:
        code, _, err = _export(capsys, url, tmp_path / "a.csv")
        assert code == 2 and err.count("\n") == 1 and "TLS verification failed (a private CA: --ca-file)" in err
        code, _, err = _export(capsys, url, tmp_path / "b.csv", "--ca-file", str(cert))
    assert code == 2 and "has no kube-state-metrics series" in err


def test_job_ids_stay_unique_for_the_trace_reader(tmp_path: Path) -> None:
    """A bare pod named like a Job in its namespace, and a Job named like another Job's second gang."""
    pods = {
        "a": PodSeries("ns", "train", 1, T0 + 10, T0 + 20, T0 + 80, owner=None),
        "b": PodSeries("ns", "train-x1", 1, T0 + 10, T0 + 20, T0 + 80, owner=("Job", "train")),
        "c": PodSeries("ns", "train-x2", 1, T0 + 900, T0 + 910, T0 + 980, owner=("Job", "train")),
        "d": PodSeries("ns", "train-2-x", 1, T0 + 900, T0 + 910, T0 + 980, owner=("Job", "train-2")),
    }
    rows, _ = jobs(pods, Window(T0, T0 + 3600, 3600))
    write_trace(tmp_path / "t.csv", rows, "source: test")
    assert sorted(j.job_id for j in load_trace(tmp_path / "t.csv")) == ["ns/train", "ns/train-2", "ns/train-2~2",
                                                                          "ns/train~2"]
