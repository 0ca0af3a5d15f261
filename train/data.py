"""The names data: find or download the word list, build the vocabulary, split, make examples.

The split and the MLP's examples follow the seed exactly (``random.seed(42)``, shuffle,
80/10/10, contexts of ``block_size`` previous characters padded with '.') so that the default
run is comparable with the seed's numbers: 182,625 / 22,655 / 22,866 examples for block_size 3.

The GPT reads the same words, vocabulary and split as makemore's GPT does: one padded sequence
per word, so its test loss is over the same test words and the same predictions (every
character of a word and the end token, each from all the characters before it). Word ``emma``
with block size 6 is

    x = [0, e, m, m, a, 0]      (0 is '.', the start token, then padding)
    y = [e, m, m, a, 0, -1]     (0 ends the word; -1 marks padding, ignored by the loss)

as makemore's ``CharDataset``; the block size is the longest word's length + 1.
"""

from __future__ import annotations

import hashlib
import os
import random
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

NAMES_URL = "https://raw.githubusercontent.com/karpathy/makemore/master/names.txt"
NAMES_SHA256 = "0a30b5557f192f32ab962680889aac5f6fda0f4cecf40a6d0b5694f58ea8cc4d"
DATA_ENV = "BACKGEN_DATA"
# data/ under the repository root; git-ignored, so the download never ends up in a commit.
CACHE_DIR = Path(__file__).resolve().parent.parent / "data"
BOUNDARY = "."  # start padding and end-of-word token, always index 0
IGNORE = -1  # the GPT's target of a padding position: F.cross_entropy(ignore_index=-1)


class DataError(Exception):
    """A data problem the user can fix; the CLI prints the message without a traceback."""


@dataclass
class Splits:
    """Inputs and targets of the three splits, and what they were read from: every model's data.

    A checkpoint records ``source`` and ``sha256``; a resumed run must read the same ``sha256``.
    """

    X_train: torch.Tensor
    Y_train: torch.Tensor
    X_val: torch.Tensor
    Y_val: torch.Tensor
    X_test: torch.Tensor
    Y_test: torch.Tensor
    source: str
    sha256: str

    def splits(self) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Inputs and targets by split name."""
        return {
            "train": (self.X_train, self.Y_train),
            "val": (self.X_val, self.Y_val),
            "test": (self.X_test, self.Y_test),
        }


@dataclass
class Contexts(Splits):
    """The MLP's examples and the vocabulary; ``chars[i]`` is the symbol with index i."""

    chars: str


@dataclass
class Sequences(Splits):
    """The GPT's: X, Y are (words, block_size) int64; ``chars[i]`` is the symbol with index i."""

    chars: str
    block_size: int


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download(url: str, dest: Path, sha256: str) -> Path:
    """Fetch ``url`` to ``dest``, keeping it only if its sha256 matches (no half files left)."""
    tmp = dest.with_name(dest.name + ".part")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(url, timeout=30) as response:
            tmp.write_bytes(response.read())
    except (urllib.error.URLError, OSError) as exc:
        tmp.unlink(missing_ok=True)
        raise DataError(
            f"could not download {url}: {exc}\n"
            f"Pass a local copy with --data PATH (or set {DATA_ENV}=PATH)."
        ) from None
    actual = sha256_of(tmp)
    if actual != sha256:
        tmp.unlink()
        raise DataError(
            f"downloaded {url} but its sha256 is {actual}, expected {sha256}; "
            "refusing to use it. Pass a trusted copy with --data PATH."
        )
    os.replace(tmp, dest)
    return dest


def local_names(cache_dir: Path) -> Path:
    """The names data beside the checkout, where the Makefile looks for it first
    (``../shared/data/names.txt`` from the checkout, whose ``data/`` is ``cache_dir``)."""
    return cache_dir.parent.parent / "shared" / "data" / "names.txt"


def names_path(given: str | None, saved: dict | None) -> Path:
    """The words a run reads: ``--data``, else a resumed run's own file while it is still
    there, else ``resolve_data_path``'s search."""
    stored = saved["data"]["path"] if saved else None
    return resolve_data_path(given or (stored if stored and Path(stored).is_file() else None))


def resolve_data_path(path: str | None, cache_dir: Path | None = None) -> Path:
    """The file to read: ``--data``, else $BACKGEN_DATA, else the local names data the Makefile
    passes (``local_names``), else the verified names download."""
    given = path or os.environ.get(DATA_ENV)
    if given:
        return Path(given)
    cache_dir = cache_dir or CACHE_DIR
    local = local_names(cache_dir)
    if local.is_file():
        print(f"data: {local} (the local names data; --data PATH for another file)")
        return local
    cached = cache_dir / "names.txt"
    if cached.is_file() and sha256_of(cached) == NAMES_SHA256:
        return cached
    print(f"downloading {NAMES_URL} to {cached}")
    return download(NAMES_URL, cached, NAMES_SHA256)


