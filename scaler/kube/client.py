"""An ApiClient for the official `kubernetes` client: in-cluster config, or a kubeconfig."""

from __future__ import annotations

import os

from kubernetes import client, config

# (connect, read) seconds for every call: a hung API server must not hold a pass past the lease.
TIMEOUT = (5.0, 20.0)
# The client's default PATCH type is JSON Patch (a list of operations), which the API server refuses
# for an object body: every patch here is a JSON merge patch (lists such as spec.taints replaced).
MERGE_PATCH = "application/merge-patch+json"


def api_client(kubeconfig: str | None = None, context: str | None = None) -> client.ApiClient:
    """In the cluster (service account token, CA) unless a kubeconfig is given or no cluster is around."""
    cfg = client.Configuration()
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, context=context, client_configuration=cfg)
    # Fail fast on a dead API server: the loop has its own backoff, and the cache its own reconnects.
    cfg.retries = 1
    return client.ApiClient(cfg)
