"""What the training tests share: small data they write themselves, ``python -m train`` run
in-process, and checkpoints read back."""

from __future__ import annotations

import contextlib
import io
import random
from pathlib import Path

import torch

from train.cli import main
from train.models.classifier_idx import write_idx

REPO = Path(__file__).resolve().parents[2]
# a small MLP that learns the words in a few hundred steps
MLP_SMALL = ["--n-embd", "4", "--n-hidden", "16", "--batch-size", "16", "--checkpoint-every", "100"]


def write_words(path: Path, count: int = 400, seed: int = 0) -> Path:
    """Name-like words from consonant-vowel syllables: learnable structure, 20 symbols."""
    rng = random.Random(seed)
    words = []
    for _ in range(count):
        syllables = "".join(rng.choice("bdfklmnprstv") + rng.choice("aeiou") for _ in range(3))
        words.append(syllables[: rng.randint(2, 6)] + rng.choice(["", "n", "s"]))
    path.write_text("\n".join(words) + "\n")
    return path


def make_images(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """n 6x6 uint8 images: a fixed prototype per class plus noise: something to learn."""
    protos = torch.rand((10, 6, 6), generator=torch.Generator().manual_seed(0)) * 200
    labels = torch.arange(n) % 10
    noise = torch.rand((n, 6, 6), generator=g) * 55
    return (protos[labels] + noise).to(torch.uint8), labels.to(torch.uint8)


def write_folder(folder: Path, n_train: int = 120, n_test: int = 40, gz: bool = False) -> Path:
    """The four MNIST names with small made-up content (so their sha256 is not MNIST's)."""
    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(1)
    suffix = ".gz" if gz else ""
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images, labels = make_images(n, g)
        write_idx(folder / f"{prefix}-images-idx3-ubyte{suffix}", images)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte{suffix}", labels)
    return folder


def train_cli(*argv: str) -> tuple[int, str, str]:
    """``python -m train ARGV`` in-process; returns (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def load(path: Path) -> dict:
    return torch.load(path, weights_only=True)


def max_param_diff(a: dict, b: dict) -> float:
    return max((a["params"][k] - b["params"][k]).abs().max().item() for k in a["params"])
