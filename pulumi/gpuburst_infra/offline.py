"""Run the Pulumi program offline against a stack file, with `pulumi.runtime.set_mocks`.

No Pulumi CLI, no plugins, no cloud: the stack file's config is handed to the runtime the way the CLI
hands it (structured values as JSON, `secure:` values as secrets), the program runs, and every resource
registration is recorded with the inputs and resource options the engine would receive, and the
program's warnings (printed to stderr, as `pulumi preview` shows them). The tests use it, and so can a
pull request without cloud credentials:

    PYTHONPATH=pulumi .venv/bin/python -m gpuburst_infra.offline Pulumi.aws-dev.yaml
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pulumi.runtime.mocks import MockMonitor

import pulumi
from gpuburst_infra.program import build, load
from gpuburst_infra.stack import StackConfigError
from scaler.configfile import read_text
from scaler.core.config.settings import ConfigError

PROJECT = "gpuburst"
ACCOUNT = "123456789012"
SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
TENANT = "11111111-1111-1111-1111-111111111111"
# The input that names the cloud object, per provider convention (azure-native has one per type).
_NAME_INPUTS = ("agentPoolName", "federatedIdentityCredentialResourceName", "subnetName", "virtualNetworkName",
                "roleDefinitionId", "resourceName", "name", "resourceGroupName")
_ARM_TYPES = {
    ("containerservice", "ManagedCluster"): "Microsoft.ContainerService/managedClusters",
    ("managedidentity", "UserAssignedIdentity"): "Microsoft.ManagedIdentity/userAssignedIdentities",
    ("network", "VirtualNetwork"): "Microsoft.Network/virtualNetworks",
}


def stack_file_config(path: str | Path) -> tuple[dict[str, str], list[str]]:
    """A stack file's `config:` as the CLI passes it: every value a string, objects as JSON.
    A file the CLI could not read either raises StackConfigError naming the file (and line)."""
    path = Path(path)
    try:
        data = yaml.safe_load(read_text(path)) or {}
    except ConfigError as err:
        raise StackConfigError(str(err)) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise StackConfigError(f"{path.name}{where}: not valid YAML: {getattr(err, 'problem', err)}") from None
    if not isinstance(data, dict) or not isinstance(data.get("config") or {}, dict):
        raise StackConfigError(f"{path.name}: config: expected a mapping of keys to values")
    config: dict[str, str] = {}
    secrets: list[str] = []
    for name, value in (data.get("config") or {}).items():
        key = str(name) if ":" in str(name) else f"{PROJECT}:{name}"  # the CLI's default namespace: the project
        if isinstance(value, dict) and set(value) == {"secure"}:
            secrets.append(key)
            config[key] = f"offline-secret-{key}"  # the ciphertext cannot be read offline
        elif isinstance(value, str):
            config[key] = value
        else:
            config[key] = json.dumps(value)
    return config, secrets


@dataclass
class Registration:
    type: str
    name: str
    inputs: dict[str, Any]
    custom: bool
    id: str = ""
    ignore_changes: list[str] = field(default_factory=list)
    protect: bool = False


@dataclass
class Render:
    resources: list[Registration]
    outputs: dict[str, Any]
    secret_outputs: set[str]
    calls: list[tuple[str, dict[str, Any]]]
    warnings: list[str] = field(default_factory=list)  # what `pulumi preview` shows as warning diagnostics

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name: str) -> Registration:
        found = [r for r in self.resources if r.type == type_ and r.name == name]
        if len(found) != 1:
            raise KeyError(f"{len(found)} resources {type_} named {name!r}")
        return found[0]

    def snapshot(self) -> str:
        """A stable YAML of every resource (type, name, inputs, ignored properties) and the outputs."""
        doc = {
            "resources": [
                {"type": r.type, "name": r.name, "inputs": _readable(r.inputs),
                 **({"ignore_changes": r.ignore_changes} if r.ignore_changes else {})}
                for r in sorted(self.resources, key=lambda r: (r.type, r.name)) if r.custom
            ],
            "outputs": {k: "[secret]" if k in self.secret_outputs else _document(v)
                        for k, v in sorted(self.outputs.items())},
        }
        return yaml.dump(doc, Dumper=_SnapshotDumper, sort_keys=True, width=120)


def _document(value: Any) -> Any:
    """A multi-line YAML string output (the scaler's configuration) shown as the document it holds."""
    return yaml.safe_load(value) if isinstance(value, str) and "\n" in value else value


class _SnapshotDumper(yaml.SafeDumper):
    """Multi-line strings (user data, NodeConfig) as literal blocks, so a diff reads line by line."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and not any(line != line.rstrip() for line in value.splitlines()) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_SnapshotDumper.add_representer(str, _str)


def _readable(value: Any) -> Any:
    """Decode base64 user data and JSON policies; print whole numbers as integers (the wire has floats)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value[:1] == "{":
        try:
            return _readable(json.loads(value))
        except json.JSONDecodeError:
            return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out[k] = _readable(_decoded(v) if k == "userData" else v)
        return out
    if isinstance(value, list):
        return [_readable(v) for v in value]
    return value


def _decoded(value: Any) -> Any:
    try:
        return base64.b64decode(value, validate=True).decode()
    except (TypeError, binascii.Error, UnicodeDecodeError):
        return value


def _digest(text: str, n: int = 17) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


AKS_AAD_SERVER = "6dae42f8-4368-4678-94ff-3960e28e3630"  # the AKS Entra ID server application (public)
AKS_AAD_CLIENT = "80faf920-1908-4b52-b5ef-a8e7bedfc67a"  # the AKS Entra ID client app (kubelogin default)


class CloudMocks(pulumi.runtime.Mocks):
    """What the providers would answer, deterministically: ids, ARNs and the few computed outputs read."""

    def __init__(self, region: str) -> None:
        self.region = region
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.registered: list[tuple[str, str, dict[str, Any], bool, str]] = []

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:  # type: ignore[override]
        self.calls.append((args.token, dict(args.args)))
        if args.token == "aws:ssm/getParameter:getParameter":  # noqa: S105  (an invoke token, not a password)
            name = args.args["name"]
            return {"id": name, "name": name, "type": "String", "value": f"ami-{_digest(name)}",
                    "arn": f"arn:aws:ssm:{self.region}::parameter{name}", "version": 1}
        if args.token == "azure-native:authorization:getClientConfig":  # noqa: S105
            return {"subscriptionId": SUBSCRIPTION, "tenantId": TENANT, "clientId": TENANT, "objectId": TENANT}
        if args.token == "azure-native:containerservice:listManagedClusterUserCredentials":  # noqa: S105
            cluster = args.args["resourceName"]
            doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "current-context": cluster,
                                   "clusters": [{"name": cluster, "cluster": {
                                       "server": f"https://{cluster}.hcp.{self.region}.azmk8s.io:443"}}]}
            if args.args.get("format") == "exec":  # what AKS returns for Entra ID: kubelogin, device code
                doc["users"] = [{"name": f"clusterUser_{cluster}", "user": {"exec": {
                    "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "kubelogin",
                    "args": ["get-token", "--environment", "AzurePublicCloud", "--server-id", AKS_AAD_SERVER,
                             "--client-id", AKS_AAD_CLIENT, "--tenant-id", TENANT, "--login", "devicecode"],
                    "interactiveMode": "IfAvailable"}}}]
            kubeconfig = yaml.safe_dump(doc)
            return {"kubeconfigs": [{"name": "clusterUser", "value": base64.b64encode(kubeconfig.encode()).decode()}]}
        raise NotImplementedError(f"offline render: no mock for the invoke {args.token}")

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        state = dict(args.inputs)
        pkg, module, kind = args.typ.split(":")
        names = ("name",) if pkg == "aws" or kind == "RoleAssignment" else _NAME_INPUTS
        name = next((state[k] for k in names if isinstance(state.get(k), str)), args.name)
        if pkg == "aws":
            service = module.split("/")[0]
            region = "" if service == "iam" else self.region
            state.setdefault("arn", f"arn:aws:{service}:{region}:{ACCOUNT}:{kind[0].lower()}{kind[1:]}/{name}")
            rid = name if kind in {"Role", "Group", "Queue", "Cluster"} else f"{kind.lower()}-{_digest(args.name, 12)}"
        else:
            rid = _azure_id(module, kind, name, state)
            state["name"] = name
        state.update(_computed(args.typ, name, self.region, state))
        self.registered.append((args.typ, args.name, dict(args.inputs), bool(args.custom), rid))
        return rid, state


