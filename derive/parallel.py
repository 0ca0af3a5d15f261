"""``generate`` on several cores (``--jobs``): the ops derived, and their formulas laid out, by
worker processes; every file's text made here, in the order and with the bytes of one process.

``make generate`` is a handful of independent ops plus, for formulas.html, mathtext laying out
some 400 formulas (a pyparsing grammar, as slow as the derivations together). Each op's work is
a pure function of its file: a worker derives and emits it (module text and its section of the
pages, plain strings), then lays out its formulas (:class:`~derive.explain.mathsvg.Layout`,
also pure). What depends on order stays here: modules are read in sorted order (the first op
that fails, in that order, is the error, as in one process, and nothing is written), and the
pages give glyph and run ids in the order formulas appear
(:func:`~derive.explain.formulas.typeset`). So the output is the same bytes whatever the number
of workers, the order they finish in, or the hash seed.

Workers are forked where the platform can (the parent has SymPy imported already), else
spawned. They ignore Ctrl-C: the parent, on Ctrl-C, SIGTERM or an op that fails, terminates
them rather than waiting for their derivations, so none is left running without it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import traceback
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from pathlib import Path

from derive.emit.generate import emit, load_op, load_ops, output_folder, targets
from derive.errors import DerivationError, OutputError
from derive.progress import Stages

# formulas laid out per task: the long ones (attention's) take ~0.3 s each, the short ~20 ms
LAYOUT_CHUNK = 12


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class WorkerError(DerivationError):
    """A worker's DerivationError or OutputError, re-raised here with its message as it was."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)


class WorkerCrash(RuntimeError):
    """An unexpected exception in a worker (an engine bug), re-raised here with the worker's
    traceback as its message. Sent back as the exception itself, it had to pickle: one whose
    constructor takes other arguments than its message, or that holds what does not pickle,
    reached the parent as a pickling error that hid where the engine failed (found by
    generating with --jobs)."""


def _derive(path: str, out_dir: str, formulas: bool) -> tuple[str, object]:
    """Worker: one op file -> ("ok", (module text, its pages' section or None)), or ("error",
    message) for the errors the command reports as one line."""
    try:
        op = load_op(path)
        print(f"deriving {op.name} ({op.source})", file=sys.stderr, flush=True)
        emitted = emit(op, out_dir, Stages(op.name))
        module = emitted.module
        sec = None
        if formulas:
            from derive.explain.explain import explain
            from derive.explain.formulas import section

            sec = section(explain(emitted), emitted)
        return "ok", (module, sec)
    except (DerivationError, OutputError) as exc:
        return "error", str(exc)
    except Exception:  # noqa: BLE001  an engine crash: sent as text (see WorkerCrash)
        return "crash", traceback.format_exc()


_MATH = None  # a worker's MathSvg: its glyph outlines are sent once per worker


def _layout(texs: list[str]) -> dict:
    """Worker: LaTeX -> Layout for those mathtext accepts (a rejected one is typeset, and its
    error raised, by the parent, where the op and formula are named)."""
    global _MATH
    from derive.explain.mathsvg import MathSvg

    if _MATH is None:
        _MATH = MathSvg()
    out = {}
    for tex in texs:
        try:
            out[tex] = _MATH.layout(tex)
        except ValueError:
            continue
    return out


def _lay_out(pool: ProcessPoolExecutor, derived: list[Future]) -> list[Future]:
    """Each derived op's formulas queued for layout as soon as it is derived (each LaTeX once;
    which task lays a formula out changes no byte of the page)."""
    from derive.explain.formulas import formulas_of

    seen: set[str] = set()
    laid = []
    for future in as_completed(derived):
        status, value = future.result()
        if status != "ok":
            continue
        texs = [f.tex for f in formulas_of(value[1]) if f.tex not in seen]
        seen.update(texs)
        laid += [
            pool.submit(_layout, texs[k : k + LAYOUT_CHUNK])
            for k in range(0, len(texs), LAYOUT_CHUNK)
        ]
    return laid


def derive_parallel(
    files: list[str], out_dir: str, jobs: int, formulas: bool
) -> list[tuple[Path, str]]:
    """The modules (and, with ``formulas``, the pages) of ``generate``, ``(path, text)`` as one
    process derives them (:func:`~derive.emit.generate.derive_modules`), derived on ``jobs``
    worker processes; nothing is written."""
    out = output_folder(out_dir, create=False)
    ops = load_ops(files)
    paths = targets(ops, out)  # checked before anything is derived, as in one process
    if formulas:
        import matplotlib.mathtext  # noqa: F401  (imported once, before the workers fork)
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=worker_signals)
    try:
        derived = [pool.submit(_derive, op.source, out_dir, formulas) for op in ops]
        laid = _lay_out(pool, derived) if formulas else []
        modules, sections = [], []
        for path, future in zip(paths, derived, strict=True):
            status, value = future.result()
            if status == "crash":
                raise WorkerCrash(f"a worker failed:\n{value}")
            if status != "ok":
                raise WorkerError(value)
            modules.append((path, value[0]))
            sections.append(value[1])
        layouts: dict = {}
        for future in laid:
            layouts.update(future.result())
    except BaseException:  # an op failed, Ctrl-C, SIGTERM: stop the others' work now
        terminate(pool)
        raise
    finally:
        pool.shutdown(cancel_futures=True)
    if not formulas:
        return modules
    from derive.explain.formulas import pages

    return modules + pages(ops, sections, out, layouts)


def worker_signals() -> None:
    """Worker: Ctrl-C reaches the terminal's whole process group, and the parent answers it by
    terminating the workers (a traceback from each would bury its one line); SIGTERM, which a
    forked worker inherits the parent's handler of, ends a worker at once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def terminate(pool: ProcessPoolExecutor) -> None:
    """Terminate the pool's workers, which ``shutdown`` would wait for (a derivation can take a
    minute); Python 3.14 has ``terminate_workers``, earlier ones only ``_processes``."""
    stop = getattr(pool, "terminate_workers", None)
    if stop is not None:
        stop()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        if process.is_alive():
            process.terminate()
