"""The machine a run happened on, for the report's header: ratios only mean something with it."""

from __future__ import annotations

import os
import platform
import sys

import torch

# environment that changes step times: allocator behaviour and thread pools
ENV_KEYS = ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo, else what platform knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> float | None:
    """The 1-minute load average: above cores minus our threads, other work competes."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def machine_info(device: str) -> dict:
    """CPU, cores, load, torch, threads and the environment variables that matter."""
    info = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "load_avg_start": load_average(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "device": device,
        "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
        "argv": sys.argv[1:],
    }
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
    return info


def header_line(info: dict) -> str:
    """One line: what a reader needs to weigh the numbers."""
    env = " ".join(f"{k}={v}" for k, v in info["env"].items()) or "no allocator/thread env"
    gpu = f", GPU {info['gpu']}" if "gpu" in info else ""
    return (
        f"{info['cpu']}, {info['cores']} cores{gpu}; torch {info['torch']}, "
        f"{info['threads']} threads, device {info['device']}; {env}; "
        f"other processes used {info.get('others_cores')} cores on average during the run"
    )


def cpu_seconds() -> tuple[float, float] | None:
    """(busy CPU seconds of the whole machine, of this process and its children); Linux only."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    busy = (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")  # up to steal, not guest
    own = os.times()
    return busy, own.user + own.system + own.children_user + own.children_system


def others_cores(start: tuple[float, float] | None, wall_s: float) -> float | None:
    """Cores that other processes kept busy on average since ``start = cpu_seconds()``."""
    end = cpu_seconds()
    if start is None or end is None or wall_s <= 0:
        return None
    return round(max(0.0, (end[0] - start[0]) - (end[1] - start[1])) / wall_s, 2)


def contention_warning(info: dict) -> str | None:
    """A warning when other processes took CPU our threads needed.

    With more torch threads than free cores, every parallel region waits for a descheduled
    thread: steps then run 10-50x slower in bursts, and the ratios mean little.
    """
    others = info.get("others_cores")
    if info["device"] != "cpu" or others is None or not info["cores"]:
        return None
    if others <= max(0.25, info["cores"] - info["threads"]):
        return None
    return (
        f"other processes kept {others} of {info['cores']} cores busy on average during this run "
        f"({info['threads']} torch threads): rerun on a quiet machine or with --threads 1"
    )


def pin_threads(n: int) -> str:
    """Give torch and JAX the same ``n`` cores; call before JAX is imported. Says what it did.

    torch: ``torch.set_num_threads(n)``. JAX has no such call, and XLA_FLAGS alone did not hold
    it (jax 0.11.2 kept 13 of 16 cores busy with ``--xla_cpu_multi_thread_eigen=false``), so the
    process is pinned to its first ``n`` allowed cores (``os.sched_setaffinity``): every thread
    started later, XLA's pools included, inherits that. The flag still keeps XLA from sizing an
    Eigen pool for cores it may not use.
    """
    torch.set_num_threads(n)
    if not hasattr(os, "sched_setaffinity"):
        return f"torch.set_num_threads({n}); this OS cannot pin a process, JAX not pinned"
    cores = sorted(os.sched_getaffinity(0))[:n]
    os.sched_setaffinity(0, cores)
    if n == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()
    return (
        f"pinned to {n} core(s): torch.set_num_threads({n}), process affinity {cores} "
        f"(JAX's threads inherit it)"
    )
