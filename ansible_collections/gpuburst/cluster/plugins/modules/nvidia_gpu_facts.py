#!/usr/bin/python
# Copyright: gpuburst maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_gpu_facts
short_description: Facts about the NVIDIA GPUs of a host, from nvidia-smi
version_added: "0.1.0"
description:
  - Runs C(nvidia-smi --query-gpu=... --format=csv,noheader,nounits) and C(nvidia-smi -q) and returns
    the GPU count, models, memory, driver and CUDA versions and MIG mode as the fact C(nvidia_gpu).
  - Never fails because the host has no GPU, no driver or no C(nvidia-smi) (an image-baking builder
    usually has none of them); C(nvidia_gpu.present) is then false and C(nvidia_gpu.reason) says why.
  - Fails only when C(nvidia-smi) prints something this module cannot read, naming the line.
  - Also counts the NVIDIA GPUs on the PCI bus (C(nvidia_gpu.pci_gpus)), with or without a driver, so
    that a GPU host whose driver did not load can be told from a host without GPUs.
options:
  nvidia_smi:
    description: Path or name of the nvidia-smi executable. A path that is not an executable file fails the task.
    type: str
    default: nvidia-smi
  pci_devices:
    description: Where the kernel lists the PCI devices. A path given that is not a directory fails the task.
    type: path
    default: /sys/bus/pci/devices
author:
  - gpuburst maintainers
"""

EXAMPLES = r"""
- name: Read the GPUs
  gpuburst.cluster.nvidia_gpu_facts:

- name: Report
  ansible.builtin.debug:
    msg: "{{ nvidia_gpu.count }} x {{ nvidia_gpu.models | join(', ') }}, driver {{ nvidia_gpu.driver_version }}"
  when: nvidia_gpu.present
"""

RETURN = r"""
ansible_facts:
  description: The fact C(nvidia_gpu).
  returned: always
  type: dict
  contains:
    nvidia_gpu:
      description: What nvidia-smi says about the host's GPUs.
      type: dict
      contains:
        present:
          description: At least one GPU answered through a loaded driver.
          type: bool
        reason:
          description: Why C(present) is false (empty when true).
          type: str
        count:
          description: Number of GPUs.
          type: int
        models:
          description: Distinct product names, sorted.
          type: list
          elements: str
        memory_mib:
          description: Total framebuffer memory of all GPUs, MiB.
          type: int
        driver_version:
          description: Driver version, e.g. C(570.124.06); empty when unknown.
          type: str
        cuda_version:
          description: Highest CUDA version the driver supports, e.g. C(12.8); empty when unknown.
          type: str
        mig_enabled:
          description: At least one GPU has MIG mode enabled.
          type: bool
        pci_gpus:
          description: NVIDIA display / 3D controllers on the PCI bus (vendor 0x10de, class 0x03), driver or not.
          type: int
        gpus:
          description: One entry per GPU with index, name, uuid, pci_bus_id, memory_mib and mig_mode
            (C(Enabled), C(Disabled) or C(N/A) for GPUs without MIG).
          type: list
          elements: dict
