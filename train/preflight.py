"""Checks before a run starts: options that clash, paths a run may not write, memory.

Everything here runs before the first step, so a mistake costs nothing: a run never trains for
minutes and then fails to save, and never replaces a file it did not write (the data, a user's
file given as ``--checkpoint``, ``--metrics`` or ``--out``, a plot of the user's own named
``loss.png``), nor one of its own outputs with another (``--metrics DIR/checkpoint.pt``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import struct
import tempfile
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from train import checkpoint

if TYPE_CHECKING:
    from train.models import ModelSpec

# what a resumed run may change: more steps, or the other (numerically equal) backward
RESUMABLE = {"steps", "backward"}
# `make train` sets this, so hints name what a make user types (TRAIN_ARGS=...), not python
MAKE_ENV = "BACKGEN_MAKE_TARGET"
C = TypeVar("C", bound=Any)  # a run's config dataclass
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# the text chunk every plot a run writes carries (train.report.png_metadata), telling a run's
# loss.png or monitor.png apart from a user's own PNG of the same name
PNG_MARK = "backgen"
NAME_MAX = 255  # bytes in one file name, on Linux's and macOS's filesystems
PATH_FLAGS = (("--out", "out"), ("--checkpoint", "checkpoint"), ("--metrics", "metrics"))


class UsageError(Exception):
    """Options that do not fit together; printed without a traceback."""


def check_options(args: argparse.Namespace) -> None:
    """Flags that contradict each other, and paths of the wrong kind, before anything loads."""
    if args.resume and args.overwrite:
        raise UsageError("--resume continues a run and --overwrite starts it over: give one")
    for flag, name in PATH_FLAGS + (("--data", "data"),):
        value = getattr(args, name, None)
        if value is not None and not value.strip():
            raise UsageError(f"{flag} is empty; give it a path")
        if value and any(len(os.fsencode(part)) > NAME_MAX for part in Path(value).parts):
            raise UsageError(f"{flag} {value}: a name in it is longer than {NAME_MAX} bytes")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; --out names the run's folder")
    check_folder("--out", out, out)
    for flag, value in (("--checkpoint", args.checkpoint), ("--metrics", args.metrics)):
        if value and Path(value).is_dir():
            raise UsageError(f"{flag} {value} is a directory; it names a file")
        if value:
            check_folder(flag, Path(value), Path(value).parent)


def check_folder(flag: str, given: Path, folder: Path) -> None:
    """``folder`` (where ``flag``'s file goes) can be made and written: no file stands where a
    folder must be, and the nearest folder that exists is writable."""
    for above in (folder, *folder.parents):
        try:
            exists = above.exists()
        except OSError as exc:  # a name too long, say
            raise UsageError(f"{flag} {given}: {exc.strerror or exc}") from None
        if not exists:
            continue
        if not above.is_dir():
            raise UsageError(f"{flag} {given}: {above} is a file, not a folder")
        if not os.access(above, os.W_OK | os.X_OK):
            raise UsageError(f"{flag} {given}: cannot write in {above} (permission denied)")
        try:  # access() says yes to root everywhere: a file made and dropped at once tells
            with tempfile.TemporaryFile(dir=above):  # (a read-only mount, /sys; found by
                pass  # probing: refused only after every step had run)
        except OSError as exc:
            why = exc.strerror or exc
            raise UsageError(f"{flag} {given}: cannot write in {above} ({why})") from None
        return


def command(args: argparse.Namespace, flags: str, spec: ModelSpec, prog: str = "") -> str:
    """How to run the model again with ``flags``: the make line under ``make TARGET`` (its
    options variable; make passes --data itself, --out only when the user did), else the
    python one (``prog``: how this run was started, by default ``spec.prog``)."""
    where = f" --checkpoint {args.checkpoint}" if args.checkpoint else ""
    target, variable = spec.make
    if os.environ.get(MAKE_ENV) == target:
        where = (f" --out {args.out}" if args.out != spec.out else "") + where
        return f"make {target} {variable}={shlex.quote(flags + where)}"
    return f"{prog or spec.prog} {flags} --out {args.out}{where}"


def check_new_run(
    args: argparse.Namespace, ckpt: Path, spec: ModelSpec, reports: tuple[Path, ...] = ()
) -> None:
    """A new run may replace only a backgen checkpoint, and only when told to (--overwrite);
    likewise an earlier run's report in ``--out`` (``reports``: its metrics.json and plot),
    which a new run with its ``--checkpoint`` elsewhere replaced without a word while the
    folder's checkpoint stayed the earlier run's (found by probing)."""
    if not ckpt.exists():
        earlier = [p for p in reports if p.exists()]
        if earlier and not args.overwrite:
            overwrite = command(args, "--overwrite", spec)
            raise UsageError(
                f"{earlier[0]} is an earlier run's report; start over with `{overwrite}`, "
                "or pick another --out"
            )
        return
    if not checkpoint.is_checkpoint(ckpt):
        raise UsageError(
            f"{ckpt} exists and is not a backgen training checkpoint; refusing to replace it "
            "(--overwrite replaces only checkpoints): choose another --out or --checkpoint"
        )
    if not args.overwrite:
        resume, overwrite = command(args, "--resume", spec), command(args, "--overwrite", spec)
        raise UsageError(
            f"{ckpt} already holds a training run; continue it with `{resume}`, start over "
            f"with `{overwrite}`, or pick another --out"
        )


def check_outputs(paths: dict[str, Path]) -> None:
    """metrics JSON and loss.png (monitor.png) replace only what an earlier run wrote there: a
    metrics file with the run's keys, a PNG carrying the run's mark (``PNG_MARK``). ``paths``:
    each output by what sets it (``--metrics``, or a name inside ``--out``)."""
    for what, path in paths.items():
        flag = what if what.startswith("--") else "--out"
        if not path.exists():
            continue
        if path.is_dir() or path.is_symlink():
            raise UsageError(f"{path} exists and is not a regular file; refusing to replace it")
        ours = png_has_mark(path) if path.suffix == ".png" else _is_metrics(path)
        if not ours:
            kind = "a PNG without backgen's mark" if path.suffix == ".png" else "not run metrics"
            raise UsageError(
                f"{path} exists and was not written by a training run ({kind}); "
                f"refusing to replace it: move it or pick another {flag}"
            )


def png_has_mark(path: Path) -> bool:
    """True for a PNG whose text chunks (before its image data) hold ``PNG_MARK``."""
    try:
        with open(path, "rb") as f:
            if f.read(len(PNG_SIGNATURE)) != PNG_SIGNATURE:
                return False
            while header := f.read(8):
                if len(header) < 8:
                    return False
                length, kind = struct.unpack(">I4s", header)
                if kind in (b"IDAT", b"IEND"):
                    return False
                body = f.read(length)
                f.seek(4, os.SEEK_CUR)  # the chunk's CRC
                if kind == b"tEXt" and body.split(b"\0", 1)[0] == PNG_MARK.encode():
                    return True
    except OSError:
        return False
    return False


def check_distinct(outputs: dict[str, Path], data: str | None = None) -> None:
    """Every output of a run has a path of its own, and none is the data it reads.

    ``outputs`` names each path (``"--checkpoint X"``, ``"the run's metrics.json"``);
    ``--metrics`` naming the run's own metrics.json is the same file written twice: allowed.
    """
    seen: dict[str, str] = {}
    for what, path in outputs.items():
        key = os.path.realpath(path)
        if key in seen and {what, seen[key]} != {"--metrics", "metrics.json"}:
            raise UsageError(
                f"{_named(what, path)} is also {_named(seen[key], outputs[seen[key]])}; "
                "refusing to write one over the other: give each output a path of its own"
            )
        seen.setdefault(key, what)
    if data and os.path.realpath(data) in seen:
        which = seen[os.path.realpath(data)]
        raise UsageError(
            f"--data {data} is also {_named(which, outputs[which])}, which the run writes; "
            "refusing to replace the data"
        )


def _named(what: str, path: Path) -> str:
    return f"{what} {path}" if what.startswith("--") else f"the run's {what} ({path})"


def run_outputs(args: argparse.Namespace, ckpt: Path, figure: str) -> dict[str, Path]:
    """What a run writes, named as ``check_distinct`` reports them."""
    out = Path(args.out)
    outputs = {"--checkpoint": ckpt, "metrics.json": out / "metrics.json", figure: out / figure}
    if args.metrics:
        outputs["--metrics"] = Path(args.metrics)
    return outputs


def check_run_paths(args: argparse.Namespace, ckpt: Path, figure: str) -> None:
    """Before anything loads: outputs distinct from each other and from ``--data``, and each
    either absent or a file an earlier run wrote (the checkpoint is checked by its caller)."""
    outputs = run_outputs(args, ckpt, figure)
    check_distinct(outputs, getattr(args, "data", None))
    check_outputs({what: path for what, path in outputs.items() if what != "--checkpoint"})


def _is_metrics(path: Path) -> bool:
    try:
        metrics = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(metrics, dict) and "data_sha256" in metrics


def available_bytes() -> int | None:
    """Memory the OS can give without swapping (Linux MemAvailable); None when unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits(need: int, what: str, advice: str, purpose: str = "one step") -> None:
    """UsageError when ``need`` bytes (an estimate) exceed the memory available now."""
    have = available_bytes()
    if have is not None and need > have:
        raise UsageError(
            f"{what} needs about {need / 2**30:.1f} GiB for {purpose} (an estimate), more than "
            f"the {have / 2**30:.1f} GiB of memory available; {advice}"
        )


def check_numbers(config: Any) -> None:
    """Every float option finite, not negative and within the run's dtype (``--lr 1e308``
    overflows a float32 update inside the optimizer): one line before the first step."""
    biggest = torch.finfo(config.torch_dtype).max
    for f in fields(config):
        value = getattr(config, f.name)
        if not isinstance(f.default, float) or isinstance(value, bool):
            continue
        flag = "--" + f.name.replace("_", "-")
        if not (math.isfinite(value) and 0 <= value <= biggest):
            raise UsageError(
                f"{flag} must be a finite number from 0 to {biggest:.3g} (the largest "
                f"{config.dtype}), got {value:g}"
            )
    if config.lr * getattr(config, "weight_decay", 0.0) > biggest:  # AdamW's p *= 1 - lr*wd
        raise UsageError(
            f"--lr {config.lr:g} times --weight-decay {config.weight_decay:g} overflows "
            f"{config.dtype}; use smaller ones"
        )


def given_options(args: argparse.Namespace, config_class: type) -> dict:
    """The run options given on this command line (argparse defaults them to None; a field
    no option sets, as ``decay_at``, is never given)."""
    given = {f.name: getattr(args, f.name, None) for f in fields(config_class)}
    return {k: v for k, v in given.items() if v is not None}


def resolve(config_class: type[C], given: dict, saved: dict | None) -> C:
    """Options given now over the checkpoint's (``saved``, when resuming) over the defaults."""
    if saved is None:
        return config_class(**given)
    return resume_config(config_class.from_dict(saved["config"]), given, saved["step"])


def resume_config(config: C, given: dict, step: int) -> C:
    """The checkpoint's ``config`` with what ``RESUMABLE`` lets a resumed run change: any other
    option given with another value is refused, as is a step count below the checkpoint's. A
    run past its lr's drop that extends its steps keeps the drop where it was: recomputed as
    half the new steps, it put the lr back up ten times (found by probing: 3,000 steps
    extended to 8,000 ran steps 3,000 to 4,000 at 0.1 again)."""
    clash = [k for k, v in given.items() if k not in RESUMABLE and v != getattr(config, k)]
    if clash:
        was = ", ".join(f"--{k.replace('_', '-')} {getattr(config, k)}" for k in clash)
        raise UsageError(f"the checkpoint's run used {was}; drop those options to resume it")
    dropped = step >= config.decay_step and not config.decay_at  # its lr is lr / 10 already
    kept = {"decay_at": config.decay_step} if dropped and "steps" in given else {}
    config = replace(config, **{k: v for k, v in given.items() if k in RESUMABLE}, **kept)
    if config.steps < step:
        raise UsageError(f"the checkpoint is at step {step}, past --steps {config.steps}")
    return config
