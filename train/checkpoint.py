"""Checkpoint files: atomic, checksummed, readable with ``torch.load(weights_only=True)``.

A checkpoint is a plain dict of tensors, ints, floats, strings, lists and dicts (no pickled
classes), so loading one never runs code. It is written to a temporary file in the same folder
and moved over the old one with ``os.replace``, so a crash or Ctrl-C mid-write leaves the
previous checkpoint intact.

Every checkpoint carries ``sha256``, a digest of its contents (keys in sorted order; each
tensor's dtype, shape and bytes; every other value's repr), not of the file's bytes: the zip
container torch writes does not check its own data, so a flipped byte in a tensor would load
silently. ``load`` recomputes the digest and refuses a checkpoint whose contents changed.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import torch

FORMAT = "backgen-train/1"
# what every model's checkpoint holds (``train.engine.state_payload``, and ``data``: what the run
# read); a model's spec adds its own keys (``ModelSpec.fields``)
REQUIRED = ("config", "data", "step", "params", "optimizer", "generator", "losses")
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "config": (dict,),
    "data": (dict,),
    "step": (int,),
    "params": (dict,),
    "optimizer": (dict,),
    "generator": (torch.Tensor,),
    "losses": (torch.Tensor,),
    "seconds": (int, float),  # not required: a checkpoint may predate it
}


class CheckpointError(Exception):
    """A checkpoint that is missing, unreadable or not ours; the CLI prints the message."""


def content_digest(value: object) -> str:
    """sha256 over a payload's contents, independent of how torch serialises them."""
    digest = hashlib.sha256()
    _feed(digest, value)
    return digest.hexdigest()


def _feed(digest: Any, value: object) -> None:
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        digest.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(value, dict):
        digest.update(f"D{len(value)}".encode())
        for key in sorted(value, key=repr):  # optimizer state has int keys beside str ones
            digest.update(repr(key).encode())
            _feed(digest, value[key])
    elif isinstance(value, list | tuple):
        digest.update(f"L{len(value)}".encode())
        for item in value:
            _feed(digest, item)
    else:
        digest.update(f"V{value!r}".encode())


def new_file_mode(path: Path) -> int:
    """The permissions of a file written over ``path``: its own where it exists (a user's chmod
    is kept), else what the umask gives a new file (mkstemp's 0600 hid every checkpoint from
    other users and reset a chmod at each save; found by probing)."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def save(path: Path, payload: dict) -> None:
    """Write ``payload`` with its digest to ``path`` atomically (temp file + fsync + replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"format": FORMAT, **payload}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        os.chmod(tmp, new_file_mode(path))
        with os.fdopen(fd, "wb") as f:
            torch.save({**body, "sha256": content_digest(body)}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:  # a full disk: named by the checkpoint, not the temporary file
        Path(tmp).unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read(path: Path) -> dict:
    """The raw payload of a backgen checkpoint, unverified (see ``load``)."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"{path} is a directory, not a checkpoint file")
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    try:
        payload = torch.load(path, weights_only=True)
    except pickle.UnpicklingError:  # torch's own text for it is seven lines of advice
        raise CheckpointError(
            f"cannot read checkpoint {path}: it holds more than tensors and plain values "
            "(torch.load(weights_only=True) refuses it), or it is damaged"
        ) from None
    except Exception as exc:  # torch raises several types for a damaged or foreign file
        raise CheckpointError(
            f"cannot read checkpoint {path}: it is damaged or not a torch file "
            f"({type(exc).__name__}: {first_line(exc)})"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a backgen training checkpoint")
    return payload


def first_line(exc: BaseException) -> str:
    """An exception's message as one short line: its first sentence (torch's run on)."""
    text = (str(exc).strip().splitlines() or [""])[0].strip()
    text = text.split(". ", 1)[0]
    return text if len(text) <= 160 else text[:157] + "..."


T = TypeVar("T")


def usable(path: Path, build: Callable[[], T], saved: object = True) -> T:
    """``build()`` from a checkpoint's fields (a run restored, names sampled); a field of the
    wrong type or shape, which the digest cannot catch when it was stored so, is one line.
    ``saved`` None: nothing came from a checkpoint, so nothing is caught."""
    if saved is None:
        return build()
    try:
        return build()
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError) as exc:
        raise CheckpointError(
            f"checkpoint {path} has a field of the wrong type or shape "
            f"({type(exc).__name__}: {first_line(exc)})"
        ) from None


def is_checkpoint(path: Path) -> bool:
    """True for a file ``save`` wrote (damaged or not): the only kind a run may replace."""
    try:
        read(path)
    except CheckpointError:
        return False
    return True


def verified(
    path: Path,
    model: str | None,
    fields: dict[str, tuple[type, ...]],
    data_keys: tuple[str, ...],
    check: Callable[[Path, dict], None],
) -> dict:
    """A checkpoint of ``model`` (None: the MLP's, which predates the key) with every shared
    key and ``fields`` (the model's own, with their types; None among them: may be None), its
    ``data`` recording ``data_keys``, passing ``check`` (parameter shapes), then its contents
    checked against the sha256 digest ``save`` stored in it."""
    payload = read(path)
    if payload.get("model") != model:
        what = f"a {model}" if model else "an MLP"
        raise CheckpointError(
            f"{path} is not {what} checkpoint (it is the {payload.get('model') or 'MLP'}'s: "
            "give its --model)"
        )
    missing = [key for key in (*REQUIRED, *fields) if key not in payload]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {', '.join(missing)}")
    check_types(path, payload, {**FIELD_TYPES, **fields}, data_keys)
    check(path, payload)
    stored = payload.pop("sha256", None)
    if stored is None:
        raise CheckpointError(f"checkpoint {path} has no checksum; refusing unverified contents")
    if stored != content_digest(payload):
        raise CheckpointError(
            f"checkpoint {path} is damaged: its contents do not match its sha256 checksum"
        )
    return payload


def check_types(
    path: Path, payload: dict, types: dict[str, tuple[type, ...]], data_keys: tuple[str, ...]
) -> None:
    """Each field of the type ``save`` wrote (a field of the wrong type, stored with a digest
    that matches it, would otherwise fail steps later as a KeyError or TypeError)."""
    for key, allowed in types.items():
        value = payload.get(key, ...)
        if value is ... or (isinstance(value, allowed) and not isinstance(value, bool)):
            continue
        raise CheckpointError(
            f"checkpoint {path}: field {key} is {type(value).__name__}, not "
            f"{' or '.join('None' if t is type(None) else t.__name__ for t in allowed)}"
        )
    if not all(isinstance(payload["data"].get(k), str) for k in data_keys):
        raise CheckpointError(f"checkpoint {path}: field data lacks its {', '.join(data_keys)}")
    if payload["step"] < 0:
        raise CheckpointError(f"checkpoint {path}: field step is negative")


def check_shapes(path: Path, params: object, shapes: dict[str, tuple[int, ...]]) -> None:
    """Every parameter of ``shapes`` present in ``params`` with its shape."""
    for name, expected in shapes.items():
        got = params.get(name) if isinstance(params, dict) else None
        if not isinstance(got, torch.Tensor):
            raise CheckpointError(f"checkpoint {path} has no parameter {name}")
        if tuple(got.shape) != expected:
            raise CheckpointError(
                f"checkpoint {path}: parameter {name} has shape {tuple(got.shape)}, but its "
                f"config needs {expected}"
            )
