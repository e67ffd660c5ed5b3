"""/proc/meminfo, /proc/slabinfo (2.1) and /proc/cgroups text, laid out as the kernel prints them."""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rootsift.scenarios.memleak import Host

KIB = 1024
CONTROLLERS = (
    "cpuset", "cpu", "cpuacct", "blkio", "memory", "devices", "freezer",
    "net_cls", "perf_event", "net_prio", "hugetlb", "pids", "rdma",
)  # fmt: skip
_HIERARCHY = {c: i + 1 for i, c in enumerate(CONTROLLERS)}

# name, object size, objects per slab, pages per slab, reclaimable, weight of the
# host's base slab, weight of what each cgroup pins (dentries, inodes, kernfs nodes, kmalloc)
SLAB_CACHES = (
    ("dentry", 192, 21, 1, True, 0.45, 0.0),
    ("inode_cache", 600, 27, 4, True, 0.25, 0.0),
    ("ext4_inode_cache", 1096, 29, 8, True, 0.25, 0.0),
    ("radix_tree_node", 584, 28, 4, True, 0.05, 0.0),
    ("kernfs_node_cache", 136, 30, 1, False, 0.04, 0.22),
    ("kmalloc-8k", 8192, 4, 8, False, 0.03, 0.02),
    ("kmalloc-4k", 4096, 8, 8, False, 0.05, 0.06),
    ("kmalloc-2k", 2048, 16, 8, False, 0.05, 0.05),
    ("kmalloc-1k", 1024, 32, 8, False, 0.06, 0.10),
    ("kmalloc-512", 512, 32, 4, False, 0.08, 0.12),
    ("kmalloc-256", 256, 32, 2, False, 0.06, 0.08),
    ("kmalloc-192", 192, 21, 1, False, 0.05, 0.07),
    ("kmalloc-128", 128, 32, 1, False, 0.05, 0.05),
    ("kmalloc-96", 96, 42, 1, False, 0.04, 0.05),
    ("kmalloc-64", 64, 64, 1, False, 0.06, 0.09),
    ("kmalloc-32", 32, 128, 1, False, 0.04, 0.06),
    ("task_struct", 5888, 5, 8, False, 0.12, 0.0),
    ("mm_struct", 1088, 30, 8, False, 0.03, 0.0),
    ("vm_area_struct", 208, 39, 2, False, 0.08, 0.0),
    ("filp", 256, 32, 2, False, 0.06, 0.0),
    ("sock_inode_cache", 832, 39, 8, False, 0.03, 0.0),
    ("mem_cgroup_per_node", 1024, 32, 8, False, 0.01, 0.05),
)


def _kb(key: str, value_bytes: int) -> str:
    return f"{key + ':':<16}{max(0, value_bytes) // KIB:>8} kB"


def meminfo_text(host: Host, rng: random.Random) -> str:
    """/proc/meminfo of ``host`` now (kernel 5.x keys, values in kB)."""
    total, free, anon, cache = host.total, max(host.free(), 64 << 20), host.anon(), host.page_cache
    shmem = 64 << 20
    s_rec, s_unrec = host.reclaimable_slab, host.unreclaimable_slab
    low = total // 200
    available = free - low + cache - min(cache // 2, low) + s_rec - min(s_rec // 2, low)
    threads = 600 + 60 * len(host.running)
    rows = [
        _kb("MemTotal", total),
        _kb("MemFree", free),
        _kb("MemAvailable", available),
        _kb("Buffers", cache // 100),
        _kb("Cached", cache - cache // 100 + shmem),
        _kb("SwapCached", 0),
        _kb("Active", anon * 7 // 10 + cache * 55 // 100),
        _kb("Inactive", anon * 3 // 10 + cache * 45 // 100 + shmem),
        _kb("Active(anon)", anon * 7 // 10),
        _kb("Inactive(anon)", anon * 3 // 10 + shmem),
        _kb("Active(file)", cache * 55 // 100),
        _kb("Inactive(file)", cache * 45 // 100),
        _kb("Unevictable", 18 << 20),
        _kb("Mlocked", 18 << 20),
        _kb("SwapTotal", 0),
        _kb("SwapFree", 0),
        _kb("Dirty", int(rng.uniform(0.1, 8) * (1 << 20))),
        _kb("Writeback", 0),
        _kb("AnonPages", anon),
        _kb("Mapped", anon // 20 + cache // 50),
        _kb("Shmem", shmem),
        _kb("KReclaimable", s_rec),
        _kb("Slab", s_rec + s_unrec),
        _kb("SReclaimable", s_rec),
        _kb("SUnreclaim", s_unrec),
        _kb("KernelStack", threads * 16 * KIB),
        _kb("PageTables", anon // 400),
        _kb("NFS_Unstable", 0),
        _kb("Bounce", 0),
        _kb("WritebackTmp", 0),
        _kb("CommitLimit", total // 2),
        _kb("Committed_AS", anon * 3 // 2),
        _kb("VmallocTotal", 34359738367 * KIB),
        _kb("VmallocUsed", 0),
        _kb("VmallocChunk", 0),
        _kb("Percpu", 60 << 20),
        _kb("HardwareCorrupted", 0),
        _kb("AnonHugePages", anon // 4 // (2 << 20) * (2 << 20)),
        _kb("ShmemHugePages", 0),
        _kb("ShmemPmdMapped", 0),
        f"{'HugePages_Total:':<16}{0:>8}",
        f"{'HugePages_Free:':<16}{0:>8}",
        f"{'HugePages_Rsvd:':<16}{0:>8}",
        f"{'HugePages_Surp:':<16}{0:>8}",
        _kb("Hugepagesize", 2 << 20),
        _kb("Hugetlb", 0),
        _kb("DirectMap4k", 1 << 30),
        _kb("DirectMap2M", total // 3),
        _kb("DirectMap1G", total - total // 3),
    ]
    return "\n".join(rows) + "\n"


def slabinfo_text(host: Host, rng: random.Random) -> str:
    """/proc/slabinfo 2.1 of ``host`` now: the base slab spread over common caches, what the
    host's cgroups pin spread over the caches they charge."""
    pinned = (host.dying + len(host.running)) * host.slab_per_cgroup
    lines = [
        "slabinfo - version: 2.1",
        "# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : tunables <limit> "
        "<batchcount> <sharedfactor> : slabdata <active_slabs> <num_slabs> <sharedavail>",
    ]
    for name, size, per_slab, pages, reclaimable, base_w, pin_w in SLAB_CACHES:
        base = host.reclaimable_slab if reclaimable else host.base_unreclaimable
        total_bytes = base * base_w + pinned * pin_w
        objs = max(per_slab, int(total_bytes / size))
        slabs = math.ceil(objs / per_slab)
        objs = slabs * per_slab
        active = int(objs * rng.uniform(0.9, 1.0))
        lines.append(
            f"{name:<17} {active:6d} {objs:6d} {size:6d} {per_slab:4d} {pages:4d} : tunables {0:4d} {0:4d} {0:4d}"
            f" : slabdata {slabs:6d} {slabs:6d} {0:6d}"
        )
    return "\n".join(lines) + "\n"


def cgroups_text(counts: dict[str, int]) -> str:
    """/proc/cgroups with the given number of cgroups per controller (v1, all enabled)."""
    lines = ["#subsys_name\thierarchy\tnum_cgroups\tenabled"]
    lines += [f"{c}\t{_HIERARCHY[c]}\t{counts.get(c, 1)}\t1" for c in CONTROLLERS]
    return "\n".join(lines) + "\n"
