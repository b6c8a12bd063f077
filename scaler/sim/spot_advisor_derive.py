"""Derive scaler/core/config/spot_advisor.py from the EC2 Spot Instance Advisor's data file (it rewrites it).

    python -m scaler.sim.spot_advisor_derive ../shared/spot/spot-advisor-data.json

Keeps, for every AWS instance type of the catalogue the advisor lists, its Linux savings and interruption bucket in
each region it lists it in (a few kB instead of the advisor's 900 kB). The data file is Apache-2.0 as
alexei-led/spotinfo ships it (../shared/spot/README.md, LICENSE); the module it writes says so.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scaler.core.config.catalogue import CATALOGUE

PER_LINE = 4  # regions per line of the module

HEADER = '''"""Generated: do not edit. `python -m scaler.sim.spot_advisor_derive ../shared/spot/spot-advisor-data.json`

The EC2 Spot Instance Advisor's figures (Linux) for the AWS instance types of the catalogue, per region:
type -> region -> (savings %, interruption bucket index 0 "<5%" .. 4 ">20%"). Source: spot-advisor-data.json
as alexei-led/spotinfo embeds it (internal/spot/data/spot-advisor-data.json, snapshot of 2025-07-28,
commit 05e9331), Apache License 2.0. AWS updates the advisor continuously: these are mid-2025 figures.
"""

from typing import Final

SOURCE: Final = "EC2 Spot Instance Advisor data, 2025-07 (alexei-led/spotinfo 05e9331)"
'''


def derive(data: dict[str, object]) -> str:
    advisor = data["spot_advisor"]
    assert isinstance(advisor, dict)
    names = sorted(t.name for t in CATALOGUE.values() if t.cloud == "aws")
    lines = [HEADER, "ADVICE: Final[dict[str, dict[str, tuple[int, int]]]] = {"]
    for name in names:
        per_region = {region: (v["Linux"][name]["s"], v["Linux"][name]["r"])
                      for region, v in sorted(advisor.items()) if name in v.get("Linux", {})}
        if not per_region:  # a type the advisor does not list (p5.4xlarge, newer than the data): no entry
            continue
        entries = [f'"{region}": ({s}, {r}),' for region, (s, r) in per_region.items()]
        lines.append(f'    "{name}": {{')
        lines += ["        " + " ".join(entries[i:i + PER_LINE]) for i in range(0, len(entries), PER_LINE)]
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


OUT = Path(__file__).resolve().parents[1] / "core" / "config" / "spot_advisor.py"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m scaler.sim.spot_advisor_derive SPOT_ADVISOR_DATA_JSON", file=sys.stderr)
        return 2
    try:
        data = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
        text = derive(data)
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as err:
        print(f"{argv[0]}: not the Spot Advisor's data file: {err}", file=sys.stderr)
        return 2
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