def read_bytes(path: Path, what: str) -> bytes:
    """A file's bytes; a missing or unreadable one is a DataError naming it as ``what``."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise DataError(f"{what} not found: {path}") from None
    except OSError as exc:
        raise DataError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def read_words(path: Path) -> list[str]:
    """One word per line; blank lines are skipped. Missing, binary or empty files are errors."""
    raw = read_bytes(path, "data file")
    if b"\x00" in raw:
        raise DataError(f"{path} looks binary (it contains NUL bytes); expected one word per line")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path} is not UTF-8 text (byte {exc.start}); expected one word per line"
        ) from None
    words = [line.strip() for line in text.splitlines()]
    words = [w for w in words if w]
    if not words:
        raise DataError(f"{path} is empty: expected one word per line")
    for number, word in enumerate(words, start=1):
        if BOUNDARY in word:
            raise DataError(
                f"{path}: word {number} ({word!r}) contains {BOUNDARY!r}, "
                "which is reserved for the start/end of a word"
            )
    return words


def build_vocab(words: list[str]) -> str:
    """'.' first, then the sorted characters of the words: the seed's stoi/itos as one string."""
    return BOUNDARY + "".join(sorted(set("".join(words))))


def split_words(words: list[str], seed: int = 42) -> tuple[list[str], list[str], list[str]]:
    """Shuffle a copy as ``random.seed(seed); random.shuffle(words)`` does and cut 80/10/10.

    A private ``random.Random(seed)`` draws the same permutation without touching the global
    random state of whoever imports us.
    """
    words = list(words)
    random.Random(seed).shuffle(words)
    n1, n2 = int(0.8 * len(words)), int(0.9 * len(words))
    parts = words[:n1], words[n1:n2], words[n2:]
    if not all(parts):
        raise DataError(
            f"{len(words)} {'word is' if len(words) == 1 else 'words are'} too few for an "
            "80/10/10 split with every part non-empty; use at least 10 words"
        )
    return parts


def build_examples(
    words: list[str], chars: str, block_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every (previous block_size characters -> next character) pair, '.'-padded at the start."""
    stoi = {ch: i for i, ch in enumerate(chars)}
    X, Y = [], []
    for word in words:
        context = [0] * block_size
        for ch in word + BOUNDARY:
            X.append(context)
            Y.append(stoi[ch])
            context = context[1:] + [stoi[ch]]
    return torch.tensor(X, dtype=torch.long).view(-1, block_size), torch.tensor(Y)


def encode_splits(
    words: list[str], encode: Callable[[list[str]], tuple[torch.Tensor, torch.Tensor]]
) -> list[torch.Tensor]:
    """X_train, Y_train, X_val, Y_val, X_test, Y_test: ``encode`` of each split's words."""
    return [tensor for part in split_words(words) for tensor in encode(part)]


def load_contexts(path: Path, block_size: int) -> Contexts:
    """Read, build the vocabulary from the whole file, split and make the three example sets."""
    words = read_words(path)
    chars = build_vocab(words)
    splits = encode_splits(words, lambda part: build_examples(part, chars, block_size))
    return Contexts(*splits, source=str(path), sha256=sha256_of(path), chars=chars)


def encode(words: list[str], chars: str, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The GPT's inputs and targets of every word (see the module docstring)."""
    stoi = {ch: i for i, ch in enumerate(chars)}
    X = torch.zeros(len(words), block_size, dtype=torch.long)
    Y = torch.full((len(words), block_size), IGNORE, dtype=torch.long)
    for i, word in enumerate(words):
        ix = torch.tensor([stoi[ch] for ch in word], dtype=torch.long)
        X[i, 1 : 1 + len(ix)] = ix
        Y[i, : len(ix)] = ix
        Y[i, len(ix)] = 0
    return X, Y


def load_sequences(path: Path) -> Sequences:
    """Read, build the vocabulary from the whole file, split the words and encode the splits."""
    words = read_words(path)
    chars = build_vocab(words)
    block_size = max(len(w) for w in words) + 1
    splits = encode_splits(words, lambda part: encode(part, chars, block_size))
    return Sequences(*splits, str(path), sha256_of(path), chars, block_size)
