"""Command line: ``backgen generate OP_FILE... --out DIR [--check] [--formulas]``,
``backgen show OP... [--latex | --json] [--jvp | --order 2]``, ``backgen check OP [--seeds K]``,
``backgen formulas OP_FILE... --out DIR``; ``python -m derive`` is the same command.

``make generate`` is ``generate --formulas`` over the catalogue in ops/; ``make show OP=name``
is ``show``.

``generate`` and ``formulas`` derive every op first and write only when all succeeded; an
error, Ctrl-C or SIGTERM is one line saying what was written (nothing, unless it came while the
files were being written), exit 1, 130 or 143.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from derive.errors import CheckFailed, DerivationError, OutputError

# Each command imports its stage when it runs: ``show`` answers cached ops without SymPy.


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="derive and emit one module per op file")
    gen.add_argument("files", nargs="+", help="Python files that each define OP = Op(...)")
    gen.add_argument("--out", required=True, help="folder for the generated modules")
    gen.add_argument("--check", action="store_true", help="verify each module against autograd")
    gen.add_argument(
        "--formulas", action="store_true", help="also write FORMULAS.md and formulas.html"
    )
    gen.add_argument(
        "--jobs",
        type=_columns,
        help="processes to derive in (default: the cores available, one per op at most; "
        "the output is the same bytes for any number)",
    )
    show = sub.add_parser("show", help="print ops' derivations, step by step")
    show.add_argument(
        "ops",
        nargs="+",
        metavar="op",
        help="a catalogue name (ops/<name>.py) or the path of an op file; several in one run",
    )
    mode = show.add_mutually_exclusive_group()
    mode.add_argument("--latex", action="store_true", help="print LaTeX, one equation a line")
    mode.add_argument("--json", action="store_true", help="print a machine-readable record")
    order = show.add_mutually_exclusive_group()
    order.add_argument(
        "--jvp", action="store_true", help="print the derived tangent map (forward mode)"
    )
    order.add_argument(
        "--order",
        type=int,
        choices=(1, 2),
        default=1,
        help="1: the backward's derivation (default); 2: the derived second order",
    )
    show.add_argument(
        "--width", type=_columns, help="columns for the pretty print (default: terminal)"
    )
    show.add_argument(
        "--no-cache",
        action="store_true",
        help="derive every op, neither reading nor writing the cache of renderings",
    )
    check = sub.add_parser(
        "check", help="compare an op's generated backward with autograd and finite differences"
    )
    check.add_argument("op", help="a catalogue name (ops/<name>.py) or the path of an op file")
    check.add_argument("--seeds", type=int, default=3, help="random shapes to try (default 3)")
    formulas = sub.add_parser("formulas", help="write FORMULAS.md and formulas.html only")
    formulas.add_argument("files", nargs="+", help="Python files that each define OP = Op(...)")
    formulas.add_argument("--out", required=True, help="folder for the two files")
    return parser


def _columns(text: str) -> int:
    """argparse type of ``--width`` and ``--jobs``: a whole number, 1 or more."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _show(args: argparse.Namespace) -> int:
    """Each op in turn, in one process (SymPy's import is paid once); an op that fails is one
    line on stderr and the others are still shown. Exit 2 for an unknown op, 1 for a failed
    derivation."""
    from derive.explain.cache import ShowCache
    from derive.explain.catalogue import UnknownOp
    from derive.explain.command import show_many

    mode = "latex" if args.latex else "json" if args.json else "text"
    width = args.width or shutil.get_terminal_size((100, 24)).columns
    cache = None if args.no_cache else ShowCache.default()
    status = 0
    what = "jvp" if args.jvp else "order2" if args.order == 2 else ""
    for result in show_many(args.ops, mode, width, cache, what):
        if isinstance(result, str):
            sys.stdout.write(result)
            sys.stdout.flush()  # each op as soon as it is derived: several take seconds
            continue
        print(f"error: {result}", file=sys.stderr)
        status = max(status, 2 if isinstance(result, UnknownOp) else 1)
    return status


