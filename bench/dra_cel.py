"""CEL selector cost per device with the library scaler.core.dra uses (cel-expr-python).

Prints compile time per expression (uncached) and evaluation time per device for the selectors a
DRA planner sees most: the NVIDIA class selector, a memory quantity selector, a semver selector.
Run: .venv/bin/python bench/dra_cel.py
"""

from __future__ import annotations

import time

from scaler.core.dra import cel, nvidia
from scaler.core.dra.allocator import Allocator, NodeRef
from scaler.core.dra.extended import extended_resource_claim

EXPRESSIONS = {
    "class gpu.nvidia.com": nvidia.GPU_CLASS.selectors[0],
    "memory >= 40Gi": "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "cc > 8.0.0": "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('8.0.0'))",
}


def main() -> None:
    gpu = nvidia.GpuModel("NVIDIA H100 80GB HBM3", "Hopper", 80 * 2**30, "9.0", count=8)
    (slice_,) = nvidia.node_slices("n1", gpu)
    device = slice_.devices[0]
    variable = cel.device_variable(nvidia.DRIVER, device)
    cel.compile_selector("true")  # build the environment outside the timings
    for label, expr in EXPRESSIONS.items():
        n = 200
        start = time.perf_counter()
        for i in range(n):
            cel._compile(expr + f" || {i} < 0")  # distinct texts: no cache hit
        compile_us = (time.perf_counter() - start) / n * 1e6
        selector = cel.compile_selector(expr)
        n = 5000
        start = time.perf_counter()
        for _ in range(n):
            cel.evaluate(selector, variable)
        eval_us = (time.perf_counter() - start) / n * 1e6
        print(f"{label:22s} compile {compile_us:7.1f} us/expression   evaluate {eval_us:6.1f} us/device")
    # The planner's view: one allocation of 2 whole GPUs on an 8-GPU node, selector cache cold and warm.
    claim = extended_resource_claim("ml/p", {"nvidia.com/gpu": 2}, {}, nvidia.DEVICE_CLASSES)
    assert claim is not None
    allocator = Allocator(nvidia.DEVICE_CLASSES, nvidia.node_slices("n1", gpu))
    start = time.perf_counter()
    allocator.allocate(NodeRef("n1"), [claim])
    cold = (time.perf_counter() - start) * 1e6
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        allocator.allocate(NodeRef("n1"), [claim])
    warm = (time.perf_counter() - start) / n * 1e6
    print(f"allocate 2 of 8 GPUs    first {cold:7.1f} us   then {warm:6.1f} us/node (selector results cached)")


if __name__ == "__main__":
    main()
