"""The baseline a buyer compares with: cluster-autoscaler with its documented defaults on the same pools.

The same trace, pools, placement and cloud events (outages, Spot reclaims, GPU failures) go through the same
simulator; only the policy changes to cluster-autoscaler's defaults as its FAQ lists them
(kubernetes/autoscaler, cluster-autoscaler/FAQ.md, "What are the parameters to CA?"):

- `--scale-down-unneeded-time` 10 minutes: a fixed timer instead of gpuburst's adaptive one;
- `--scale-down-utilization-threshold` 0.5: a node below half its requests is a candidate for removal
  (gpuburst's default too); no consolidation onto cheaper pools (CA removes a node only when its pods fit on
  the nodes that stay);
- `--max-node-provision-time` 15 minutes: a node that has not registered by then is given up;
- `--expander` random: the pool of a scale-up drawn at random among those the pods fit, price ignored;
- no GPU repair (CA has none: a node with a broken GPU stays while its healthy GPUs are used).

Not modelled, each making CA cheaper than it is, so the saving quoted against it is never flattered:
`--scale-down-delay-after-add` (10 minutes with no scale-down after a scale-up).
"""

from __future__ import annotations

from typing import Final

from scaler.core.config.settings import ScalerConfig

UNNEEDED_TIME: Final = 600.0  # --scale-down-unneeded-time
UTILIZATION_THRESHOLD: Final = 0.5  # --scale-down-utilization-threshold
MAX_NODE_PROVISION_TIME: Final = 900.0  # --max-node-provision-time
EXPANDER: Final = "random"  # --expander
LABEL: Final = "cluster-autoscaler defaults"


def ca_config(config: ScalerConfig) -> ScalerConfig:
    """The same pools under cluster-autoscaler's default policy (module docstring)."""
    timings = config.timings.model_copy(update={"unneeded_time": UNNEEDED_TIME,
                                                "provision_timeout": MAX_NODE_PROVISION_TIME})
    scale_down = config.scale_down.model_copy(update={"utilization_threshold": UTILIZATION_THRESHOLD,
                                                      "consolidate": False})
    return repair_off(config).model_copy(update={"timings": timings, "scale_down": scale_down,
                                                 "expander": EXPANDER})


def repair_off(config: ScalerConfig) -> ScalerConfig:
    """The same config with every pool's GPU repair off."""
    return config.model_copy(update={"pools": [
        p.model_copy(update={"repair": p.repair.model_copy(update={"enabled": False})}) for p in config.pools]})
