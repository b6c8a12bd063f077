"""The drop-in the nvidia_container_toolkit role writes for containerd 1.x and 2.x.

containerd 1.x's default configuration is the real output of Debian 12's containerd 1.6.20; the
1.x test proves the drop-in keeps every CRI setting of the main file, which a naive drop-in loses
because containerd 1.x replaces a whole plugin table with the imported one.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuburst.cluster.plugins.filter.containerd import (
    containerd_imports,
    containerd_major,
    containerd_nvidia_dropin,
)

DATA = Path(__file__).resolve().parent / "data" / "containerd"
V1 = "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3"
V2 = "containerd github.com/containerd/containerd/v2 v2.0.4 1a43cb6a1035441f9aca8f5666a9b3ef9e70ab20"
V17 = "containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da"


def test_version_detection() -> None:
    assert [containerd_major(v) for v in (V1, V17, V2)] == [1, 1, 2]
    with pytest.raises(AnsibleFilterError, match="cannot read a containerd version"):
        containerd_major("containerd: command not found")


def test_containerd_1x_dropin_carries_the_whole_cri_table() -> None:
    default = (DATA / "debian12-containerd-1.6.20-default.toml").read_text()
    main = (DATA / "debian12-config.toml").read_text()
    dropin = tomllib.loads(containerd_nvidia_dropin(V1, default, main))
    assert dropin["version"] == 2
    cri = dropin["plugins"]["io.containerd.grpc.v1.cri"]
    nvidia = cri["containerd"]["runtimes"]["nvidia"]
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert cri["containerd"]["default_runtime_name"] == "runc"
    # Debian's config.toml sets the CNI directory; losing it would break pod networking.
    assert cri["cni"]["bin_dir"] == "/usr/lib/cni"
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.6"
    assert cri["containerd"]["runtimes"]["runc"]["options"]["BinaryName"] == ""


def test_nvidia_runtime_copies_runc_cgroup_driver_and_can_be_default() -> None:
    default = (DATA / "containerd-2.0-default-excerpt.toml").read_text()
    main = (DATA / "eks-style-config-2.toml").read_text()
    dropin = tomllib.loads(containerd_nvidia_dropin(V2, default, main, set_default=True))
    assert dropin["version"] == 3
    section = dropin["plugins"]["io.containerd.cri.v1.runtime"]
    # containerd 2 merges key by key: the drop-in names only the runtime and the default.
    assert set(section) == {"containerd"}
    assert set(section["containerd"]["runtimes"]) == {"nvidia"}
    assert section["containerd"]["default_runtime_name"] == "nvidia"
    options = section["containerd"]["runtimes"]["nvidia"]["options"]
    assert options["SystemdCgroup"] is True
    assert options["BinaryName"] == "/usr/bin/nvidia-container-runtime"


def test_containerd_2_with_an_unmigrated_version_2_config_is_refused_with_the_fix() -> None:
    # A host upgraded from 1.7 that kept its version 2 config.toml: containerd 2 would refuse a version
    # 3 drop-in ("higher than root config version"), and runc's options live in the 1.x table there.
    default = (DATA / "containerd-2.0-default-excerpt.toml").read_text()
    main = (DATA / "debian12-config.toml").read_text()
    assert tomllib.loads(main)["version"] == 2
    with pytest.raises(AnsibleFilterError, match=r"version 2 file but containerd is 2\.x: migrate it first"):
        containerd_nvidia_dropin(V2, default, main)


def test_same_inputs_give_the_same_text() -> None:
    default = (DATA / "debian12-containerd-1.6.20-default.toml").read_text()
    main = (DATA / "debian12-config.toml").read_text()
    assert containerd_nvidia_dropin(V1, default, main) == containerd_nvidia_dropin(V1, default, main)


def test_imports_are_added_once_and_keep_the_rest_of_the_file() -> None:
    main = (DATA / "debian12-config.toml").read_text()
    once = containerd_imports(main, V1, "/etc/containerd/conf.d/*.toml")
    assert tomllib.loads(once)["imports"] == ["/etc/containerd/conf.d/*.toml"]
    assert once.endswith(main)
    assert containerd_imports(once, V1, "/etc/containerd/conf.d/*.toml") == once


def test_existing_imports_are_kept() -> None:
    main = 'version = 2\nimports = ["/etc/containerd/site.toml"]\n'
    out = tomllib.loads(containerd_imports(main, V17, "/etc/containerd/conf.d/*.toml"))
    assert out["imports"] == ["/etc/containerd/site.toml", "/etc/containerd/conf.d/*.toml"]


def test_missing_main_config_is_created_with_the_right_version() -> None:
    assert tomllib.loads(containerd_imports("", V2, "/etc/containerd/conf.d/*.toml")) == {
        "version": 3, "imports": ["/etc/containerd/conf.d/*.toml"]}


def test_broken_main_config_is_reported() -> None:
    with pytest.raises(AnsibleFilterError, match=r"config\.toml is not valid TOML"):
        containerd_nvidia_dropin(V1, (DATA / "debian12-containerd-1.6.20-default.toml").read_text(), "version = [")


def test_runtimeclass_handler_names_the_runtime_the_dropin_adds() -> None:
    """A RuntimeClass whose handler containerd does not know leaves pods in ContainerCreating."""
    import jinja2
    import yaml
    from kubernetes.client import ApiClient

    role = Path(__file__).resolve().parents[2] / "ansible_collections/gpuburst/cluster/roles/nvidia_container_toolkit"
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    text = jinja2.Template((role / "templates" / "runtimeclass.yml.j2").read_text()).render(**defaults)
    runtimeclass = ApiClient()._ApiClient__deserialize(yaml.safe_load(text), "V1RuntimeClass")
    dropin = tomllib.loads(containerd_nvidia_dropin(
        V17, (DATA / "debian12-containerd-1.6.20-default.toml").read_text(), "",
        runtime_name=defaults["nvidia_container_toolkit_runtime_name"]))
    runtimes = dropin["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert runtimeclass.handler in runtimes
    assert runtimeclass.metadata.name == runtimeclass.handler == "nvidia"
