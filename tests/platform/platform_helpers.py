"""Helpers for the platform tests: Pulumi mocks that record every resource, the example pools.

A module with its own name (not conftest) so that tests can import it whatever else pytest collects.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# pulumi/ has no __init__.py (it would shadow the SDK): its packages are imported from the folder.
for extra in (ROOT / "pulumi", ROOT / "pulumi" / "policy"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import pulumi  # noqa: E402
from scaler.configfile import load_config  # noqa: E402
from scaler.core.config.settings import ScalerConfig  # noqa: E402

AZURE_POOLS = ROOT / "tests" / "platform" / "pools-azure.yaml"
AWS_POOLS = ROOT / "examples" / "pools-aws.yaml"
# DRA pools beside device-plugin ones (`gpu_allocation: dra`): the DRA driver's release appears.
AWS_DRA_POOLS = ROOT / "tests" / "platform" / "pools-aws-dra.yaml"
AZURE_DRA_POOLS = ROOT / "tests" / "platform" / "pools-azure-dra.yaml"
IRSA_ARN = "arn:aws:iam::123456789012:role/gpuburst-dev-scaler"
CLIENT_ID = "00000000-1111-2222-3333-444444444444"


@dataclass
class Declared:
    """One resource the program declared: its type token, Pulumi name and inputs (wire form)."""

    typ: str
    name: str
    inputs: dict[str, Any]

    @property
    def kind(self) -> str:
        return self.typ.rsplit(":", 1)[-1]

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self.inputs.get("metadata") or {})


@dataclass
class Recorder(pulumi.runtime.Mocks):
    resources: list[Declared] = field(default_factory=list)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append(Declared(args.typ, args.name, dict(args.inputs)))
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}

    def of(self, typ_suffix: str) -> list[Declared]:
        return [r for r in self.resources if r.typ.endswith(typ_suffix)]

    def one(self, typ_suffix: str, name: str | None = None) -> Declared:
        found = [r for r in self.of(typ_suffix) if name is None or r.metadata.get("name") == name]
        assert len(found) == 1, f"expected one {typ_suffix} {name or ''}, got {[r.name for r in found]}"
        return found[0]


def scaler_config(cloud: str) -> ScalerConfig:
    return load_config(AWS_POOLS if cloud == "aws" else AZURE_POOLS)


def run_program(program: Callable[[], Any]) -> Recorder:
    """Run `program` under mocks and wait until every resource is registered."""
    recorder = Recorder()
    pulumi.runtime.set_mocks(recorder, project="gpuburst", stack="test", preview=False)

    @pulumi.runtime.test
    def _run() -> Any:
        result = program()
        return pulumi.Output.from_input(result.urn if hasattr(result, "urn") else None)

    _run()
    return recorder


# What the Pulumi program hands the platform from the stack's outputs (gpuburst_infra/program.py).
STACK_ENV = {
    "aws": {"GPUBURST_INTERRUPTION_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/gpuburst-dev"},
    "azure": {"AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000",
              "GPUBURST_AZURE_RESOURCE_GROUP": "gpuburst-azdev-rg", "GPUBURST_AKS_CLUSTER": "gpuburst-azdev"},
}


def platform_program(cloud: str, metrics: str = "prometheus-adapter", *, alerts_url: str | None = None,
                     scaler_env: dict[str, str] | None = None, pools: Path | None = None,
                     **settings: Any) -> Recorder:
    import pulumi_kubernetes as k8s
    from gpuburst_infra.stack_models import DEFAULT_KUBERNETES
    from gpuburst_platform import Platform, PlatformSettings

    config = load_config(pools) if pools is not None else scaler_config(cloud)
    identity = IRSA_ARN if cloud == "aws" else CLIENT_ID

    def program() -> Any:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1\nkind: Config\n")
        return Platform(
            "platform", provider=provider, config=config, cloud=config.cloud, identity=identity,
            kubernetes_version=DEFAULT_KUBERNETES, settings=PlatformSettings(metrics=metrics, **settings),
            alerts_url=alerts_url, scaler_env=STACK_ENV[cloud] if scaler_env is None else scaler_env,
        )

    return run_program(program)

