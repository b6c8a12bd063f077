"""An ApiClient for the official `kubernetes` client: in-cluster config, or a kubeconfig."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as TransportError

from scaler.core.config.runtime import Runtime
from scaler.ports import KubeError

# (connect, read) seconds for every call when the caller sets none (`scaler run` sets the config's runtime ones).
TIMEOUT = Runtime().kube_timeout()
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


def read_or_none(read: Callable[..., Any], api: client.ApiClient, what: str, namespace: str,
                 name: str, timeout: tuple[float, float] = TIMEOUT) -> dict[str, Any] | None:
    """One namespaced object as the API's JSON (camelCase), None when it does not exist; any other failure a
    KubeError naming it (`what namespace/name`)."""
    try:
        found = read(name, namespace, _request_timeout=timeout)
    except ApiException as err:
        if err.status == 404:
            return None
        raise KubeError(f"get {what} {namespace}/{name}: {err.status} {err.reason}") from err
    except TransportError as err:
        raise KubeError(f"get {what} {namespace}/{name}: {err}") from err
    raw = api.sanitize_for_serialization(found)  # type: ignore[no-untyped-call]
    return raw if isinstance(raw, dict) else None
