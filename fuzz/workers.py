"""Worker processes for the fuzzer: seeds judged side by side, and a case that kills its
process (an abort, a segfault) judged wrong instead of ending the run.

Inductor can corrupt the heap (``double free or corruption``, ``munmap_chunk(): invalid
pointer``: fuzz --compiled 13100172 and 13200405 ended their runs so, on torch 2.13): the C
library aborts the process, no exception to catch. In a worker, the parent sees the pool
broken, reruns the seeds that were in flight each alone in a process of its own (the one that
dies again is the find, a ``crash`` outcome) and goes on with a new pool. Shrinking such a
mode's finds runs in a process of its own too (:func:`isolated`): a candidate may crash.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from derive.parallel import terminate, worker_signals
from fuzz.check import Outcome


class Crashed(Exception):
    """The process running a call died: ``exitcode`` is -N for signal N."""

    def __init__(self, exitcode: int | None) -> None:
        super().__init__(died(exitcode))
        self.exitcode = exitcode


def died(exitcode: int | None) -> str:
    """How a process ended, in words: ``killed by SIGABRT`` for an exit code of -6."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"the process was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            pass
    return f"the process ended with exit code {exitcode}"


def judged(
    one: Callable[[int], Outcome], seeds: list[int], jobs: int, crash: str, alone: bool = False
) -> Iterator[Outcome]:
    """Each seed's outcome, in the seeds' order. With ``jobs`` > 1 (or ``alone``) the seeds are
    judged on that many worker processes, each one seed at a time, and handed back in order
    as they come (a slow case holds back the lines after it, never their work); a seed whose
    process dies is ``wrong`` with kind ``crash``. Workers are spawned, not forked: torch's
    thread pool is not safe across a fork, and the parent runs torch when it shrinks. Each
    runs torch on one thread (a case's tensors are tiny; N workers of N threads each would
    fight for the cores), and a case's time limit is its own CPU time, as in one process.
    Ctrl-C (or any error here) terminates the workers (:func:`derive.parallel.terminate`)
    rather than waiting for their cases."""
    if jobs <= 1 and not alone:
        yield from map(one, seeds)
        return
    rest = list(seeds)
    while rest:
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=_SPAWN, initializer=worker)
        try:
            for outcome in pool.map(one, rest):
                rest.pop(0)
                yield outcome
        except BrokenProcessPool:  # a worker died: the first seed not handed back, alone
            seed = rest.pop(0)
            try:
                yield isolated(one, seed)
            except Crashed as exc:
                yield Outcome("wrong", crash, f"{exc} (seed {seed}, judged alone)")
        except BaseException:
            terminate(pool)
            raise
        finally:
            pool.shutdown(cancel_futures=True)


def isolated(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a process of its own, as a worker runs; :class:`Crashed` if it dies."""
    receive, send = _SPAWN.Pipe(duplex=False)
    process = _SPAWN.Process(target=_call, args=(send, fn, args))
    process.start()
    send.close()
    try:
        result = receive.recv()
    except EOFError:  # it died before it answered
        process.join()
        raise Crashed(process.exitcode) from None
    except BaseException:
        process.terminate()
        raise
    finally:
        receive.close()
    process.join()
    ok, value = result
    if not ok:
        raise value
    return value


def _call(send, fn: Callable[..., Any], args: tuple) -> None:
    worker()
    try:
        result = True, fn(*args)
    except Exception as exc:  # noqa: BLE001  raised again in the parent
        result = False, exc
    send.send(result)
    send.close()


def worker() -> None:
    """Worker setup: signals as generate's workers take them, torch on one thread."""
    import torch

    worker_signals()
    torch.set_num_threads(1)


_SPAWN = multiprocessing.get_context("spawn")
