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

from train.model import ModelShape, param_shapes

FORMAT = "backgen-train/1"
REQUIRED = ("config", "chars", "step", "params", "optimizer", "generator", "losses", "bn_stats")


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


def save(path: Path, payload: dict) -> None:
    """Write ``payload`` with its digest to ``path`` atomically (temp file + fsync + replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"format": FORMAT, **payload}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
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
    required: tuple[str, ...],
    check: Callable[[Path, dict], None] | None = None,
) -> dict:
    """A checkpoint of ``model`` (None: the MLP's, which predates the key) with every
    ``required`` key, passing ``check`` (parameter shapes, say), then its contents checked
    against the sha256 digest ``save`` stored in it."""
    payload = read(path)
    if payload.get("model") != model:
        what = f"a {model}" if model else "an MLP"
        raise CheckpointError(
            f"{path} is not {what} checkpoint (it is the {payload.get('model') or 'MLP'}'s: "
            "give its --model)"
        )
    missing = [key for key in required if key not in payload]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {', '.join(missing)}")
    check_types(path, payload, DATA_KEYS.get(model, ()))
    if check is not None:
        check(path, payload)
    stored = payload.pop("sha256", None)
    if stored is None:
        raise CheckpointError(f"checkpoint {path} has no checksum; refusing unverified contents")
    if stored != content_digest(payload):
        raise CheckpointError(
            f"checkpoint {path} is damaged: its contents do not match its sha256 checksum"
        )
    return payload


# what each field of any model's checkpoint holds, where present (None: may be None)
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "config": (dict,),
    "chars": (str,),
    "step": (int,),
    "params": (dict,),
    "optimizer": (dict,),
    "generator": (torch.Tensor,),
    "losses": (torch.Tensor,),
    "accs": (torch.Tensor,),
    "seconds": (int, float),
    "data": (dict,),
    "bn_stats": (dict, type(None)),
    "history": (list,),
    "monitor_every": (int,),
    "block_size": (int,),
}


# what each model's ``data`` field records of the data it trained on
DATA_KEYS = {None: ("path", "sha256"), "gpt": ("path", "sha256")}
DATA_KEYS["classifier"] = ("name", "source", "sha256")


def check_types(path: Path, payload: dict, data_keys: tuple[str, ...] = ()) -> None:
    """Each field of the type ``save`` wrote (a field of the wrong type, stored with a digest
    that matches it, would otherwise fail steps later as a KeyError or TypeError)."""
    for key, types in FIELD_TYPES.items():
        value = payload.get(key, ...)
        if value is ... or (isinstance(value, types) and not isinstance(value, bool)):
            continue
        raise CheckpointError(
            f"checkpoint {path}: field {key} is {type(value).__name__}, not "
            f"{' or '.join('None' if t is type(None) else t.__name__ for t in types)}"
        )
    data = payload.get("data", {})
    if not all(isinstance(data.get(k), str) for k in data_keys if "data" in payload):
        raise CheckpointError(f"checkpoint {path}: field data lacks its {', '.join(data_keys)}")
    if payload.get("step", 0) < 0:
        raise CheckpointError(f"checkpoint {path}: field step is negative")


def load(path: Path) -> dict:
    """Read an MLP checkpoint written by ``save``: keys, parameter shapes, then the digest."""
    return verified(path, None, REQUIRED, check_params)


def check_params(path: Path, payload: dict) -> None:
    """Every parameter present with the shape the stored config and vocabulary give it."""
    config, params = payload["config"], payload["params"]
    try:
        shape = ModelShape(
            len(payload["chars"]), config["block_size"], config["n_embd"], config["n_hidden"]
        )
    except (KeyError, TypeError):
        raise CheckpointError(f"checkpoint {path} has no usable config") from None
    check_shapes(path, params, param_shapes(shape))


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
