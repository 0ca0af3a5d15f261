"""Load op files, derive each op, render its module, write it only when it changed.

In: op files; out: ``generated/<op>.py`` and, for each op, an :class:`Emitted` record (the
derivation and the module text) that the formulas pages and ``show`` read.

The writer replaces only files it generated itself, recognised by their whole header line
(``# <MARKER> by backgen from ops/x.py: do not edit by hand.``), not by the word alone: an op
file, a hand-written file quoting the word, another generator's output, or anything else a user
keeps in ``--out`` is never overwritten, whatever the op is named or wherever ``--out`` points.
With ``--check`` a module is written aside, checked, and moved into place only when it passed.
A file that cannot be written (a full disk, a name too long) is one line, never a traceback.

Several op files are all or nothing: every op is loaded, derived and rendered (and checked)
before the first file is written or ``--out`` is created, so an op that fails writes none of
them. Each file is written atomically (a temporary file renamed over it), with the mode a plain
``open(path, "w")`` gives it: an existing file's own, else 0o666 less the umask.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import runpy
import secrets
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from derive.emit.module import MARKER, ModuleData, module_data, render, rendered
from derive.emit.statements import Statement, statements
from derive.errors import DerivationError, OutputError
from derive.language import Op, parse
from derive.names import identifier_problem
from derive.progress import Stage, Stages, silent
from derive.symbolic.derivation import Derivation, derive

MARKER_LINES = 2  # the header line is the first (the second after <!DOCTYPE html>)
# The header line a generated module or formulas page opens with; the word alone is not ours
# (another generator's `# <MARKER> by protoc-gen-python`, a hand-written file quoting it).
HEADER = re.compile(
    r"^(# |<!-- )" + re.escape(MARKER) + r" by backgen from .+: do not edit by hand\.( -->)?$"
)


def load_op(path: str | Path) -> Op:
    """Run an op file and return its ``OP``; the recorded source is the path as given."""
    path = Path(path)
    if path.is_dir():
        raise DerivationError(path.stem, f"{path} is a directory, not an op file")
    if not path.is_file():
        raise DerivationError(path.stem, f"op file {path} does not exist")
    try:
        namespace = runpy.run_path(str(path))
    except DerivationError:
        raise
    except (Exception, SystemExit) as exc:  # the user's file: report where, not a traceback
        # of ours; its exit() is a failure to run, not backgen's exit (Ctrl-C stays Ctrl-C)
        why = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, SystemExit):
            why = f"it called exit (SystemExit: {exc.code})"
        raise DerivationError(path.stem, f"{path} failed to run: {why}") from None
    op = namespace.get("OP")
    if not isinstance(op, Op):
        raise DerivationError(path.stem, f"{path} must define OP = Op(...)")
    problem = identifier_problem(op.name)
    if problem:  # the name becomes <out>/<name>.py and an import name
        raise DerivationError(
            str(op.name), f"in {path}: the op name {problem}; it must name a Python module"
        )
    return dataclasses.replace(op, source=_relative(path))


def _relative(path: Path) -> str:
    # as the user wrote it (make generate passes ops/x.py): stable across machines and checkouts
    return path.as_posix()


@dataclass(frozen=True)
class Emitted:
    """One op through the pipeline: its derivation and the module emitted from it, together,
    so that a reader of both (show, the formulas pages) derives nothing a second time."""

    op: Op
    derivation: Derivation
    data: ModuleData  # every line of the module, lowered
    statements: list[Statement]  # the backward's, as lowered: what each writes and reads

    @functools.cached_property
    def module(self) -> str:
        """The module's text, rendered and black-formatted on first use (``show`` reads only
        the statements, and skips the template and the formatting of the whole module)."""
        return render(self.data)

    @functools.cached_property
    def program(self) -> str:
        """The module's text as rendered, unformatted: the program :attr:`module` lays out."""
        return rendered(self.data)


def emit(op: Op, out_dir: str | Path, stage: Stage = silent) -> Emitted:
    """Derive ``op`` and emit its module (the text ``--out out_dir`` writes); ``stage`` hears
    each stage as it starts (:mod:`derive.progress`)."""
    command = f"python -m derive generate {op.source} --out {Path(out_dir).as_posix()}"
    d = derive(parse(op), stage)
    stage("the backward, lowering")
    data = module_data(d, op.source, command, stage=stage)
    return Emitted(op, d, data, [s for line in data.backward_lines for s in statements(line)])


def module_source(op: Op, out_dir: str | Path) -> str:
    """The generated module for one op, as text."""
    return emit(op, out_dir).module


def module_program(op: Op, out_dir: str | Path) -> str:
    """The generated module for one op, as the template renders it, before black lays it out:
    what a reader that only runs the module loads (the fuzzer: black was two thirds of a case)."""
    return emit(op, out_dir).program


