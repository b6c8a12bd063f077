"""`python -m scaler trace export`: a job trace from the kube-state-metrics series a Prometheus keeps.

The trace is the format of ../shared/traces with cpu and memory (scaler/sim/trace.py, KUBE_COLUMNS),
behind one comment line naming its source. Only pods that request nvidia.com/gpu are jobs; DaemonSet
and static pods are never jobs. Read through Prometheus' HTTP API (one query_range per series, windows of
--step seconds; a raw range query for the pods whose end no completion time says):

- submit = kube_pod_created; duration = kube_pod_completion_time - kube_pod_start_time. A pod that has
  no completion time by --end (still running then, or deleted before a scrape saw it complete) ends at
  its last sample (within one scrape interval of its real end), at --end at the latest: a pod still
  running at --end is kept with the part of its run inside the range (a lower bound, counted in the
  header line). Pods that never started and pods created before --start are left out (counted too).
- A job is one pod, or the pods of one owner (kube_pod_owner: a Job, PyTorchJob, ...) created within
  GANG_WINDOW_S of the first: a gang of num_workers pods, its GPUs, cpu and memory summed, from its
  first start to its last end. Pods an owner creates later (a Job's next completions) are jobs of
  their own.

Bad input (a time, an unreachable Prometheus, an answer that is not Prometheus', no kube-state-metrics
series in the range, no GPU pod) is one line on stderr and exit code 2, with no file written. TLS is
always verified (--ca-file for a private CA); a bearer token is read from --bearer-token-file, never
taken on the command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import requests

from scaler.sim.trace import KUBE_COLUMNS

GPU: Final = 'kube_pod_container_resource_requests{resource="nvidia_com_gpu"}'
GANG_WINDOW_S: Final = 60.0
NOT_JOBS: Final = frozenset({"DaemonSet", "Node"})  # node agents and static pods: not a workload's jobs
LOOKBACK_S: Final = 300.0  # Prometheus' default lookback: a pod last seen this close to --end still ran then
UIDS_PER_QUERY: Final = 100
TIMEOUT_S: Final = 300.0
# A Prometheus that does not accept the connection within this is named unreachable (one line, no retry).
CONNECT_S: Final = 10.0
MAX_POINTS: Final = 11_000  # Prometheus refuses a query_range of more points per series
# What the header line counts, of the GPU pods seen in the range.
RUNNING: Final = "{} pods still running at --end (duration cut there)"
NEVER_STARTED: Final = "left out: {} pods that never started"
EARLY: Final = "left out: {} pods created before --start"


class ExportError(Exception):
    """Bad input or an unusable answer; the message is the one line the user sees."""


# --- times -----------------------------------------------------------------------------------
def parse_duration(text: str, option: str) -> float:
    """`90`, `90s`, `15m`, `6h`, `7d` in seconds."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", text.strip())
    if match is None:
        raise ExportError(f"{option} {text!r}: expected seconds or a duration such as 15m, 6h, 7d")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


def parse_time(text: str, option: str, now: float) -> float:
    """RFC 3339 (`2026-11-01T00:00:00Z`), unix seconds, `now` or `now-7d` in unix seconds."""
    text = text.strip()
    if text == "now":
        return now
    if text.startswith("now-"):
        return now - parse_duration(text[4:], option)
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ExportError(f"{option} {text!r}: expected RFC 3339 (2026-11-01T00:00:00Z), unix seconds, "
                          "now or now-7d") from None
    if moment.tzinfo is None:
        raise ExportError(f"{option} {text!r}: give the time zone (Z or +01:00)")
    return moment.timestamp()


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


