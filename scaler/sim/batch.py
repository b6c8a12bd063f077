"""Many simulations at once: `simulate --sweep` and `scaler tune` run their settings through here.

A `Run` carries everything one simulation needs as text (the trace, the pools file as data, the keyword
arguments of `simulate()`), so a worker needs no shared folder: local processes (`workers`, default the CPU
count) or Ray tasks on an existing Ray cluster (`ray_address`, `pip install 'gpuburst[tune]'`). A simulation is
deterministic for its seed, so both give the same figures. Progress on stderr (done / total, the best so far);
Ctrl-C stops the batch and returns what finished (`Batch.interrupted`), so the caller can write its best.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scaler.core.config.settings import ConfigError
from scaler.sim.simulation import InputError, simulate
from scaler.sim.trace import TraceError

# How long `check_ray` waits for a Ray head to accept a connection before saying it does not answer.
RAY_CONNECT_S = 5.0
RAY_CLIENT_PORT = 10001  # `ray://host` without a port: the Ray client server's default port


class RayError(ValueError):
    """A Ray address that is malformed, does not answer, or that Ray itself refused: one line for the user."""


def check_ray(address: str) -> None:
    """Before any work: 'local' starts Ray here; 'auto' is left to Ray (it reads RAY_ADDRESS). HOST:PORT (the
    head's GCS) and ray://HOST[:PORT] (the Ray client server) must accept a connection and answer as Ray within
    RAY_CONNECT_S seconds each; RayError otherwise (ray.init would retry for tens of seconds or minutes, its core
    printing a line a second)."""
    if address in ("local", "auto"):
        return
    rest = address.removeprefix("ray://").rstrip("/")
    host, colon, port_text = rest.rpartition(":")
    if not colon and rest != address:  # ray://HOST: the client's default port
        host, port_text = rest, str(RAY_CLIENT_PORT)
    if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536 or any(c in host for c in "/@ "):
        raise RayError(f"--ray {address}: expected 'local', 'auto', HOST:PORT (the head's GCS address, e.g. "
                       "10.0.0.5:6379) or ray://HOST[:PORT] (the Ray client, port 10001 by default)")
    silent = f"--ray {address}: no Ray head answers at {host}:{port_text} within {RAY_CONNECT_S:g} s"
    try:
        socket.create_connection((host.strip("[]"), int(port_text)), timeout=RAY_CONNECT_S).close()
    except OSError as err:
        why = "no answer" if isinstance(err, TimeoutError) else (err.strerror or str(err))
        raise RayError(f"{silent} ({why}); is the cluster up (`ray status` on its head)?") from None
    _ask(f"{host}:{port_text}", rest != address, silent)


def _ask(target: str, client: bool, silent: str) -> None:
    """One call through Ray's own generated clients (the GCS's GetClusterId, the client server's ClusterInfo
    PING), so that something that accepts connections but is not a Ray head (another service, a proxy) is told
    apart from one."""
    import grpc  # noqa: PLC0415 - Ray's dependency, with Ray only
    from ray.core.generated import (  # noqa: PLC0415
        gcs_service_pb2,
        gcs_service_pb2_grpc,
        ray_client_pb2,
        ray_client_pb2_grpc,
    )

    not_ray = {grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
               grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}
    # Ray's generated protobuf modules carry no type information
    with grpc.insecure_channel(target) as channel:
        try:
            if client:
                ray_client_pb2_grpc.RayletDriverStub(channel).ClusterInfo(  # type: ignore[no-untyped-call]
                    ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING),  # type: ignore[attr-defined]
                    timeout=RAY_CONNECT_S)
            else:
                gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetClusterId(  # type: ignore[no-untyped-call]
                    gcs_service_pb2.GetClusterIdRequest(), timeout=RAY_CONNECT_S)  # type: ignore[attr-defined]
        except grpc.RpcError as err:
            code = err.code() if isinstance(err, grpc.Call) else grpc.StatusCode.UNKNOWN
            if code not in not_ray:  # the service is there (a head with token auth answers UNAUTHENTICATED)
                return
            why = "no answer" if code == grpc.StatusCode.DEADLINE_EXCEEDED else \
                f"it answers, but not as Ray: {code.name}"
            port = "the Ray client server's port (10001 by default)" if client else \
                "the head's GCS port (6379 by default)"
            raise RayError(f"{silent} ({why}); the address is {port}") from None


# The report's figures a batch keeps per run (the whole report is large: samples, never-started lists).
FIGURES = ("jobs_total", "jobs_completed", "paid_gpu_hours", "demand_gpu_hours", "paid_over_demand", "cost_usd",
           "pending_p50_s", "pending_p95_s", "pending_max_s", "pending_1gpu_p95_s", "spot_share", "wall_s")


@dataclass(frozen=True)
class Run:
    """One simulation: `label` names it in tables; `pools` is the pools file's data (YAML-able)."""

    label: str
    trace: str  # the trace file's text
    pools: dict[str, Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    # What an error names instead of the worker's temporary copies: the user's trace and pools files.
    sources: tuple[str, str] = ("the trace", "the pools file")


@dataclass
class Batch:
    figures: list[dict[str, Any] | None]  # per run, in the order given; None when it did not finish
    interrupted: bool = False
    cpu_s: float = 0.0  # CPU seconds the finished runs took in their workers


def simulate_run(run: Run) -> dict[str, Any]:
    """Run one simulation in this process (a worker): its figures plus `cpu_s` and, on bad input, `error`."""
    started = time.process_time()
    with tempfile.TemporaryDirectory(prefix="gpuburst-batch-") as folder:
        trace, pools = Path(folder, "trace.csv"), Path(folder, "pools.yaml")
        trace.write_text(run.trace, encoding="utf-8")
        pools.write_text(yaml.safe_dump(run.pools, sort_keys=False), encoding="utf-8")
        try:
            _, report = simulate(str(trace), str(pools), **run.kwargs)
        except (ConfigError, TraceError, InputError) as err:
            said = str(err).replace(str(trace), run.sources[0]).replace(str(pools), run.sources[1])
            return {"error": said, "cpu_s": time.process_time() - started}
    return {**{k: report[k] for k in FIGURES}, "cpu_s": round(time.process_time() - started, 2)}


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle


def _local(runs: Sequence[Run], workers: int) -> Iterator[tuple[int, dict[str, Any]]]:
    if workers == 1:
        for i, run in enumerate(runs):
            yield i, simulate_run(run)
        return
    # spawn: a clean interpreter per worker (no copy of the parent's threads or state)
    pool = multiprocessing.get_context("spawn").Pool(min(workers, len(runs)), initializer=_ignore_sigint)
    try:
        yield from pool.imap_unordered(_indexed, list(enumerate(runs)))
        pool.close()
    finally:
        pool.terminate()
        pool.join()


def _indexed(item: tuple[int, Run]) -> tuple[int, dict[str, Any]]:
    return item[0], simulate_run(item[1])


def _ray(runs: Sequence[Run], address: str) -> Iterator[tuple[int, dict[str, Any]]]:
    import ray  # noqa: PLC0415 - an optional extra: pip install 'gpuburst[tune]'

    if not ray.is_initialized():
        try:
            ray.init(address=None if address == "local" else address, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as err:  # Ray's own refusal, its first line
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise RayError(f"--ray {address}: Ray could not connect: {first}") from None
    task = ray.remote(num_cpus=1)(simulate_run)
    index = {task.remote(run): i for i, run in enumerate(runs)}
    left = list(index)
    try:
        while left:
            done, left = ray.wait(left, num_returns=1)
            yield index[done[0]], ray.get(done[0])
    finally:
        for ref in left:
            ray.cancel(ref, force=True)


def run_batch(runs: Sequence[Run], *, workers: int | None = None, ray_address: str | None = None,
              best: Callable[[list[dict[str, Any] | None]], str] | None = None, quiet: bool = False,
              what: str = "simulations") -> Batch:
    """Run every simulation; figures in the order of `runs`. `best(figures so far)` words the progress line's
    best. Ctrl-C: the finished ones, `interrupted` set."""
    batch = Batch([None] * len(runs))
    source = _ray(runs, ray_address) if ray_address else _local(runs, workers or os.cpu_count() or 1)
    done = 0
    try:
        for i, figures in source:
            batch.figures[i] = figures
            batch.cpu_s += figures["cpu_s"]
            done += 1
            line = f"{what}: {done}/{len(runs)} done"
            if best is not None:
                line += f"; best so far: {best(batch.figures)}"
            if not quiet:
                print(line, file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        batch.interrupted = True
        if not quiet:
            print(f"{what}: interrupted after {done}/{len(runs)}", file=sys.stderr, flush=True)
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()
    return batch
