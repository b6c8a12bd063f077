"""Render Helm charts offline and validate Kubernetes objects, for tests/platform/test_charts.py.

- `official_chart(name, version)`: the folder of an official chart at the version pinned: the repository's
  own copy under tests/platform/charts/ when it is that version (a pin newer than ../shared/charts holds,
  README there), else ../shared/charts'; never a folder of another version.
- `render(chart_dir, values, release, namespace)`: helm-python-sdk (Helm's Go SDK, no helm binary)
  renders the chart; the objects come back parsed, each with the template it came from.
- `missing_keys(ours, chart_defaults)`: the value keys we set that the chart's values.yaml lacks.
- `Validator`: every object against the Kubernetes OpenAPI schemas of a version with
  kubernetes-validate in strict mode (unknown fields are errors), and custom resources against the
  openAPIV3Schema of the CRDs the charts ship, made strict the same way.
- `platform_objects(recorder)`: the objects the Pulumi platform component declares itself.
- `scaler_objects(recorder)`: our chart rendered with the values of the component's scaler release,
  i.e. the scaler's objects as the cluster gets them.

A module with its own name (not conftest), as platform_helpers is.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import yaml
from platform_helpers import ROOT, Recorder

SHARED_CHARTS = ROOT.parent / "shared" / "charts"
# Official charts at a pinned version ../shared/charts does not hold yet, unchanged (README.md there).
REPO_CHARTS = ROOT / "tests" / "platform" / "charts"
OUR_CHART = ROOT / "charts" / "gpuburst-scaler"

# Subcharts kube-prometheus-stack declares but ../shared/charts does not hold (its README says they are
# under charts/; they are not). The parent's templates read one value of each; these are the
# subcharts' own defaults for it (kube-state-metrics 5.28, prometheus-node-exporter 4.43). The
# subcharts' objects are not rendered, and our keys under them cannot be checked: the tests say so.
ABSENT_SUBCHART_DEFAULTS: dict[str, dict[str, Any]] = {
    "kube-prometheus-stack": {
        "kube-state-metrics": {"kubeRBACProxy": {"enabled": False}},
        "prometheus-node-exporter": {"kubeRBACProxy": {"enabled": False}},
    },
}
# Value keys whose contents are the user's own map (Kubernetes fields, labels), not chart settings;
# and our chart's `config`, the scaler's config file (its schema is generated from scaler.core.config.settings).
FREE_FORM = {"nodeSelector", "resources", "labels", "annotations", "podLabels", "podAnnotations", "podMetadata"}
FREE_FORM_OF = {"gpuburst-scaler": {"config"}}


class _Loader(yaml.SafeLoader):
    """YAML 1.1 reads a bare `=` as the obsolete `value` type; Kubernetes (YAML 1.2) reads a string
    (CRD enums of label-selector operators have it)."""


_Loader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))


def load_all(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc]


@dataclass
class Obj:
    source: str  # "<chart or component>: <template>"
    body: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body["kind"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def namespace(self) -> str | None:
        ns = self.body["metadata"].get("namespace")
        return None if ns is None else str(ns)

    def ident(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name} ({self.source})"


@dataclass
class Rendered:
    chart: str
    release: str
    namespace: str
    values: dict[str, Any]
    defaults: dict[str, Any]
    objects: list[Obj]
    crds: list[dict[str, Any]] = field(default_factory=list)  # the chart's crds/ folder, installed first

    def of(self, kind: str, name: str | None = None) -> list[Obj]:
        return [o for o in self.objects if o.kind == kind and (name is None or o.name == name)]

    def one(self, kind: str, name: str | None = None) -> Obj:
        found = self.of(kind, name)
        assert len(found) == 1, f"{self.chart}: expected one {kind} {name or ''}, got {[o.name for o in found]}"
        return found[0]


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def render(chart_dir: Path, values: Mapping[str, Any], release: str, namespace: str) -> Rendered:
    supplement = ABSENT_SUBCHART_DEFAULTS.get(chart_dir.name, {})
    with helm.Chart.load(str(chart_dir)) as chart:
        manifests = chart.render(_merge(supplement, values), name=release, namespace=namespace,
                                 is_install=True)
        defaults = chart.values
        crds = [doc for c in chart.crds for doc in load_all(c["data"])]
    objects = []
    for template, text in sorted(manifests.items()):
        if template.endswith(".txt"):
            continue
        objects += [Obj(f"{chart_dir.name}: {template}", doc) for doc in load_all(text)]
    return Rendered(chart_dir.name, release, namespace, dict(values), defaults, objects, crds)


def chart_version(chart_dir: Path) -> str:
    return str(yaml.safe_load((chart_dir / "Chart.yaml").read_text())["version"])


def official_chart(name: str, version: str) -> Path:
    """The folder holding official chart `name` at `version`: tests/platform/charts/ first, then
    ../shared/charts; LookupError naming what each holds when neither is that version."""
    held = []
    for base in (REPO_CHARTS, SHARED_CHARTS):
        path = base / name
        if (path / "Chart.yaml").exists():
            if (found := chart_version(path)) == version:
                return path
            held.append(f"{path} is {found}")
    raise LookupError(f"official chart {name} {version}: neither {REPO_CHARTS} nor {SHARED_CHARTS} holds it"
                      f" ({'; '.join(held) or 'no folder of that name'})")


def absent_subcharts(chart_dir: Path) -> set[str]:
    """Subcharts Chart.yaml declares that are neither a folder nor an archive under charts/."""
    deps = yaml.safe_load((chart_dir / "Chart.yaml").read_text()).get("dependencies") or []
    held = [p.name for p in (chart_dir / "charts").iterdir()] if (chart_dir / "charts").is_dir() else []
    return {d["name"] for d in deps
            if not any(h == d["name"] or (h.startswith(d["name"] + "-") and h.endswith(".tgz")) for h in held)}


def missing_keys(ours: Mapping[str, Any], chart: Any, path: str = "", free: frozenset[str] = frozenset(),
                 read: str = "") -> list[str]:
    """Dotted paths of keys in `ours` that the chart's values (`chart`) do not have. A key values.yaml
    leaves out but the templates read as `.Values.<path>` (`read`: their text) is a key all the same."""
    out: list[str] = []
    for k, v in ours.items():
        p = f"{path}.{k}" if path else str(k)
        if not isinstance(chart, dict) or k not in chart:
            if f".Values.{p}" not in read:
                out.append(p)
        elif k not in FREE_FORM and p not in free and isinstance(v, Mapping) and isinstance(chart[k], dict) \
                and chart[k]:
            out += missing_keys(v, chart[k], p, free, read)
    return out


def check_keys(rendered: Rendered, chart_dir: Path) -> tuple[list[str], list[str]]:
    """(keys we set that the chart lacks, keys that could not be checked). Keys under a subchart the
    chart folder lacks are checked against the parent's section of it; those it does not list either
    cannot be told apart from the subchart's own keys, so they are returned as not checkable."""
    absent = absent_subcharts(chart_dir)
    with helm.Chart.load(str(chart_dir)) as chart:
        read = "\n".join(t["data"] for t in chart.templates)
    free = frozenset(FREE_FORM_OF.get(chart_dir.name, set()))
    missing = missing_keys(rendered.values, rendered.defaults, "", free, read)
    unchecked = [k for k in missing if k.split(".")[0] in absent]
    return [k for k in missing if k not in unchecked], unchecked


