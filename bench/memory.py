"""What one step costs in memory: its peak, and what the backward keeps saved.

Two peak measures. ``peak_live_bytes`` watches every op output through a TorchDispatchMode and
counts each new storage until it is freed: exact for eager code, blind to compiled code (inductor
allocates its buffers outside the dispatcher). ``peak_allocated_bytes`` asks the allocator: on
CUDA its own peak statistic; on the CPU the profiler's allocation events (``profile_memory``),
which do see inductor's buffers, so it is the one column that covers every variant. Both count
bytes above what was allocated before the step.

Saved bytes use one rule on both sides: unique storages the backward keeps (autograd: tensors
packed by ``saved_tensors_hooks``; generated: tensors in each op's ``saved`` tuple), and
``saved_bytes`` leaves out the storages of parameters and of the batch (X, Y), which are alive
anyway; ``saved_all_bytes`` counts them too.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import generated


def _storages(tree: object) -> list[torch.UntypedStorage]:
    return [t.untyped_storage() for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


class LiveBytes(TorchDispatchMode):
    """Running total of storages created by ops while active; a storage leaves it when freed.

    An output sharing storage with an input (a view, an in-place op) is not new memory.
    """

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, int] = {}
        self.current = 0
        self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {s.data_ptr() for s in _storages((args, kwargs))}
        for storage in _storages(out):
            ptr, nbytes = storage.data_ptr(), storage.nbytes()
            if nbytes == 0 or ptr in inputs or ptr in self.live:
                continue
            self.live[ptr] = nbytes
            self.current += nbytes
            self.peak = max(self.peak, self.current)
            weakref.finalize(storage, self._free, ptr)
        return out

    def _free(self, ptr: int) -> None:
        self.current -= self.live.pop(ptr, 0)


def peak_live_bytes(step: Callable[[], object]) -> int:
    """Peak bytes of op outputs alive at once during ``step()`` (eager code only)."""
    with LiveBytes() as mode:
        step()
    return mode.peak


def _allocation_events(prof: torch.profiler.profile) -> list[tuple[int, int]]:
    """(time_ns, bytes) of every allocation (+) and free (-) the profiler saw."""
    from torch._C._profiler import _EventType

    events, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.tag == _EventType.Allocation:
            events.append((node.start_time_ns, node.extra_fields.alloc_size))
    return sorted(events)


def peak_allocated_bytes(step: Callable[[], object], device: str) -> int | None:
    """Peak allocator bytes above the starting point during ``step()``, compiled code included."""
    if device == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base
    # Kineto logs two lines per profiling session unless told otherwise (read at its first use)
    os.environ.setdefault("KINETO_LOG_LEVEL", "99")
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities, profile_memory=True) as prof:
        step()
    try:
        events = _allocation_events(prof)
    except (AttributeError, ImportError):  # a private profiler API that may move
        return None
    current = peak = 0
    for _, nbytes in events:
        current += nbytes
        peak = max(peak, current)
    return peak


def _unique_bytes(tensors: list[torch.Tensor], exclude: set[int]) -> tuple[int, int]:
    """(bytes without the excluded storages, bytes of all), each storage counted once."""
    sizes = {s.data_ptr(): s.nbytes() for s in _storages(tensors)}
    kept = sum(n for ptr, n in sizes.items() if ptr not in exclude)
    return kept, sum(sizes.values())


def autograd_saved_bytes(step: Callable[[], object], exclude: set[int]) -> tuple[int, int]:
    """Storages autograd packs for the backward during ``step()``: (activations, all)."""
    packed: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        packed.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return _unique_bytes(packed, exclude)


@contextmanager
def _recording_generated_saved() -> Iterator[list[tuple]]:
    """Wrap every generated module's ``forward`` to record the ``saved`` it returns."""
    records: list[tuple] = []
    originals = {}
    for info in pkgutil.iter_modules(generated.__path__):
        module = importlib.import_module(f"{generated.__name__}.{info.name}")
        forward = getattr(module, "forward", None)
        if forward is None:
            continue

        def recording(*args, _forward=forward, **kwargs):
            out, saved = _forward(*args, **kwargs)
            records.append(saved)
            return out, saved

        originals[module] = forward
        module.forward = recording
    try:
        yield records
    finally:
        for module, forward in originals.items():
            module.forward = forward


def generated_saved_bytes(step: Callable[[], object], exclude: set[int]) -> tuple[int, int]:
    """Storages in the ``saved`` tuples of every generated op ``step()`` ran: (activations, all)."""
    with _recording_generated_saved() as records:
        step()
    return _unique_bytes([t for saved in records for t in saved], exclude)
