"""nvidia_gpu_facts on nvidia-smi outputs as real drivers print them.

The parser is tested directly, and the whole module is run as Ansible runs it (a child process
reading its arguments file) against an `nvidia-smi` that prints the recorded outputs and exits with
the driver's real return codes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.gpuburst.cluster.plugins.modules import nvidia_gpu_facts as mod

REPO = Path(__file__).resolve().parents[2]
SMI = Path(__file__).resolve().parent / "data" / "nvidia-smi"
MODULE = REPO / "ansible_collections" / "gpuburst" / "cluster" / "plugins" / "modules" / "nvidia_gpu_facts.py"


def test_eight_a100_with_two_in_mig_mode() -> None:
    facts = mod.build_facts((SMI / "p4d-8xa100-mig.csv").read_text(), (SMI / "p4d-q-head.txt").read_text())
    assert facts["present"] is True
    assert facts["count"] == 8
    assert facts["models"] == ["NVIDIA A100-SXM4-40GB"]
    assert facts["memory_mib"] == 8 * 40960
    assert facts["driver_version"] == "535.183.01"
    assert facts["cuda_version"] == "12.2"
    assert facts["mig_enabled"] is True
    assert [g["mig_mode"] for g in facts["gpus"][:3]] == ["Enabled", "Enabled", "Disabled"]
    assert facts["gpus"][7]["pci_bus_id"] == "00000000:A0:1D.0"


def test_gpu_without_mig_support_reads_as_not_available() -> None:
    facts = mod.build_facts((SMI / "g4dn-t4.csv").read_text(), (SMI / "t4-table.txt").read_text())
    assert facts["gpus"] == [{
        "index": 0, "name": "Tesla T4", "uuid": "GPU-7d3c2b1a-0f9e-8d7c-6b5a-493827160514",
        "pci_bus_id": "00000000:00:1E.0", "memory_mib": 15360, "mig_mode": "N/A",
    }]
    assert facts["mig_enabled"] is False
    # The CUDA version also comes out of the plain table's banner.
    assert facts["cuda_version"] == "12.8"


def test_a_line_with_missing_fields_is_an_error_naming_the_line() -> None:
    with pytest.raises(mod.NvidiaSmiParseError, match="line 2: expected 7 fields"):
        mod.parse_query_gpu("0, Tesla T4, GPU-x, 00000000:00:1E.0, 15360, 570.124.06, [N/A]\n0, Tesla T4, 15360\n")


def _fake_smi(tmp_path: Path, csv: str, q_text: str = "", rc: int = 0) -> Path:
    (tmp_path / "query.out").write_text(csv)
    (tmp_path / "q.out").write_text(q_text)
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'case "$1" in -q) cat {tmp_path}/q.out;; *) cat {tmp_path}/query.out;; esac\n'
        f"exit {rc}\n")
    script.chmod(0o755)
    return script


def _run_module(args: dict[str, object]) -> dict[str, object]:
    proc = subprocess.run([sys.executable, str(MODULE), _args_file(args)], capture_output=True, text=True,
                          check=False, timeout=60)
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def _args_file(args: dict[str, object]) -> str:
    path = Path(args.pop("_tmp")) / "args.json"  # type: ignore[arg-type]
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    return str(path)


def test_module_reports_gpus_through_ansible(tmp_path: Path) -> None:
    smi = _fake_smi(tmp_path, (SMI / "g6-l4.csv").read_text(), (SMI / "g6-l4-q.txt").read_text())
    result = _run_module({"_tmp": str(tmp_path), "nvidia_smi": str(smi)})
    gpu = result["ansible_facts"]["nvidia_gpu"]  # type: ignore[index]
    assert result["changed"] is False
    assert (gpu["present"], gpu["count"], gpu["models"], gpu["memory_mib"]) == (True, 1, ["NVIDIA L4"], 23034)
    assert (gpu["driver_version"], gpu["cuda_version"]) == ("570.124.06", "12.8")


@pytest.mark.parametrize(("fixture", "rc", "reason"), [
    ("no-driver.txt", 9, "the NVIDIA driver is not loaded"),
    ("no-devices.txt", 6, "no NVIDIA GPU was found"),
])
def test_host_without_gpu_is_reported_not_failed(tmp_path: Path, fixture: str, rc: int, reason: str) -> None:
    smi = _fake_smi(tmp_path, (SMI / fixture).read_text(), rc=rc)
    result = _run_module({"_tmp": str(tmp_path), "nvidia_smi": str(smi)})
    gpu = result["ansible_facts"]["nvidia_gpu"]  # type: ignore[index]
    assert result.get("failed") is not True
    assert gpu["present"] is False and gpu["count"] == 0
    assert reason in gpu["reason"]


def test_host_without_nvidia_smi(tmp_path: Path) -> None:
    result = _run_module({"_tmp": str(tmp_path), "nvidia_smi": "nvidia-smi-not-installed-here"})
    gpu = result["ansible_facts"]["nvidia_gpu"]  # type: ignore[index]
    assert gpu["present"] is False
    assert "not installed" in gpu["reason"]


def test_unreadable_output_fails_the_module(tmp_path: Path) -> None:
    smi = _fake_smi(tmp_path, "garbage without commas\n")
    result = _run_module({"_tmp": str(tmp_path), "nvidia_smi": str(smi)})
    assert result["failed"] is True
    assert "line 1" in str(result["msg"])


def test_gpus_on_the_pci_bus_are_counted_with_or_without_a_driver(tmp_path: Path) -> None:
    # An 8-GPU host whose driver did not load: nvidia-smi says rc 9, the PCI bus still shows the GPUs
    # (and their audio functions, which are not GPUs), so the role's verify step can fail loudly.
    pci = tmp_path / "pci"
    devices = {"0000:00:1e.0": ("0x10de", "0x030200"), "0000:00:1f.0": ("0x10de", "0x030000"),
               "0000:00:1e.1": ("0x10de", "0x040300"), "0000:00:03.0": ("0x1d0f", "0x020000")}
    for name, (vendor, klass) in devices.items():
        (pci / name).mkdir(parents=True)
        (pci / name / "vendor").write_text(vendor + "\n")
        (pci / name / "class").write_text(klass + "\n")
    smi = _fake_smi(tmp_path, (SMI / "no-driver.txt").read_text(), rc=9)
    result = _run_module({"_tmp": str(tmp_path), "nvidia_smi": str(smi), "pci_devices": str(pci)})
    gpu = result["ansible_facts"]["nvidia_gpu"]  # type: ignore[index]
    assert (gpu["present"], gpu["pci_gpus"]) == (False, 2)
    assert mod.count_pci_gpus(str(tmp_path / "absent")) == 0