# --- the platform component's own objects ---------------------------------------------------------
def platform_objects(recorder: Recorder) -> list[Obj]:
    """What the component declares as Kubernetes objects itself (not its Helm releases)."""
    out = []
    for r in recorder.resources:
        if not r.typ.startswith("kubernetes:") or r.typ.startswith("kubernetes:helm.sh/"):
            continue
        body = {k: v for k, v in r.inputs.items() if not k.startswith("__")}
        out.append(Obj(f"platform component: {r.name}", _unwrap(json.loads(json.dumps(body)))))
    return out


SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's wire marker of a secret value


def _unwrap(value: Any) -> Any:
    """The object as the API server gets it: Pulumi's secret envelopes replaced by their values."""
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return _unwrap(value.get("value"))
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


def releases(recorder: Recorder) -> list[Any]:
    return [r for r in recorder.resources if r.typ == "kubernetes:helm.sh/v3:Release"]


def is_our_chart(chart: str) -> bool:
    """The platform names our chart by its folder, relative to where the program runs."""
    return Path(chart).resolve() == OUR_CHART


def scaler_objects(recorder: Recorder) -> Rendered:
    (release,) = [r for r in releases(recorder) if is_our_chart(r.inputs["chart"])]
    inputs = _unwrap(json.loads(json.dumps(release.inputs)))
    return render(OUR_CHART, inputs["values"], inputs["name"], inputs["namespace"])


# --- validation -----------------------------------------------------------------------------------
def _strict(schema: Any) -> Any:
    """A CRD's structural schema as the API server applies it with strict field validation: an object
    with declared properties and no other rule admits no other field."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    pattern = out.get("pattern")
    if isinstance(pattern, str) and "(?i)" in pattern[1:]:
        # Go's RE2 takes a flag group anywhere (Kueue's `^(?i)[a-z]...`); Python's re only at the start,
        # where it means the same when nothing before it matches text.
        out["pattern"] = "(?i)" + pattern.replace("(?i)", "")
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


class Validator:
    def __init__(self, crds: Iterable[dict[str, Any]]) -> None:
        self.custom: dict[tuple[str, str], Any] = {}
        for crd in crds:
            if crd.get("kind") != "CustomResourceDefinition":
                continue
            spec = crd["spec"]
            for v in spec["versions"]:
                schema = _strict(v["schema"]["openAPIV3Schema"])
                self.custom[(f"{spec['group']}/{v['name']}", spec["names"]["kind"])] = \
                    jsonschema.Draft7Validator(schema)

    def validate(self, obj: Obj, version: str) -> str | None:
        """None when valid, else one line naming the object and the first error."""
        key = (str(obj.body["apiVersion"]), obj.kind)
        if key in self.custom:
            errors = sorted(self.custom[key].iter_errors(obj.body), key=lambda e: list(e.absolute_path))
            if errors:
                e = errors[0]
                return f"{obj.ident()}: {'.'.join(str(p) for p in e.absolute_path)}: {e.message[:300]}"
            return None
        try:
            kubernetes_validate.validate(obj.body, version, strict=True)
        except kubernetes_validate.SchemaNotFoundError as err:
            return f"{obj.ident()}: no schema: {err.message} and no CRD among the charts'"
        except kubernetes_validate.ValidationError as err:
            where = ".".join(str(p) for p in err.absolute_path)
            return f"{obj.ident()}: {where}: {err.message[:300]}"
        return None


def label_match(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector (matchLabels, matchExpressions In/NotIn/Exists/DoesNotExist) against labels."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        ok = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}[op]
        if not ok:
            return False
    return True