# --- Prometheus' HTTP API ---------------------------------------------------------------------
class Prometheus:
    def __init__(self, url: str, token: str | None = None, ca_file: str | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ExportError(f"--prometheus {url!r}: expected http(s)://host[:port][/prefix]")
        try:
            port = parts.port
        except ValueError:
            raise ExportError(f"--prometheus {url!r}: the port must be a number from 1 to 65535") from None
        if port == 0:
            raise ExportError(f"--prometheus {url!r}: the port must be a number from 1 to 65535")
        self.url = url.rstrip("/")
        # Shown in the trace's header: never a user:password the URL may carry.
        self.shown = urlunsplit((parts.scheme, parts.hostname + (f":{parts.port}" if parts.port else ""),
                                 parts.path.rstrip("/"), "", ""))
        self.session = requests.Session()
        # Per request: a Session's own `verify` loses to REQUESTS_CA_BUNDLE in the environment.
        self.verify: str | bool = ca_file if ca_file else True
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def _call(self, path: str, data: dict[str, Any] | None = None, params: dict[str, Any] | None = None) -> Any:
        where = f"Prometheus at {self.shown}"
        try:
            if data is not None:
                answer = self.session.post(self.url + path, data=data, timeout=(CONNECT_S, TIMEOUT_S),
                                           verify=self.verify)
            else:
                answer = self.session.get(self.url + path, params=params, timeout=(CONNECT_S, TIMEOUT_S),
                                          verify=self.verify)
        except requests.exceptions.SSLError as err:
            raise ExportError(f"{where}: TLS verification failed (a private CA: --ca-file): "
                              f"{_one_line(err)}") from None
        except requests.exceptions.ConnectTimeout:
            raise ExportError(f"cannot reach {where}: no connection within {CONNECT_S:g} s") from None
        except requests.RequestException as err:
            raise ExportError(f"cannot reach {where}: {_one_line(err)}") from None
        if answer.status_code in (401, 403):
            raise ExportError(f"{where} refused the request: HTTP {answer.status_code} "
                              "(its token: --bearer-token-file)")
        try:
            body = answer.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or "status" not in body:
            raise ExportError(f"{self.shown}{path} did not answer as Prometheus' HTTP API "
                              f"(HTTP {answer.status_code}, {answer.headers.get('Content-Type', 'no content type')})")
        if body["status"] != "success":
            raise ExportError(f"{where}: {body.get('errorType', 'error')}: {_one_line(body.get('error', ''))}")
        return body.get("data")

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        data = self._call("/api/v1/query_range", {"query": promql, "start": start, "end": end, "step": step})
        return list(data.get("result") or [])

    def query(self, promql: str, at: float) -> list[dict[str, Any]]:
        data = self._call("/api/v1/query", {"query": promql, "time": at})
        return list(data.get("result") or [])

    def has_series(self, name: str, start: float, end: float) -> bool:
        names = self._call("/api/v1/label/__name__/values", params={"match[]": name, "start": start, "end": end})
        return name in (names or [])


def _one_line(err: object) -> str:
    return " ".join(str(err).split())[:300]


# --- pods ------------------------------------------------------------------------------------
@dataclass(slots=True)
class PodSeries:
    namespace: str
    name: str
    gpus: float
    created: float | None = None
    started: float | None = None
    completed: float | None = None
    last_step: float = 0.0  # the last query step whose window saw the pod
    ended: float | None = None  # its last sample, for a pod without a completion time by --end
    cpu: float = 0.0  # cores
    memory: float = 0.0  # bytes
    owner: tuple[str, str] | None = None  # (kind, name)


class Window:
    """The steps of the range queries: windows of `step` seconds ending at `end`, covering [start, end]."""

    def __init__(self, start: float, end: float, step: float) -> None:
        count = math.ceil((end - start) / step)
        if count > MAX_POINTS:
            raise ExportError(f"--step {step:g}: {count} steps from --start to --end, Prometheus answers at most "
                              f"{MAX_POINTS}: give a longer --step")
        self.start, self.end, self.step = start, end, step
        self.first = end - (count - 1) * step
        self.range = f"[{int(step)}s]"

    def over(self, prom: Prometheus, expr: str, by: str = "namespace, pod, uid") -> list[dict[str, Any]]:
        """`max by (...)` of expr per window (expr has `$RANGE` where the window's range goes)."""
        return prom.query_range(f"max by ({by}) ({expr.replace('$RANGE', self.range)})", self.first, self.end,
                                self.step)


def collect(prom: Prometheus, window: Window) -> dict[str, PodSeries]:
    """The GPU pods seen in the range with their times, requests and owner, keyed by uid."""
    pods: dict[str, PodSeries] = {}
    for series in window.over(prom, f"max_over_time({GPU}$RANGE)", "namespace, pod, uid, container"):
        m = series["metric"]
        gpus = max(float(v) for _, v in series["values"])
        pod = pods.setdefault(m["uid"], PodSeries(m.get("namespace", ""), m.get("pod", ""), 0.0))
        pod.gpus += gpus  # the pod's containers: one series each
    pods = {uid: pod for uid, pod in pods.items() if pod.gpus > 0}
    if not pods:
        return pods
    gpu_pods = f" and on (uid) (max by (uid) (max_over_time({GPU}$RANGE)) > 0)"
    for metric, field in (("kube_pod_created", "created"), ("kube_pod_start_time", "started"),
                          ("kube_pod_completion_time", "completed")):
        for series in window.over(prom, f"max_over_time({metric}$RANGE)" + gpu_pods):
            seen = pods.get(series["metric"].get("uid", ""))
            if seen is not None:
                setattr(seen, field, max(float(v) for _, v in series["values"]))
                if field == "created":
                    seen.last_step = max(float(t) for t, _ in series["values"])
    for resource, field in (("cpu", "cpu"), ("memory", "memory")):
        requests = f'kube_pod_container_resource_requests{{resource="{resource}"}}'
        expr = f"sum by (uid) (max by (uid, container) (max_over_time({requests}$RANGE)))" + gpu_pods
        for series in window.over(prom, expr, "uid"):
            seen = pods.get(series["metric"].get("uid", ""))
            if seen is not None:
                setattr(seen, field, max(float(v) for _, v in series["values"]))
    for series in window.over(prom, "max_over_time(kube_pod_owner$RANGE)" + gpu_pods,
                              "uid, owner_kind, owner_name, owner_is_controller"):
        m = series["metric"]
        seen = pods.get(m.get("uid", ""))
        kind, name = m.get("owner_kind", "<none>"), m.get("owner_name", "<none>")
        if seen is not None and kind not in ("", "<none>") and (seen.owner is None or
                                                                 m.get("owner_is_controller") == "true"):
            seen.owner = (kind, name)
    return pods


def find_ends(prom: Prometheus, window: Window, pods: dict[str, PodSeries]) -> None:
    """The last sample of each started pod without a completion time by --end (one raw range query per
    batch of pods last seen in the same window)."""
    waiting: dict[float, list[str]] = defaultdict(list)
    for uid, pod in pods.items():
        if pod.started is not None and (pod.completed is None or pod.completed > window.end):
            waiting[pod.last_step].append(uid)
    for step, uids in sorted(waiting.items()):
        for i in range(0, len(uids), UIDS_PER_QUERY):
            # Regex-escaped, then the backslashes escaped again for PromQL's string literal.
            batch = "|".join(re.escape(u) for u in uids[i:i + UIDS_PER_QUERY]).replace("\\", "\\\\")
            for series in prom.query(f'kube_pod_created{{uid=~"{batch}"}}{window.range}', step):
                pod = pods[series["metric"]["uid"]]
                last = max(float(t) for t, _ in series["values"])
                pod.ended = max(pod.ended or 0.0, min(last, window.end))


# --- jobs ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Row:
    job_id: str
    submit_s: float
    gpus: int
    duration_s: float
    num_workers: int
    cpu: float
    mem_mib: float


def jobs(pods: dict[str, PodSeries], window: Window) -> tuple[list[Row], dict[str, int]]:
    """The trace's rows (sorted by submit) and what was left out or cut, by reason."""
    counts = {"pods": 0, RUNNING: 0, NEVER_STARTED: 0, EARLY: 0}
    groups: dict[tuple[str, str, str], list[PodSeries]] = defaultdict(list)
    for pod in pods.values():
        if pod.owner is not None and pod.owner[0] in NOT_JOBS:
            continue
        if pod.created is None or pod.created >= window.end:
            continue
        if pod.created < window.start:
            counts[EARLY] += 1
            continue
        if pod.started is None:
            counts[NEVER_STARTED] += 1
            continue
        counts["pods"] += 1
        if (pod.completed is None or pod.completed > window.end) and _end(pod, window) >= window.end - LOOKBACK_S:
            counts[RUNNING] += 1
        kind, name = pod.owner or ("Pod", pod.name)
        groups[(pod.namespace, kind, name)].append(pod)
    rows: list[Row] = []
    for (namespace, _, name), members in groups.items():
        members.sort(key=lambda p: (p.created or 0.0, p.name))
        gangs: list[list[PodSeries]] = []
        for pod in members:
            if gangs and (pod.created or 0.0) - (gangs[-1][0].created or 0.0) <= GANG_WINDOW_S:
                gangs[-1].append(pod)
            else:
                gangs.append([pod])
        for i, gang in enumerate(gangs):
            first = min(p.started or 0.0 for p in gang)
            last = max(_end(p, window) for p in gang)
            rows.append(Row(f"{namespace}/{name}" + (f"-{i + 1}" if i else ""),
                            (gang[0].created or 0.0) - window.start, round(sum(p.gpus for p in gang)),
                            max(0.0, last - first), len(gang), sum(p.cpu for p in gang),
                            sum(p.memory for p in gang) / 2**20))
    rows.sort(key=lambda r: (r.submit_s, r.job_id))
    return _unique(rows), counts


def _unique(rows: list[Row]) -> list[Row]:
    """Job ids the trace reader takes: a bare pod and an owner of the same name, or an owner named like
    another's second gang, get a `~N` suffix."""
    seen: set[str] = set()
    out = []
    for row in rows:
        job_id, n = row.job_id, 1
        while job_id in seen:
            n += 1
            job_id = f"{row.job_id}~{n}"
        seen.add(job_id)
        out.append(row if job_id == row.job_id else dataclasses.replace(row, job_id=job_id))
    return out


def _end(pod: PodSeries, window: Window) -> float:
    if pod.completed is not None and pod.completed <= window.end:
        return pod.completed
    return pod.ended if pod.ended is not None else (pod.started or 0.0)


def write_trace(path: Path, rows: list[Row], source: str) -> None:
    lines = [f"# {source}", ",".join(KUBE_COLUMNS)]
    lines += [f"{r.job_id},{round(r.submit_s)},{r.gpus},{round(r.duration_s)},{r.num_workers},"
              f"{round(r.cpu, 3):g},{math.ceil(r.mem_mib)}" for r in rows]
    partial = path.with_name(path.name + ".partial")  # renamed when whole: never half a trace at --out
    try:
        partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
        partial.replace(path)
    except OSError as err:
        partial.unlink(missing_ok=True)
        raise ExportError(f"--out {path}: cannot write: {err.strerror or err}") from None


# --- the command -----------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["export"], metavar="export", help="write a trace from Prometheus")
    parser.add_argument("--prometheus", required=True, metavar="URL",
                        help="Prometheus that scrapes kube-state-metrics, e.g. http://localhost:9090")
    parser.add_argument("--start", required=True, metavar="T",
                        help="range start: RFC 3339 (2026-11-01T00:00:00Z), unix seconds, now or now-7d")
    parser.add_argument("--end", required=True, metavar="T", help="range end, the same forms as --start")
    parser.add_argument("--step", default="1h", metavar="S",
                        help="window of each range-query step, seconds or 15m/1h (default 1h; longer for long "
                             "ranges: Prometheus answers at most 11,000 steps)")
    parser.add_argument("--out", required=True, metavar="FILE", help="trace CSV to write")
    parser.add_argument("--bearer-token-file", metavar="PATH",
                        help="file holding a bearer token sent to Prometheus (never give the token itself)")
    parser.add_argument("--ca-file", metavar="PATH",
                        help="CA bundle that signed Prometheus' TLS certificate (TLS is always verified)")


def _token(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise ExportError(f"--bearer-token-file {path}: cannot read: {getattr(err, 'strerror', None) or err}") \
            from None
    if not token or any(c.isspace() for c in token):
        raise ExportError(f"--bearer-token-file {path}: expected one token on one line")
    return token


def export(ns: argparse.Namespace) -> str:
    """Write the trace; the summary line it prints."""
    now = time.time()
    start, end = parse_time(ns.start, "--start", now), parse_time(ns.end, "--end", now)
    if end <= start:
        raise ExportError(f"--start {ns.start} to --end {ns.end}: an empty time range (the end must be after "
                          "the start)")
    step = parse_duration(ns.step, "--step")
    if step < 1:
        raise ExportError(f"--step {ns.step}: at least 1 s")
    if not Path(ns.out).resolve().parent.is_dir():
        raise ExportError(f"--out {ns.out}: no such folder")
    if ns.ca_file and not Path(ns.ca_file).is_file():
        raise ExportError(f"--ca-file {ns.ca_file}: no such file")
    prom = Prometheus(ns.prometheus, _token(ns.bearer_token_file), ns.ca_file)
    window = Window(start, end, float(int(step)))
    pods = collect(prom, window)
    span = f"between {iso(start)} and {iso(end)}"
    if not pods:
        if not prom.has_series("kube_pod_created", start, end):
            raise ExportError(f"Prometheus at {prom.shown} has no kube-state-metrics series (kube_pod_created) "
                              f"{span}: does it scrape kube-state-metrics?")
        raise ExportError(f"Prometheus at {prom.shown}: no pod requested nvidia.com/gpu {span} "
                          "(kube_pod_container_resource_requests{resource=\"nvidia_com_gpu\"})")
    find_ends(prom, window, pods)
    rows, counts = jobs(pods, window)
    if not rows:
        raise ExportError(f"Prometheus at {prom.shown}: no GPU pod both created and started {span}")
    cut = "; ".join(why.format(n) for why, n in counts.items() if why != "pods" and n)
    source = (f"source: kube-state-metrics through Prometheus {prom.shown}, {span}, step {int(step)} s; "
              f"{counts['pods']} pods -> {len(rows)} jobs" + (f" ({cut}; rules: scaler/sim/export.py)" if cut else ""))
    write_trace(Path(ns.out), rows, source)
    return f"{ns.out}: {len(rows)} jobs from {counts['pods']} pods" + (f"; {cut}" if cut else "")


def main(ns: argparse.Namespace) -> int:
    try:
        print(export(ns))
    except ExportError as err:
        print(f"error: trace export: {err}", file=sys.stderr)
        return 2
    return 0
