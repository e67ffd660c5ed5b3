"""Which part of a total drives its trend: each part's share of the total's slope.

Parts are either pieces of the total (used memory = anonymous + slab + …) or consumers
of it (available memory falls as they grow). The default parts of a total say which
(MemAvailable's are consumers); for parts given by hand, parts whose levels add up to
more than the total cannot be its pieces and are taken as consumers, else as pieces
(the finding's ``relation`` says which was assumed). A part's share is the sum of its slopes over the
groups that trend (all groups when none does) over the sum of the total's slopes there,
signed so that a part growing with the trend has a positive share: the part that drives
it ranks first, a part that only moves the other way (page cache giving memory back)
ranks last with a negative share. Its significance combines its per-group Mann–Kendall
z-scores (Stouffer), in the direction of the trend.
"""

from __future__ import annotations

import math
from typing import Any

from rootsift.analysis import distributions as dist
from rootsift.analysis.trends.fitting import Fit

DEFAULT_PARTS = {
    "mem_available_bytes": (
        "sunreclaim_bytes",
        "sreclaimable_bytes",
        "anon_pages_bytes",
        "active_file_bytes",
        "inactive_file_bytes",
        "shmem_bytes",
        "kernel_stack_bytes",
        "page_tables_bytes",
        "percpu_bytes",
        "vmalloc_used_bytes",
    ),
}
"""Parts of a total by the total's field: what takes /proc/meminfo's MemAvailable (the
kernel's categories: unreclaimable and reclaimable slab, anonymous memory, page cache,
shared memory, kernel stacks, page tables, per-CPU and vmalloc areas)."""


def consume(total: dict[Any, Fit], parts: dict[str, dict[Any, Fit]]) -> bool:
    """Whether hand-given parts consume the total: their levels add up to more than it."""
    groups = list(total)
    whole = sum(abs(total[g].level) for g in groups)
    summed = sum(abs(f[g].level) for f in parts.values() for g in groups if g in f)
    return summed > 1.05 * whole


def shares(
    total: dict[Any, Fit], parts: dict[str, dict[Any, Fit]], trending: list[Any], consumers: bool
) -> list[dict[str, Any]]:
    """One entry per part, ranked by share of the total's trend (largest first)."""
    groups = trending or list(total)
    total_slope = sum(total[g].slope for g in groups if g in total)
    direction = -1.0 if consumers else 1.0
    out: list[dict[str, Any]] = []
    for name, fits in parts.items():
        own = [fits[g] for g in groups if g in fits and fits[g].n]
        if not own or total_slope == 0:
            continue
        slope = sum(f.slope for f in own)
        share = direction * slope / total_slope
        toward = math.copysign(1.0, direction * total_slope)  # the direction a part driving the trend moves
        z = sum(toward * f.z for f in own) / math.sqrt(len(own))
        growing = sum(1 for f in own if f.p_value <= 0.05 and f.slope * toward > 0)
        out.append(
            {
                "field": name,
                "share": share,
                "slope_per_day": slope * 24 / len(own),
                "groups": len(own),
                "groups_moving": growing,
                "p_value": float(dist.norm_sf(z)),
                "relation": "consumes" if consumers else "adds to",
            }
        )
    out.sort(key=lambda c: -c["share"])
    return out
