"""How the simulator prices and reclaims Spot: as the EC2 Spot Instance Advisor's data says, by default.

- Price: a spot pool without its own `price_per_hour` is charged its instance type's on-demand price x
  (1 - savings / 100), the advisor's savings of that type in the config's region; `--spot-price-factor F`
  charges on-demand x F instead, for every such pool.
- Reclaims: each spot instance is reclaimed after an exponential time whose rate per instance-hour comes from
  the advisor's interruption bucket: a bucket is the share p of the type's instances interrupted in a month;
  taking an instance exposed for the whole month (730 h), p = 1 - exp(-730 rate), so rate = -ln(1 - p) / 730,
  with p the bucket's midpoint and 25 % for ">20%" (docs/simulator.md, "Spot as the advisor says", gives the
  range and why it is a lower bound). `--interruption-rate R` reclaims every spot pool at R instead.
- Without an advisor entry (every Azure size; an AWS type EC2 does not sell as Spot in that region): the
  documented assumption, the pools file's `spot_price_factor` for the price and the ">20%" bucket for reclaims
  (the worst bucket, so a missing figure never flatters the result). The summary names which pools are assumed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, Literal

from scaler.core.config.catalogue import INTERRUPTION_BUCKETS, SPOT_ADVICE_SOURCE, spot_advice
from scaler.core.config.pool import Pool
from scaler.core.config.settings import ScalerConfig

MONTH_HOURS: Final = 730.0  # the advisor's trailing month, as hours an instance is exposed
# The share of instances interrupted in a month taken for each bucket: its midpoint; ">20%" has no upper edge,
# 25 % is taken (as wide again as the other buckets).
BUCKET_SHARE: Final = (0.025, 0.075, 0.125, 0.175, 0.25)
ASSUMED_BUCKET: Final = len(INTERRUPTION_BUCKETS) - 1  # no advisor entry: the worst bucket
Source = Literal["advisor", "assumed", "override", "pool price"]


def hourly_rate(bucket: int) -> float:
    """Reclaims per spot instance-hour of an interruption bucket (module docstring)."""
    return -math.log(1.0 - BUCKET_SHARE[bucket]) / MONTH_HOURS


@dataclass(frozen=True, slots=True)
class PoolSpot:
    """What one spot pool is charged and how often its instances are reclaimed, and whence each figure."""

    pool: str
    instance_type: str
    price_per_hour: float
    price_source: Source
    rate_per_hour: float
    rate_source: Source
    bucket: str | None  # the bucket the rate comes from (None: --interruption-rate)


@dataclass(frozen=True, slots=True)
class SpotModel:
    region: str
    pools: tuple[PoolSpot, ...]

    def rates(self) -> dict[str, float]:
        return {p.pool: p.rate_per_hour for p in self.pools}

    def section(self) -> dict[str, Any]:
        """The report's `spot` block."""
        return {"source": SPOT_ADVICE_SOURCE, "region": self.region, "pools": {
            p.pool: {"instance_type": p.instance_type, "price_per_hour": p.price_per_hour, "price": p.price_source,
                     "reclaims_per_hour": round(p.rate_per_hour, 6), "reclaims": p.rate_source,
                     "bucket": p.bucket} for p in self.pools}}


def _price(pool: Pool, config: ScalerConfig, price_factor: float | None, region: str) -> tuple[float, Source]:
    if pool.price_per_hour is not None:
        return pool.price_per_hour, "pool price"
    od = pool.itype.price_per_hour
    if price_factor is not None:
        return round(od * price_factor, 4), "override"
    advice = spot_advice(pool.itype.name, region) if pool.cloud == "aws" else None
    if advice is None:
        return round(od * config.spot_price_factor, 4), "assumed"
    return round(od * (1 - advice.savings_pct / 100), 4), "advisor"


def _rate(pool: Pool, interruption_rate: float | None, region: str) -> tuple[float, Source, str | None]:
    if interruption_rate is not None:
        return interruption_rate, "override", None
    advice = spot_advice(pool.itype.name, region) if pool.cloud == "aws" else None
    bucket = ASSUMED_BUCKET if advice is None else advice.bucket
    return hourly_rate(bucket), "assumed" if advice is None else "advisor", INTERRUPTION_BUCKETS[bucket]


def region_of(config: ScalerConfig) -> str:
    """The config's region; on AWS without one, the region of the first pool's first zone."""
    if config.region or config.cloud != "aws" or not config.pools:
        return config.region
    return config.pools[0].zones[0][:-1]


def spot_model(config: ScalerConfig, price_factor: float | None = None,
               interruption_rate: float | None = None) -> SpotModel:
    """Each spot pool's price and reclaim rate (module docstring); None for either: the advisor's."""
    region = region_of(config)
    out = []
    for pool in config.pools:
        if pool.capacity_type != "spot":
            continue
        price, price_source = _price(pool, config, price_factor, region)
        rate, rate_source, bucket = _rate(pool, interruption_rate, region)
        out.append(PoolSpot(pool.name, pool.itype.name, price, price_source, rate, rate_source, bucket))
    return SpotModel(region, tuple(out))


def priced(config: ScalerConfig, model: SpotModel) -> ScalerConfig:
    """The config with every spot pool's price as the model says (the planner and the bill then agree)."""
    prices = {p.pool: p.price_per_hour for p in model.pools}
    return config.model_copy(update={"pools": [
        p.model_copy(update={"price_per_hour": prices[p.name]}) if p.name in prices else p for p in config.pools]})


def spot_line(section: dict[str, Any] | None) -> str | None:
    """The summary's line: where the spot prices and reclaim rates came from, per instance type."""
    if not section or not section["pools"]:
        return None
    parts = set()
    for p in section["pools"].values():
        price = f"${p['price_per_hour']:g}/h" + ("" if p["price"] == "advisor" else f" ({p['price']})")
        rate = f"{p['reclaims_per_hour']:.2g} reclaims/h" + (f" ({p['bucket']})" if p["bucket"] else "") + \
            ("" if p["reclaims"] == "advisor" else f" {p['reclaims']}")
        parts.add(f"{p['instance_type']} {price} {rate}")
    assumed = sorted({n for n, p in section["pools"].items() if "assumed" in (p["price"], p["reclaims"])})
    text = f"  spot: {section['source']}, {section['region']}: " + "; ".join(sorted(parts))
    if assumed:
        priced = any(section["pools"][n]["price"] == "assumed" for n in assumed)  # not a pool's own price
        price = "the pools file's spot_price_factor and " if priced else ""
        text += f" (assumed for {', '.join(assumed)}: no advisor entry, so {price}the >20% bucket)"
    return text