"""

import os  # noqa: E402
import re  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

QUERY_FIELDS = ("index", "name", "uuid", "pci.bus_id", "memory.total", "driver_version", "mig.mode.current")
# nvidia-smi's exit codes (nvidia-smi(1), RETURN VALUE): 6 = no GPU found, 9 = driver not loaded.
NO_DEVICES_RC = 6
NO_DRIVER_RC = 9
_CUDA = re.compile(r"^\s*CUDA Version\s*:\s*(\S+)", re.MULTILINE)
_NOT_AVAILABLE = {"[N/A]", "N/A", "[Not Supported]", "[Unknown Error]"}


DEFAULT_PCI_DEVICES = "/sys/bus/pci/devices"
NVIDIA_VENDOR = "0x10de"
DISPLAY_CLASS = "0x03"  # display controllers: VGA 0x0300, 3D 0x0302 (GPUs); not their audio / USB functions


def count_pci_gpus(root):
    """NVIDIA GPUs the kernel sees on the PCI bus, whether a driver is bound or not."""
    count = 0
    try:
        devices = os.listdir(root)
    except OSError:
        return 0
    for dev in devices:
        try:
            with open(os.path.join(root, dev, "vendor"), encoding="ascii") as f:
                vendor = f.read().strip().lower()
            with open(os.path.join(root, dev, "class"), encoding="ascii") as f:
                klass = f.read().strip().lower()
        except OSError:
            continue
        if vendor == NVIDIA_VENDOR and klass.startswith(DISPLAY_CLASS):
            count += 1
    return count


class NvidiaSmiParseError(ValueError):
    """nvidia-smi printed a line this module cannot read."""


def empty_facts(reason):
    return {
        "present": False, "reason": reason, "count": 0, "models": [], "memory_mib": 0,
        "driver_version": "", "cuda_version": "", "mig_enabled": False, "gpus": [],
    }


def _value(text):
    text = text.strip()
    return "N/A" if text in _NOT_AVAILABLE else text


def parse_query_gpu(text):
    """Rows of `--query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits` as dicts."""
    gpus = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cells = [_value(c) for c in line.split(",")]
        if len(cells) != len(QUERY_FIELDS):
            raise NvidiaSmiParseError(
                f"nvidia-smi --query-gpu line {number}: expected {len(QUERY_FIELDS)} fields "
                f"({','.join(QUERY_FIELDS)}), got {len(cells)}: {line!r}")
        row = dict(zip(QUERY_FIELDS, cells))  # no strict=: managed hosts may run Python 3.9
        try:
            index = int(row["index"])
            memory = 0 if row["memory.total"] == "N/A" else int(float(row["memory.total"]))
        except ValueError:
            raise NvidiaSmiParseError(
                f"nvidia-smi --query-gpu line {number}: index and memory.total must be numbers: {line!r}"
            ) from None
        gpus.append({
            "index": index, "name": row["name"], "uuid": row["uuid"], "pci_bus_id": row["pci.bus_id"],
            "memory_mib": memory, "driver_version": row["driver_version"], "mig_mode": row["mig.mode.current"],
        })
    return gpus


def parse_cuda_version(text):
    """The `CUDA Version : 12.4` line of `nvidia-smi -q` (or of the plain table's banner)."""
    match = _CUDA.search(text)
    if match:
        return match.group(1)
    banner = re.search(r"CUDA Version:\s*([0-9.]+)", text)
    return banner.group(1) if banner else ""


def build_facts(query_text, q_text):
    gpus = parse_query_gpu(query_text)
    if not gpus:
        return empty_facts("nvidia-smi lists no GPU")
    drivers = sorted({g.pop("driver_version") for g in gpus})
    return {
        "present": True,
        "reason": "",
        "count": len(gpus),
        "models": sorted({g["name"] for g in gpus}),
        "memory_mib": sum(g["memory_mib"] for g in gpus),
        "driver_version": drivers[0] if len(drivers) == 1 else ",".join(drivers),
        "cuda_version": parse_cuda_version(q_text),
        "mig_enabled": any(g["mig_mode"] == "Enabled" for g in gpus),
        "gpus": gpus,
    }


def gather(module, nvidia_smi):
    binary = module.get_bin_path(nvidia_smi) if "/" not in nvidia_smi else nvidia_smi
    if not binary:
        return empty_facts(f"{nvidia_smi} is not installed: no NVIDIA driver on this host")
    query = [binary, "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits"]
    rc, out, err = module.run_command(query)
    message = " ".join((out + " " + err).split())
    if rc == NO_DRIVER_RC or "couldn't communicate with the NVIDIA driver" in message:
        return empty_facts(f"the NVIDIA driver is not loaded ({message or 'nvidia-smi rc 9'})")
    if rc == NO_DEVICES_RC or "No devices were found" in message:
        return empty_facts("the driver is loaded but no NVIDIA GPU was found")
    if rc != 0:
        return empty_facts(f"nvidia-smi failed with rc {rc}: {message}")
    _rc, q_out, _err = module.run_command([binary, "-q"])
    return build_facts(out, q_out)


def main():
    module = AnsibleModule(
        argument_spec={"nvidia_smi": {"type": "str", "default": "nvidia-smi"},
                       "pci_devices": {"type": "path", "default": DEFAULT_PCI_DEVICES}},
        supports_check_mode=True,
    )
    nvidia_smi, pci_devices = module.params["nvidia_smi"], module.params["pci_devices"]
    if not nvidia_smi.strip():
        module.fail_json(msg="nvidia_smi: empty; give a command name or an absolute path")
    if "/" in nvidia_smi and not (os.path.isfile(nvidia_smi) and os.access(nvidia_smi, os.X_OK)):
        module.fail_json(msg=f"nvidia_smi: {nvidia_smi} is not an executable file")
    if pci_devices != DEFAULT_PCI_DEVICES and not os.path.isdir(pci_devices):
        # the default may be missing (a container without /sys/bus/pci): no PCI GPU; a path given is a typo
        module.fail_json(msg=f"pci_devices: {pci_devices} is not a directory")
    try:
        facts = gather(module, nvidia_smi)
    except NvidiaSmiParseError as err:
        module.fail_json(msg=str(err))
    facts["pci_gpus"] = count_pci_gpus(module.params["pci_devices"])
    module.exit_json(changed=False, ansible_facts={"nvidia_gpu": facts})


if __name__ == "__main__":
    main()