def is_generated(path: Path) -> bool:
    """True when ``path`` is a file this generator wrote: one of its first lines is the whole
    header line (see ``HEADER``)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = [f.readline(4096).rstrip("\r\n") for _ in range(MARKER_LINES)]
    except OSError:
        return False
    return any(HEADER.match(line) for line in head)


def check_writable(path: Path) -> None:
    """Refuse to replace anything but a generated file (an op file, a user's own module)."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise OutputError(f"{path} exists and is not a regular file; refusing to replace it")
    if path.exists() and not is_generated(path):
        raise OutputError(
            f"{path} exists and was not generated by backgen (its first lines are not backgen's "
            f"'# {MARKER} by backgen from ...' header); "
            "refusing to overwrite it: move it or choose another --out"
        )


def output_folder(out_dir: str | Path, create: bool = True) -> Path:
    """``--out`` as a folder, created if missing (with ``create``); an existing file there (or
    above it), an empty name (which would write into the current folder unasked) are errors."""
    if not str(out_dir).strip():
        raise OutputError("--out is empty; name a folder (--out . for the current one)")
    out = Path(out_dir)
    try:
        if out.exists() and not out.is_dir():
            raise OutputError(f"--out {out} is a file; --out names a folder")
        above = next((p for p in out.parents if p.exists()), None)
        if above is not None and not above.is_dir():
            raise OutputError(f"--out {out}: {above} is a file, not a folder")
        if create:
            out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create --out {out}: {exc.strerror or exc}") from None
    return out


def write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` atomically unless ``path`` already holds it; only generated files.

    An OSError (a full disk, a read-only folder, a name too long) is an ``OutputError``
    naming the file; the file as it was stays, and no temporary file is left.
    """
    path = Path(path)
    try:
        check_writable(path)
        if path.exists() and path.read_text(errors="replace") == text:
            return False
        _write_atomically(path, text)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    return True


def _write_atomically(path: Path, text: str) -> None:
    """Write a temporary file beside ``path`` and rename it over ``path``. The temporary file is
    opened as ``open(path, "w")`` would create ``path`` (0o666, less the umask, which the kernel
    applies), not mkstemp's 0o600: a module only its writer could read would not import for
    another user (a container, CI); replacing a file keeps that file's mode."""
    fd, tmp = _temporary(path.parent)
    try:
        if path.exists():
            os.fchmod(fd, stat.S_IMODE(path.stat().st_mode))
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _temporary(folder: Path) -> tuple[int, Path]:
    """A new file in ``folder`` under an unused random name, opened for writing (mkstemp's
    exclusive create, with the default mode)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = folder / f".backgen-{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no unused temporary name in {folder}")


def targets(ops: list[Op], out: Path) -> list[Path]:
    """Each op's module path, after checking that writing them all destroys nothing.

    Checked before anything is derived or written, so a refusal leaves every file as it was.
    """
    seen: dict[str, str] = {}
    sources = {Path(op.source).resolve() for op in ops}
    paths = []
    for op in ops:
        if op.name in seen:
            raise DerivationError(op.name, f"defined twice ({seen[op.name]} and {op.source})")
        seen[op.name] = op.source
        path = out / f"{op.name}.py"
        if path.resolve() in sources:
            raise OutputError(
                f"{path} is an op file given to generate; refusing to overwrite it with the "
                f"generated module: choose another --out"
            )
        try:
            check_writable(path)
        except OSError as exc:  # a name too long for the filesystem, say
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
        paths.append(path)
    return paths


def load_ops(files: list[str]) -> list[Op]:
    """Each op file run, in sorted order: the order modules are derived and written."""
    return [load_op(f) for f in sorted(files)]


def derive_modules(
    files: list[str], out_dir: str, check: bool = False, made: list[Emitted] | None = None
) -> list[tuple[Path, str]]:
    """Each op file's module, ``(path, text)`` in ``out_dir``, every op derived (and with
    ``check`` verified) before :func:`write_files` writes any: an op that fails writes none.

    ``made``: a list to receive each op's :class:`Emitted` (``generate --formulas`` hands them to
    the formulas pages, which then derive nothing).
    """
    out = output_folder(out_dir, create=False)
    ops = load_ops(files)
    modules = []
    for op, path in zip(ops, targets(ops, out)):
        print(f"deriving {op.name} ({op.source})", file=sys.stderr, flush=True)
        emitted = emit(op, out_dir, Stages(op.name))
        if made is not None:
            made.append(emitted)
        if check:
            print(checked_aside(op, emitted.module), file=sys.stderr)
        modules.append((path, emitted.module))
    return modules


def write_files(
    files: list[tuple[Path, str]],
    out_dir: str | Path,
    written: list[tuple[Path, bool]],
    package: bool = False,
) -> None:
    """Create ``out_dir`` and write each ``(path, text)`` that changed (``package``: and
    ``__init__.py``), once every path is known to be one the writer may replace. Each file is
    appended to ``written`` as ``(path, changed)`` when it is done, so whatever stops the
    command can say what it wrote."""
    for path, _ in files:
        try:
            check_writable(path)
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    out = output_folder(out_dir)
    for path, text in files:
        written.append((path, write_if_changed(path, text)))
    if package:
        write_package_init(out)


def write_package_init(out: Path) -> None:
    """``out/__init__.py`` if there is none, so the modules import as a package; one that is
    there (the user's own, maybe) is left as it is."""
    init = out / "__init__.py"
    try:
        if not init.exists():
            init.write_text('"""Modules generated by backgen (python -m derive generate)."""\n')
    except OSError as exc:
        raise OutputError(f"cannot write {init}: {exc.strerror or exc}") from None


def checked_aside(op: Op, text: str) -> str:
    """Check the module ``text`` against autograd from a temporary folder, before it goes to
    ``--out``: one that fails (``CheckFailed``) never replaces the previous good file."""
    from derive.verify.binding import InterpretError
    from derive.verify.check import check_module  # torch is only needed for checking

    with tempfile.TemporaryDirectory(prefix="backgen-check-") as tmp:
        path = Path(tmp) / f"{op.name}.py"
        try:
            path.write_text(text)
        except OSError as exc:
            raise OutputError(f"cannot write {path} to check it: {exc.strerror or exc}") from None
        try:
            return check_module(path, op)
        except InterpretError as exc:  # a construct the independent evaluation lacks
            raise DerivationError(op.name, f"cannot check it: {exc}") from None
