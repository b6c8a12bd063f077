# Copyright: gpuburst maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filters that write containerd's configuration for the NVIDIA runtime, as drop-in files.

containerd 2.x (config version 3) merges an imported file into the main one key by key, so the
drop-in only names the nvidia runtime. containerd 1.6 / 1.7 (config version 2) replaces a whole
plugin table with the imported one, so a drop-in that only named the runtime would silently drop
every CRI setting of the main file (Debian's own config.toml sets the CNI bin_dir, EKS's sets the
sandbox image and SystemdCgroup). For 1.x the drop-in therefore carries the complete CRI table:
containerd's defaults (`containerd config default`) overlaid with the main file's CRI table, plus
the nvidia runtime, which copies runc's settings as `nvidia-ctk runtime configure` does.

Runs on the controller (Python 3.11+, tomllib); TOML is written with tomli-w.
"""

from __future__ import annotations

import copy
import re
import tomllib
from typing import Any

from ansible.errors import AnsibleFilterError

CRI_V2 = "io.containerd.grpc.v1.cri"
CRI_V3 = "io.containerd.cri.v1.runtime"
_VERSION = re.compile(r"\bv?(\d+)\.(\d+)\.(\d+)")
_RUNTIME_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def _text(value: Any, what: str) -> str:
    """A filter argument that must be text (a command's stdout, a file's content)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise AnsibleFilterError(f"{what}: expected text, got {type(value).__name__}")
    return value


def containerd_major(version_output: str) -> int:
    """2 for `containerd github.com/containerd/containerd/v2 v2.0.4 ...`, 1 for 1.6 / 1.7."""
    match = _VERSION.search(_text(version_output, "version_output"))
    if not match:
        raise AnsibleFilterError(f"cannot read a containerd version from {version_output!r}")
    return int(match.group(1))


def _load(text: str, what: str) -> dict[str, Any]:
    try:
        return tomllib.loads(_text(text, what))
    except tomllib.TOMLDecodeError as err:
        raise AnsibleFilterError(f"{what} is not valid TOML: {err}") from None


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _dumps(data: dict[str, Any]) -> str:
    try:
        import tomli_w
    except ImportError:
        raise AnsibleFilterError(
            "gpuburst.cluster needs the Python package tomli-w on the controller: pip install tomli-w") from None
    return "# Managed by gpuburst.cluster.nvidia_container_toolkit; do not edit.\n" + tomli_w.dumps(data)


def containerd_nvidia_dropin(version_output: str, default_config: str, main_config: str,
                             runtime_name: str = "nvidia", binary: str = "/usr/bin/nvidia-container-runtime",
                             set_default: bool = False) -> str:
    if not isinstance(runtime_name, str) or not _RUNTIME_NAME.match(runtime_name):
        raise AnsibleFilterError(f"runtime_name: {runtime_name!r} is not a containerd runtime name "
                                 "(letters, digits, '_', '.', '-')")
    if not isinstance(binary, str) or not binary.startswith("/") or any(c in binary for c in "\"\n"):
        raise AnsibleFilterError(f"binary: {binary!r} must be an absolute path")
    if not isinstance(set_default, bool):
        raise AnsibleFilterError(f"set_default: {set_default!r} must be true or false")
    major = containerd_major(version_output)
    plugin = CRI_V3 if major >= 2 else CRI_V2
    main = _load(main_config, "config.toml")
    if major >= 2 and main.get("version", 3) < 3:
        # containerd 2 refuses a drop-in of a higher version than the main file, and reads runc's
        # options from the version 3 table: the main file has to be migrated first.
        raise AnsibleFilterError(
            f"config.toml is a version {main.get('version')} file but containerd is {major}.x: migrate it first "
            "(containerd config migrate > config.toml.new && mv config.toml.new config.toml), then run again")
    effective = _merge(_load(default_config, "containerd config default"), main)
    cri = effective.get("plugins", {}).get(plugin)
    if cri is None or "runc" not in cri.get("containerd", {}).get("runtimes", {}):
        raise AnsibleFilterError(f"containerd {major}.x defines no runc runtime under plugins.{plugin!r}")
    runc = cri["containerd"]["runtimes"]["runc"]
    nvidia = copy.deepcopy(runc)
    nvidia["runtime_type"] = "io.containerd.runc.v2"
    nvidia.setdefault("options", {})["BinaryName"] = binary
    if major >= 2:
        # Merged key by key: name only what changes.
        section: dict[str, Any] = {"containerd": {"runtimes": {runtime_name: nvidia}}}
        if set_default:
            section["containerd"]["default_runtime_name"] = runtime_name
        return _dumps({"version": 3, "plugins": {plugin: section}})
    # Replaced as a whole: carry the complete CRI table.
    cri["containerd"]["runtimes"][runtime_name] = nvidia
    if set_default:
        cri["containerd"]["default_runtime_name"] = runtime_name
    return _dumps({"version": 2, "plugins": {plugin: cri}})


def containerd_imports(main_config: str, version_output: str, pattern: str) -> str:
    """The main config.toml with `pattern` in its top-level `imports` (created when missing)."""
    if not isinstance(pattern, str) or not pattern.startswith("/") or any(c in pattern for c in "\"\n\\"):
        raise AnsibleFilterError(f"pattern: {pattern!r} must be an absolute path glob "
                                 "(e.g. /etc/containerd/conf.d/*.toml)")
    major = containerd_major(version_output)
    if not _text(main_config, "config.toml").strip():
        return _dumps({"version": 3 if major >= 2 else 2, "imports": [pattern]})
    current = _load(main_config, "config.toml")
    imports = list(current.get("imports", []))
    if pattern in imports:
        return main_config
    line = "imports = [" + ", ".join(f'"{i}"' for i in [*imports, pattern]) + "]\n"
    lines = main_config.splitlines(keepends=True)
    at = next((i for i, text in enumerate(lines) if re.match(r"^\s*imports\s*=", text)), None)
    if at is not None:
        if not lines[at].rstrip().endswith("]"):
            raise AnsibleFilterError("config.toml spreads `imports` over several lines: put it on one line")
        lines[at] = line
    else:
        lines.insert(0, line)
    result = "".join(lines)
    if _load(result, "the updated config.toml").get("imports") != [*imports, pattern]:
        raise AnsibleFilterError("could not add the drop-in directory to config.toml's imports")
    return result


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"containerd_nvidia_dropin": containerd_nvidia_dropin, "containerd_imports": containerd_imports}
