"""gpuburst's mandatory rules, as plain functions over a resource's type and inputs.

Each rule is `rule(args, report_violation)` with pulumi-policy's `ResourceValidationArgs`, so the
pack (`__main__.py`) uses them as they are and unit tests call them with passing and failing inputs.
Keys are read from `scaler.core.model.keys` (this repository's package; only its standard-library part is
imported, so the pack's virtualenv needs no more than pulumi-policy).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

try:
    from scaler.core.model import keys
except ImportError:  # the pack runs from its own folder: the repository root holds the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from scaler.core.model import keys

ReportViolation = Callable[[str, str | None], None]
Rule = Callable[[ResourceValidationArgs, ReportViolation], None]

ASG = "aws:autoscaling/group:Group"
AGENT_POOL = "azure-native:containerservice:AgentPool"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
APISERVICE_TYPES = ("kubernetes:apiregistration.k8s.io/v1:APIService",
                    "kubernetes:apiregistration.k8s.io/v1beta1:APIService")
SECRET_TYPE = "kubernetes:core/v1:Secret"  # noqa: S105 - a type token, not a password
# Where a pod template sits in each workload kind.
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "kubernetes:core/v1:Pod": ("spec",),
    "kubernetes:apps/v1:Deployment": ("spec", "template", "spec"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template", "spec"),
    "kubernetes:batch/v1:Job": ("spec", "template", "spec"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}

# Long-lived secrets of the clouds' SDKs: the scaler and everything else use IRSA / workload identity.
STATIC_CREDENTIAL_ENV = frozenset({
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_CLIENT_CERTIFICATE_PASSWORD",
    "AZURE_PASSWORD", "AZURE_USERNAME", "ARM_CLIENT_SECRET", "ARM_ACCESS_KEY",
})
GPU_TAINT = f"{keys.TAINT_GPU}={keys.TAINT_GPU_VALUE}:NoSchedule"


def _get(obj: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


# --- cloud groups ---------------------------------------------------------------------------------
def _asg_tags(props: Mapping[str, Any]) -> dict[str, str]:
    return {str(t.get("key")): str(t.get("value")) for t in props.get("tags") or () if isinstance(t, Mapping)}


def _azure_form(aws_key: str) -> str:
    return keys.azure_tag_key(aws_key)


def is_gpu_asg(props: Mapping[str, Any]) -> bool:
    tags = _asg_tags(props)
    return tags.get(keys.TAG_ROLE) == "gpu" or (keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_GPU) in tags


def is_gpu_agent_pool(props: Mapping[str, Any]) -> bool:
    labels = props.get("nodeLabels") or {}
    tags = props.get("tags") or {}
    return (labels.get(keys.LABEL_ROLE) == "gpu" or labels.get(keys.LABEL_GPU_PRESENT) == "true"
            or tags.get(_azure_form(keys.TAG_ROLE)) == "gpu")


def _owned_by_a_cluster(tags: Mapping[str, str], prefix: str, enabled: str, template: str) -> bool:
    return any(k.startswith(prefix) and k != enabled and not k.startswith(template) and v == "owned"
               for k, v in tags.items())


def _ignored(args: ResourceValidationArgs, prop: str) -> bool:
    opts = args.opts
    return opts is not None and prop in (opts.ignore_changes or ())


def gpu_groups_scale_from_zero(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """GPU Auto Scaling groups have min 0, GPU agent pools minCount 0 and AKS's autoscaler off, and the
    size belongs to the scaler: it is in ignoreChanges (or every `pulumi up` would set it back and
    terminate the scaler's nodes) and created at 0. With ignoreChanges the engine passes the size the
    state holds, which after a refresh is the live one: any value is fine then."""
    props = args.props
    if args.resource_type == ASG and is_gpu_asg(props):
        if props.get("minSize") not in (0, None):
            report_violation(f"{args.name}: GPU group has minSize {props.get('minSize')}; it must scale from 0", None)
        desired = props.get("desiredCapacity")
        if desired is not None and not _ignored(args, "desiredCapacity"):
            report_violation(f"{args.name}: GPU group declares desiredCapacity {desired} without ignoreChanges; "
                             "create it at 0 and ignore changes (the scaler owns it)", None)
    elif args.resource_type == AGENT_POOL and is_gpu_agent_pool(props):
        if not _ignored(args, "count"):
            report_violation(f"{args.name}: GPU agent pool's count {props.get('count')} is not in ignoreChanges; "
                             "create it at 0 and ignore changes (the scaler owns it)", None)
        elif props.get("count") is None:
            report_violation(f"{args.name}: GPU agent pool has no count; create it at 0", None)
        if props.get("enableAutoScaling"):
            report_violation(f"{args.name}: GPU agent pool has AKS's autoscaler on; the scaler owns the count", None)
        if props.get("minCount") not in (0, None):
            report_violation(f"{args.name}: GPU agent pool has minCount {props.get('minCount')}; it must be 0", None)


def gpu_groups_carry_autoscaler_tags_and_taints(args: ResourceValidationArgs,
                                                report_violation: ReportViolation) -> None:
    """cluster-autoscaler's discovery and node-template tags, and the GPU taint, on every GPU group."""
    props = args.props
    if args.resource_type == ASG and is_gpu_asg(props):
        tags = _asg_tags(props)
        enabled, template = keys.TAG_CA_ENABLED, keys.TAG_CA_PREFIX + "node-template/"
        missing = []
        if tags.get(enabled) != "true":
            missing.append(f"{enabled}=true")
        if not _owned_by_a_cluster(tags, keys.TAG_CA_PREFIX, enabled, template):
            missing.append(f"{keys.TAG_CA_PREFIX}<cluster>=owned")
        if (keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_GPU) not in tags:
            missing.append(keys.TAG_CA_TEMPLATE_RESOURCES + keys.RES_GPU)
        if tags.get(keys.TAG_CA_TEMPLATE_TAINT + keys.TAINT_GPU) != f"{keys.TAINT_GPU_VALUE}:NoSchedule":
            missing.append(f"{keys.TAG_CA_TEMPLATE_TAINT}{keys.TAINT_GPU}={keys.TAINT_GPU_VALUE}:NoSchedule")
        if missing:
            report_violation(f"{args.name}: GPU group lacks the autoscaler tags {missing}", None)
    elif args.resource_type == AGENT_POOL and is_gpu_agent_pool(props):
        if GPU_TAINT not in (props.get("nodeTaints") or ()):
            report_violation(f"{args.name}: GPU agent pool lacks the node taint {GPU_TAINT}", None)
        tags = {str(k): str(v) for k, v in (props.get("tags") or {}).items()}
        enabled = _azure_form(keys.TAG_CA_ENABLED)
        prefix, template = _azure_form(keys.TAG_CA_PREFIX), _azure_form(keys.TAG_CA_PREFIX + "node-template/")
        if tags.get(enabled) != "true" or not _owned_by_a_cluster(tags, prefix, enabled, template):
            report_violation(f"{args.name}: GPU agent pool lacks the autoscaler tags {enabled}=true and "
                             f"{prefix}<cluster>=owned", None)


def aws_groups_protected_from_scale_in(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Only the scaler removes nodes, after draining them: every group is protected from scale-in."""
    if args.resource_type == ASG and args.props.get("protectFromScaleIn") is not True:
        report_violation(f"{args.name}: protectFromScaleIn must be true (only the scaler removes nodes)", None)


# --- workloads ------------------------------------------------------------------------------------
def _pod_spec(resource_type: str, props: Mapping[str, Any]) -> Mapping[str, Any] | None:
    path = POD_SPEC_PATHS.get(resource_type)
    spec = _get(props, *path) if path else None
    return spec if isinstance(spec, Mapping) else None


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(field) or ():
            if isinstance(c, Mapping):
                yield c


def _walk(obj: Any) -> Iterator[tuple[str | None, Any, Mapping[str, Any] | None]]:
    """(key, value, parent mapping) for every entry of nested mappings and lists."""
    stack: list[Any] = [obj]
    while stack:
        cur = stack.pop()
        if isinstance(cur, Mapping):
            for k, v in cur.items():
                yield str(k), v, cur
                stack.append(v)
        elif isinstance(cur, list | tuple):
            stack.extend(cur)


def no_static_cloud_credentials(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """No cloud access keys or client secrets in container env, chart values or Secrets."""
    spec = _pod_spec(args.resource_type, args.props)
    found: set[str] = set()
    if spec is not None:
        for c in _containers(spec):
            found |= {str(e.get("name")) for e in c.get("env") or () if isinstance(e, Mapping)} & STATIC_CREDENTIAL_ENV
    elif args.resource_type == HELM_RELEASE:
        for key, value, parent in _walk(args.props.get("values") or {}):
            if key in STATIC_CREDENTIAL_ENV:
                found.add(key)
            elif key == "name" and value in STATIC_CREDENTIAL_ENV and parent is not None and (
                    "value" in parent or "valueFrom" in parent):
                found.add(value)
    elif args.resource_type == SECRET_TYPE:
        for field in ("data", "stringData"):
            found |= set(args.props.get(field) or {}) & STATIC_CREDENTIAL_ENV
    if found:
        report_violation(f"{args.name}: static cloud credentials {sorted(found)}; use IRSA (AWS) or "
                         "workload identity (Azure)", None)


def containers_run_as_non_root(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Every container must run as non-root: runAsNonRoot true (pod or container) and no runAsUser 0."""
    spec = _pod_spec(args.resource_type, args.props)
    if spec is None:
        return
    pod = spec.get("securityContext") or {}
    for c in _containers(spec):
        ctx = c.get("securityContext") or {}
        non_root = ctx.get("runAsNonRoot", pod.get("runAsNonRoot"))
        uid = ctx.get("runAsUser", pod.get("runAsUser"))
        if non_root is not True or uid == 0:
            report_violation(f"{args.name}: container {c.get('name')!r} may run as root "
                             f"(runAsNonRoot={non_root}, runAsUser={uid})", None)


# --- the custom metrics API -----------------------------------------------------------------------
def apiservice_verifies_tls(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """No APIService skips TLS verification, whether declared directly or rendered by a chart."""
    if args.resource_type in APISERVICE_TYPES:
        if _get(args.props, "spec", "insecureSkipTLSVerify"):
            report_violation(f"{args.name}: APIService sets insecureSkipTLSVerify; trust the CA with caBundle", None)
        return
    if args.resource_type != HELM_RELEASE:
        return
    values = args.props.get("values") or {}
    if any(k == "insecureSkipTLSVerify" and v is True for k, v, _ in _walk(values)):
        report_violation(f"{args.name}: chart values set insecureSkipTLSVerify", None)
    if args.props.get("chart") == "prometheus-adapter":
        rules = values.get("rules") or {}
        # The chart's APIService carries insecureSkipTLSVerify: true unless TLS or cert-manager is on;
        # it renders it whenever rules.default (true by default) or rules.custom is set.
        renders_apiservice = rules.get("default", True) or rules.get("custom")
        verified = _get(values, "tls", "enable") or _get(values, "certManager", "enabled")
        if renders_apiservice and not verified:
            report_violation(f"{args.name}: this prometheus-adapter release renders an APIService with "
                             "insecureSkipTLSVerify: true (set rules.existing, or enable tls)", None)


RULES: dict[str, tuple[str, Rule]] = {
    "gpu-groups-scale-from-zero": ("GPU groups and agent pools start at 0 and the scaler owns their size",
                                   gpu_groups_scale_from_zero),
    "gpu-groups-carry-autoscaler-tags-and-taints": (
        "GPU groups carry cluster-autoscaler's tags and the GPU taint", gpu_groups_carry_autoscaler_tags_and_taints),
    "aws-groups-protected-from-scale-in": (
        "Auto Scaling groups are protected from scale-in", aws_groups_protected_from_scale_in),
    "no-static-cloud-credentials": ("No static cloud credentials anywhere", no_static_cloud_credentials),
    "containers-run-as-non-root": ("Containers run as non-root", containers_run_as_non_root),
    "apiservice-verifies-tls": ("No APIService skips TLS verification", apiservice_verifies_tls),
}


def policies() -> list[ResourceValidationPolicy]:
    return [ResourceValidationPolicy(name=name, description=desc, validate=fn,
                                     enforcement_level=EnforcementLevel.MANDATORY)
            for name, (desc, fn) in RULES.items()]


def check(resource_type: str, name: str, props: Mapping[str, Any], rule: Rule,
          ignore_changes: Iterable[str] = ()) -> list[str]:
    """Run one rule on one resource's inputs (and its ignoreChanges option); the violation messages."""
    out: list[str] = []
    opts = PolicyResourceOptions(protect=False, ignore_changes=list(ignore_changes), delete_before_replace=None,
                                 aliases=[], custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
                                 additional_secret_outputs=[])
    args = ResourceValidationArgs(resource_type=resource_type, props=props, urn=f"urn:pulumi:test::gpuburst::"
                                  f"{resource_type}::{name}", name=name, opts=opts, provider=None)  # type: ignore[arg-type]

    def report(message: str, urn: str | None = None) -> None:
        out.append(message)

    rule(args, report)
    return out


def check_all(resources: Iterable[tuple[str, str, Mapping[str, Any], Iterable[str]]]) -> list[str]:
    """Every rule on every (type, name, inputs, ignoreChanges): what `pulumi preview --policy-pack`
    would refuse."""
    return [f"[{rule_name}] {msg}" for typ, name, props, ignore in resources
            for rule_name, (_, fn) in RULES.items() for msg in check(typ, name, props, fn, ignore)]
