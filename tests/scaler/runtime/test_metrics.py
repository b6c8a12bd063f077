"""/metrics, /healthz and /readyz as Prometheus and the kubelet's probes see them; JSON log lines."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request

from scaler.metrics import Health, JsonFormatter, Metrics, serve


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_endpoints() -> None:
    now = [1000.0]
    metrics = Metrics()
    health = Health(interval=10, clock=lambda: now[0])
    server = serve(metrics, health, 0, host="127.0.0.1")
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert get(f"{base}/healthz")[0] == 200
        assert get(f"{base}/readyz")[0] == 503  # no successful pass yet
        metrics.scale_ups.labels("gpu-spot-a").inc(3)
        metrics.cloud_errors.labels("throttled").inc()
        Metrics.replace(metrics.nodes, {("gpu-spot-a", "ready"): 3, ("gpu-od", "requested"): 1})
        Metrics.replace(metrics.unavailable, {("gpu-spot-a", "us-east-1a"): 1})
        metrics.pass_duration.observe(0.2)
        health.succeeded(synced=True)
        assert get(f"{base}/readyz")[0] == 200
        status, text = get(f"{base}/metrics")
        assert status == 200
        for line in ('gpuburst_scale_up_nodes_total{pool="gpu-spot-a"} 3.0',
                     'gpuburst_cloud_errors_total{kind="throttled"} 1.0',
                     'gpuburst_nodes{pool="gpu-od",state="requested"} 1.0',
                     'gpuburst_unavailable_offerings{pool="gpu-spot-a",zone="us-east-1a"} 1.0',
                     "gpuburst_pass_duration_seconds_count 1.0"):
            assert line in text
        Metrics.replace(metrics.nodes, {("gpu-od", "ready"): 1})
        assert 'state="requested"' not in get(f"{base}/metrics")[1]  # gone series are dropped
        now[0] += 120  # the loop is stuck: not alive, not ready
        assert get(f"{base}/healthz")[0] == 503 and get(f"{base}/readyz")[0] == 503
        health.succeeded(synced=False)
        assert get(f"{base}/readyz")[0] == 503  # passes run but on stale data
    finally:
        server.shutdown()


def test_json_log_lines() -> None:
    record = logging.LogRecord("scaler.loop", logging.WARNING, __file__, 1, "pass failed (%s)", ("throttled",), None)
    record.error_kind = "throttled"
    out = json.loads(JsonFormatter().format(record))
    assert out["message"] == "pass failed (throttled)" and out["level"] == "warning"
    assert out["error_kind"] == "throttled" and out["time"].endswith("Z")


def test_a_long_backoff_is_not_a_hang() -> None:
    # After cloud errors the loop sleeps out a backoff longer than the liveness window: the kubelet
    # must not restart it (a restart forgets the backoff and the unavailable offerings).
    now = [0.0]
    health = Health(interval=10, clock=lambda: now[0])
    health.attempted()
    health.waiting(450)
    now[0] = 400.0
    assert health.alive()
    now[0] = 450 + 61.0  # the pass it planned never started: hung
    assert not health.alive()
    health.attempted()
    assert health.alive()
