"""Write the chart's generated files from the scaler's own code: `python -m scaler.chart` (`make chart`).

charts/gpuburst-scaler/ repeats two things the scaler defines; both are generated here and committed,
and tests/platform/test_charts.py fails when a committed file differs from what this writes:

- `files/rbac-rules.json`: the ClusterRole's and the Role's rules, `scaler.permissions`'
  KUBERNETES_RBAC_RULES and KUBERNETES_ROLE_RULES; templates/rbac.yaml reads them.
- in `values.schema.json`, `properties.config` and `definitions`: the JSON schema of the scaler's
  config file (`ScalerConfig.model_json_schema()`), so `helm install` refuses what the scaler would
  refuse at start (an unknown key, a value out of range) naming the key, instead of a crash loop. The
  rest of values.schema.json is written by hand.

Two adjustments to pydantic's schema, each the JSON-schema form of code in the model:
- what the models' `mode="before"` validators accept besides their fields (`_before_validators`);
- `provision_timeout`'s lower bound, `meaning_errors`' rule (at least one node boot plus one pass),
  for the boot and scan times at their defaults: JSON schema cannot add two values, so with other
  boot or scan times the scaler checks it at start (`_provision_timeout_bound`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from scaler import permissions

# The one import of the config model: the schema is generated from it.
from scaler.core.config.settings import ScalerConfig, Timings

CHART = Path(__file__).resolve().parents[1] / "charts" / "gpuburst-scaler"
RBAC_FILE = "files/rbac-rules.json"
SCHEMA_FILE = "values.schema.json"
REF = "#/definitions/{model}"
NOT_GPU_ROLES = ["system", "general"]  # a pool's role is gpu unless it says one of these (Pool.role)


def rbac_rules() -> dict[str, Any]:
    return {"clusterRole": permissions.KUBERNETES_RBAC_RULES, "role": permissions.KUBERNETES_ROLE_RULES}


def _strip_titles(schema: Any) -> Any:
    """pydantic titles every field with its own name, capitalised: noise in a values schema."""
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def _before_validators(defs: dict[str, Any]) -> None:
    """What `ScalerConfig._inherit_cloud` and `Pool._aliases` accept besides the fields themselves."""
    pool = defs["Pool"]
    props = pool["properties"]
    # _inherit_cloud: a pool without `cloud` is in the config's cloud.
    # _aliases: `instance_type` / `vm_size` for one instance type, `zone` for one zone, a taint as
    # `key=value:Effect`; populate_by_name: `min_size` / `max_size` beside `min` / `max`.
    for single, many in (("instance_type", "instance_types"), ("vm_size", "instance_types"), ("zone", "zones")):
        props[single] = {"type": "string", "description": f"one value for {many}"}
    props["min_size"], props["max_size"] = props["min"], props["max"]
    taint = {"type": "string", "description": "key=value:Effect"}
    props["taints"]["items"] = {"anyOf": [props["taints"]["items"], taint]}
    pool["required"] = [k for k in pool["required"] if k not in ("cloud", "instance_types", "zones", "max")]
    either = (("instance_types", "instance_type", "vm_size"), ("zones", "zone"), ("max", "max_size"))
    pool["allOf"] = [{"anyOf": [{"required": [k]} for k in names]} for names in either]


def _provision_timeout_bound() -> list[dict[str, Any]]:
    """`meaning_errors`: provision_timeout >= gpu_boot + scan_interval with a GPU pool, cpu_boot + scan_interval
    with another pool; here for gpu_boot, cpu_boot and scan_interval at their defaults."""
    fields = Timings.model_fields
    scan = fields["scan_interval"].default
    is_gpu = {"properties": {"role": {"const": "gpu"}}}  # role defaults to gpu
    not_gpu = {"required": ["role"], "properties": {"role": {"enum": NOT_GPU_ROLES}}}
    out = []
    for boot, pool in (("gpu_boot", is_gpu), ("cpu_boot", not_gpu)):
        default = fields[boot].default
        out.append({
            "if": {"required": ["pools"], "properties": {
                "pools": {"contains": pool},
                "timings": {"properties": {boot: {"const": default}, "scan_interval": {"const": scan}}}}},
            "then": {"properties": {"timings": {"properties": {"provision_timeout": {
                "minimum": default + scan,
                "description": f"at least one node boot ({boot}) plus one pass (scan_interval)"}}}}},
        })
    return out


def config_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """(the schema of `config`, its definitions), for values.schema.json."""
    schema = _strip_titles(ScalerConfig.model_json_schema(ref_template=REF))
    defs = schema.pop("$defs")
    _before_validators(defs)
    schema["allOf"] = _provision_timeout_bound()
    schema["description"] = ("the scaler's config file, generated from scaler.core.config.settings.ScalerConfig by "
                             "`make chart`: the scaler checks it again at start")
    return schema, defs


def generated(chart: Path = CHART) -> dict[str, str]:
    """Each generated file's path under the chart and its text."""
    values_schema = json.loads((chart / SCHEMA_FILE).read_text())
    values_schema["properties"]["config"], values_schema["definitions"] = config_schema()
    return {RBAC_FILE: json.dumps(rbac_rules(), indent=2) + "\n",
            SCHEMA_FILE: json.dumps(values_schema, indent=2) + "\n"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scaler.chart", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a committed file is stale")
    parser.add_argument("--chart", type=Path, default=CHART, help="the chart's folder (default: %(default)s)")
    args = parser.parse_args(argv)
    stale = []
    for name, text in generated(args.chart).items():
        path = args.chart / name
        if path.exists() and path.read_text() == text:
            continue
        stale.append(name)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if args.check and stale:
        print(f"error: {', '.join(stale)} in {args.chart} are stale: run `make chart`", file=sys.stderr)
        return 1
    for name in stale:
        print(f"wrote {args.chart / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