def _check(args: argparse.Namespace) -> int:
    import tempfile

    from derive.emit.generate import load_op, module_source
    from derive.explain.catalogue import UnknownOp, resolve
    from derive.verify.binding import InterpretError
    from derive.verify.check import check_module  # torch only when checking

    if args.seeds < 1:
        print("error: --seeds must be at least 1", file=sys.stderr)
        return 2
    try:
        op = load_op(resolve(args.op))
    except UnknownOp as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "checked_module.py"
        path.write_text(module_source(op, tmp))
        try:
            print(check_module(path, op, seeds=args.seeds))
        except CheckFailed as exc:
            print(f"FAILED: {exc}", file=sys.stderr)
            return 1
        except InterpretError as exc:  # a construct the independent evaluation lacks
            print(f"error: cannot check it: {exc}", file=sys.stderr)
            return 1
    return 0


def _generate(args: argparse.Namespace, written: list) -> None:
    """Derive every op (and both pages) first, then write them all: an op that fails, or an
    interrupt before the writing, writes nothing. ``written`` receives each file written."""
    from derive.emit.generate import derive_modules, output_folder, write_files

    output_folder(args.out, create=False)  # an existing file as --out: one line, before any work
    jobs = 1
    if args.command == "generate" and not args.check:
        from derive.parallel import cores

        jobs = min(args.jobs or cores(), len(set(args.files)))
    files, made = [], []
    if jobs > 1:  # the same bytes as below, on several cores (see derive.parallel)
        from derive.parallel import derive_parallel

        files = derive_parallel(args.files, args.out, jobs, args.formulas)
    else:
        if args.command == "generate":
            files += derive_modules(args.files, args.out, check=args.check, made=made)
        if args.command == "formulas" or args.formulas:
            from derive.explain.formulas import formulas_pages  # matplotlib: only for the pages

            files += formulas_pages(args.files, args.out, made)  # one derivation for both
    with STOP.held():
        write_files(files, args.out, written, package=args.command == "generate")


class Stopped(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, raised in the main thread by :class:`_Signals`."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Signals:
    """SIGINT and SIGTERM as :class:`Stopped`: the command stops with one line instead of a
    traceback from inside SymPy, or (SIGTERM) dying with its --jobs workers left running. While
    the files are written (milliseconds) a first signal is held until the last one is, so an
    interrupt writes all of them or none; a second stops at once."""

    def __init__(self) -> None:
        self.writing = False
        self.pending: int | None = None

    def __call__(self, signum: int, frame: object) -> None:
        if self.writing and self.pending is None:
            self.pending = signum
            return
        raise Stopped(signum)

    @contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():  # main() in a thread
            yield
            return
        previous = {s: signal.signal(s, self) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    @contextmanager
    def held(self) -> Iterator[None]:
        self.writing, self.pending = True, None
        try:
            yield
        finally:
            self.writing = False
        if self.pending is not None:
            raise Stopped(self.pending)


STOP = _Signals()


def main(argv: list[str] | None = None, prog: str = "python -m derive") -> int:
    args = _parser(prog).parse_args(argv)
    written: list = []
    try:
        with STOP.installed():
            if args.command == "show":
                return _show(args)
            if args.command == "check":
                return _check(args)
            _generate(args, written)
    except (DerivationError, OutputError) as exc:
        print(f"error: {exc}{_after(args, written)}", file=sys.stderr)
        return 1
    except CheckFailed as exc:
        print(f"FAILED: {exc}{_after(args, written)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Stopped)
        signum = getattr(exc, "signum", signal.SIGINT)
        word = "terminated" if signum == signal.SIGTERM else "interrupted"
        print(f"{word}{_after(args, written, ': ')}", file=sys.stderr)
        return 128 + signum
    for path, changed in written:
        print(f"{'wrote' if changed else 'unchanged'} {path}")
    return 0


def _after(args: argparse.Namespace, written: list, sep: str = "; ") -> str:
    """The end of a stopped command's one line: for generate and formulas, what it wrote."""
    if args.command not in ("generate", "formulas"):
        return ""
    changed = [Path(path).as_posix() for path, was_changed in written if was_changed]
    return sep + (f"wrote {', '.join(changed)}" if changed else "nothing was written")


def run(prog: str = "backgen") -> int:
    """The ``backgen`` console command (pyproject's ``[project.scripts]``) and ``python -m
    derive``: ``prog`` is the name usage and help lines give."""
    try:
        return main(prog=prog)
    except BrokenPipeError:  # `... | head`: the reader left; stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(run("python -m derive"))
