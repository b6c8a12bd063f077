"""The platform and the policy pack on the repository's own stacks (Pulumi.<env>.yaml at the root).

The cloud side is rendered offline by the Pulumi program's own renderer (gpuburst_infra.offline,
mocks only); the platform component is then fed the very ScalerConfig that made the cloud pools.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gpuburst_policies as gp
import pytest
import yaml
from charts_helpers import scaler_objects
from platform_helpers import ROOT, STACK_ENV, run_program

from scaler.core.config.settings import parse_config

STACKS = sorted(ROOT.glob("Pulumi.*.yaml"))


def _load(path: Path) -> Any:
    from gpuburst_infra.offline import stack_file_config
    from gpuburst_infra.program import read_pulumi_config
    from gpuburst_infra.stack import load_stack

    import pulumi

    config, secrets = stack_file_config(path)
    pulumi.runtime.set_all_config(config, secrets)
    try:
        return load_stack(read_pulumi_config(), path.name)
    finally:
        pulumi.runtime.set_all_config({}, [])


@pytest.mark.parametrize("path", STACKS, ids=[p.name for p in STACKS])
def test_policy_pack_passes_on_the_stacks_cloud_resources(path: Path) -> None:
    from gpuburst_infra.offline import render

    rendered = render(path)
    resources = [(r.type, r.name, r.inputs, r.ignore_changes) for r in rendered.resources]
    assert gp.check_all(resources) == []
    gpu_groups = [r for r in resources if r[0] == gp.ASG and gp.is_gpu_asg(r[2])] + \
        [r for r in resources if r[0] == gp.AGENT_POOL and gp.is_gpu_agent_pool(r[2])]
    assert gpu_groups, f"{path.name}: the GPU rules checked no GPU group"


@pytest.mark.parametrize("path", STACKS, ids=[p.name for p in STACKS])
def test_platform_on_the_stack_carries_the_pools_that_made_the_cloud_groups(path: Path) -> None:
    import pulumi_kubernetes as k8s
    from gpuburst_infra.program import render_scaler_config
    from gpuburst_platform import Platform, PlatformSettings

    stack = _load(path)
    identity = "arn:aws:iam::123456789012:role/scaler" if stack.cloud == "aws" else "client-id"

    def program() -> Any:
        return Platform("platform", provider=k8s.Provider("k8s", kubeconfig="{}"), config=stack.scaler,
                        cloud=stack.cloud, identity=identity, kubernetes_version=stack.settings.kubernetes_version,
                        settings=PlatformSettings(), namespace=stack.settings.scaler.namespace,
                        service_account=stack.settings.scaler.service_account, scaler_env=STACK_ENV[stack.cloud])

    res = run_program(program)
    objs = scaler_objects(res)
    ours = yaml.safe_load(objs.one("ConfigMap", "gpuburst-scaler-config").body["data"]["config.yaml"])
    theirs = yaml.safe_load(render_scaler_config(stack))  # the stack's scalerConfig output
    assert ours == theirs
    assert parse_config(ours, path.name) == stack.scaler
    sa = objs.one("ServiceAccount", stack.settings.scaler.service_account)
    assert sa.namespace == stack.settings.scaler.namespace  # what the IRSA / federated trust names
    assert gp.check_all([(r.typ, r.name, r.inputs, ()) for r in res.resources]) == []