def _azure_id(module: str, kind: str, name: str, state: dict[str, Any]) -> str:
    rg = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{state.get('resourceGroupName', '')}"
    if kind == "ResourceGroup":
        return rg
    if kind == "AgentPool":
        return f"{rg}/providers/Microsoft.ContainerService/managedClusters/{state['resourceName']}/agentPools/{name}"
    if kind == "Subnet":
        return f"{rg}/providers/Microsoft.Network/virtualNetworks/{state['virtualNetworkName']}/subnets/{name}"
    if kind == "FederatedIdentityCredential":
        return (f"{rg}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{state['resourceName']}"
                f"/federatedIdentityCredentials/{name}")
    if kind == "RoleDefinition":
        return f"{state['scope']}/providers/Microsoft.Authorization/roleDefinitions/{name}"
    if kind == "RoleAssignment":
        return f"{state['scope']}/providers/Microsoft.Authorization/roleAssignments/{_digest(str(state), 32)}"
    return f"{rg}/providers/{_ARM_TYPES.get((module, kind), module + '/' + kind)}/{name}"


def _computed(typ: str, name: str, region: str, state: dict[str, Any]) -> dict[str, Any]:
    if typ == "aws:eks/cluster:Cluster":
        issuer = f"https://oidc.eks.{region}.amazonaws.com/id/{_digest(name, 32).upper()}"
        return {
            "endpoint": f"https://{_digest(name, 32).upper()}.gr7.{region}.eks.amazonaws.com",
            "certificateAuthority": {"data": base64.b64encode(b"offline CA of " + name.encode()).decode()},
            "identities": [{"oidcs": [{"issuer": issuer}]}],
            "vpcConfig": {**state.get("vpcConfig", {}), "clusterSecurityGroupId": f"sg-{_digest(name)}"},
            "kubernetesNetworkConfig": {"serviceIpv4Cidr": "172.20.0.0/16", "ipFamily": "ipv4"},
        }
    if typ == "azure-native:containerservice:ManagedCluster":
        return {"oidcIssuerProfile": {"enabled": True, "issuerURL":
                                      f"https://{region}.oic.prod-aks.azure.com/{TENANT}/{_digest(name, 32)}/"},
                "fqdn": f"{name}.hcp.{region}.azmk8s.io",
                # the input is a list of identity ids, the output a map id -> details
                "identity": {**state["identity"], "userAssignedIdentities": {
                    i: {} for i in state["identity"].get("userAssignedIdentities", [])}}}
    if typ == "azure-native:managedidentity:UserAssignedIdentity":
        return {"clientId": str(uuid.uuid5(uuid.NAMESPACE_URL, "client/" + name)),
                "principalId": str(uuid.uuid5(uuid.NAMESPACE_URL, "principal/" + name))}
    if typ == "aws:sqs/queue:Queue":
        return {"url": f"https://sqs.{region}.amazonaws.com/{ACCOUNT}/{name}"}
    if typ == "aws:ec2/launchTemplate:LaunchTemplate":
        return {"latestVersion": 1}
    if typ == "aws:iam/openIdConnectProvider:OpenIdConnectProvider":
        return {"arn": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{str(state['url']).removeprefix('https://')}"}
    return {}


class _Diagnostics(logging.Handler):
    """The program's `pulumi.log.warn` lines: the mocked engine hands them to a logger."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno == logging.WARNING:
            self.lines.append(record.getMessage())


class RecordingMonitor(MockMonitor):
    """The mock monitor, also recording the resource options the engine receives (ignoreChanges, protect)."""

    def __init__(self, mocks: CloudMocks) -> None:
        super().__init__(mocks)
        self.options: dict[tuple[str, str], tuple[list[str], bool]] = {}
        self.dependencies: dict[tuple[str, str], list[str]] = {}

    def RegisterResource(self, request: Any) -> Any:
        self.options[(request.type, request.name)] = (list(request.ignoreChanges), bool(request.protect))
        self.dependencies[(request.type, request.name)] = sorted(request.dependencies)
        return super().RegisterResource(request)


def render(path: str | Path) -> Render:
    """Run the program against a stack file with mocks; raise StackConfigError on a bad config."""
    path = Path(path)
    stack_name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    config, secrets = stack_file_config(path)
    region = config.get("aws:region") or config.get("azure-native:location") or ""
    mocks = CloudMocks(region)
    monitor = RecordingMonitor(mocks)
    diagnostics = _Diagnostics()
    engine_log = logging.Logger(f"{__name__}.engine")
    engine_log.addHandler(diagnostics)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack_name, preview=False, monitor=monitor,
                             logger=engine_log)
    pulumi.runtime.set_all_config(config, secrets)
    # Validate first, outside the runtime's event loop, so a bad config raises its own error; the
    # platform section too, as `pulumi up` does before declaring anything (and its warnings).
    stack, _settings = load(path.name)
    result: dict[str, Any] = {}
    secret_outputs: set[str] = set()

    @pulumi.runtime.test
    def run() -> Any:
        outputs = build(stack)

        async def collect() -> None:
            for k, v in outputs.items():
                out = pulumi.Output.from_input(v)
                result[k] = await out.future()
                if await out.is_secret():
                    secret_outputs.add(k)

        return collect()

    run()
    resources = []
    for typ, name, inputs, custom, rid in mocks.registered:
        if typ.startswith("pulumi:"):
            continue
        ignore, protect = monitor.options.get((typ, name), ([], False))
        resources.append(Registration(type=typ, name=name, inputs=inputs, custom=custom, id=rid,
                                      ignore_changes=ignore, protect=protect))
    return Render(resources=resources, outputs=result, secret_outputs=secret_outputs, calls=mocks.calls,
                  warnings=diagnostics.lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    usage = "usage: PYTHONPATH=pulumi .venv/bin/python -m gpuburst_infra.offline Pulumi.<stack>.yaml"
    if args and args[0] in ("-h", "--help"):
        _write(f"{usage}\n\n{__doc__.strip()}\n")
        return 0
    if len(args) != 1:
        print(usage, file=sys.stderr)
        return 2
    try:
        rendered = render(args[0])
    except StackConfigError as err:
        # What `pulumi preview` prints for the same file (the program raises it as a RunError).
        print(f"error: {err}", file=sys.stderr)
        return 2
    for warning in rendered.warnings:  # the stack deploys, but `pulumi preview` would show these too
        print(f"warning: {warning}", file=sys.stderr)
    _write(rendered.snapshot())
    return 0


def _write(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: the reader has what it wanted; nothing left to flush at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    raise SystemExit(main())
