"""IDX files (the MNIST format), read and checked before anything is trained on them.

An IDX file is ``00 00 08 ndim`` (unsigned bytes, ``ndim`` dimensions), then ``ndim`` big-endian
uint32 sizes, then ``prod(sizes)`` bytes, nothing more: labels are ``00000801`` with sizes
``(N,)``, images ``00000803`` with ``(N, rows, cols)``. A file may be gzipped (``.gz``). Every
problem is a ``DataError`` naming the file and what is wrong; no file is ever written here.
"""

from __future__ import annotations

import gzip
import math
import struct
import zlib
from pathlib import Path

import torch

from train.data import DataError
from train.data import read_bytes as read_file

UNSIGNED_BYTE = 0x08
KIND = {1: "labels", 3: "images"}


def read_bytes(path: Path) -> bytes:
    """The file's content, gunzipped when its name ends in .gz."""
    raw = read_file(path, "IDX file")
    if Path(path).suffix != ".gz":
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"{path} is not a readable gzip file: {exc}") from None


def parse_idx(raw: bytes, ndim: int, path: Path) -> torch.Tensor:
    """The uint8 tensor an IDX file holds, after checking its magic number and its size.

    Size: header ``4 + 4*ndim`` bytes plus one byte per element, exactly.
    """
    want = bytes([0, 0, UNSIGNED_BYTE, ndim])
    if raw[:4] != want:
        raise DataError(
            f"{path}: magic number {raw[:4].hex() or '(empty file)'} is not that of an IDX "
            f"{KIND[ndim]} file ({want.hex()})"
        )
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{path}: {len(raw)} bytes, too short for its {header}-byte IDX header")
    sizes = struct.unpack(f">{ndim}I", raw[4:header])
    expected = header + math.prod(sizes)
    if len(raw) != expected:
        raise DataError(
            f"{path}: {len(raw):,} bytes, but its header says {' x '.join(map(str, sizes))} "
            f"= {expected:,} bytes; the file is truncated or not an IDX file"
        )
    if sizes[0] == 0:
        raise DataError(f"{path}: holds no {KIND[ndim]} (its first size is 0)")
    return torch.frombuffer(bytearray(raw[header:]), dtype=torch.uint8).view(*sizes)


def read_idx(path: Path, ndim: int) -> torch.Tensor:
    """Read and check one IDX file of ``ndim`` dimensions (1: labels, 3: images)."""
    return parse_idx(read_bytes(path), ndim, path)


def write_idx(path: Path, values: torch.Tensor) -> Path:
    """Write a uint8 tensor as an IDX file (gzipped for a .gz name): the tests' small data."""
    values = values.to(torch.uint8).contiguous()
    header = bytes([0, 0, UNSIGNED_BYTE, values.dim()]) + struct.pack(
        f">{values.dim()}I", *values.shape
    )
    raw = header + values.numpy().tobytes()
    Path(path).write_bytes(gzip.compress(raw, mtime=0) if Path(path).suffix == ".gz" else raw)
    return Path(path)
