"""The classifier's data: MNIST (a local copy or a verified download) or scikit-learn's digits.

Where the images come from, in order: ``--data digits`` (the 8x8 digits scikit-learn ships,
1,797 images); ``--data DIR`` or ``$BACKGEN_MNIST`` (the four MNIST IDX files, raw or .gz, each
checked against its published sha256 unless ``--no-verify``); a verified copy in data/mnist/;
a download into data/mnist/. With none of these (no copy, no network) it says so and falls back
to the digits, so the command works anywhere.

Splits are fixed by ``SPLIT_SEED``: the digits are shuffled once and cut 70/15/15; MNIST keeps
its 10,000 test images and takes a random 1/12 of its training images (5,000) for validation.
Pixels are scaled to [0, 1] and standardised with the training split's mean and std.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from train.data import DataError, Splits, download, sha256_of
from train.models.classifier_idx import read_idx

N_CLASSES = 10
SPLIT_SEED = 42
DIGITS = "digits"
MNIST_ENV = "BACKGEN_MNIST"
MNIST_URL = "https://storage.googleapis.com/cvdf-datasets/mnist"  # TensorFlow's mirror
CACHE_DIR = Path(__file__).resolve().parents[2] / "data" / "mnist"  # git-ignored


@dataclass(frozen=True)
class MnistFile:
    """One of the four files, with the sha256 of its raw and of its gzipped form."""

    split: str
    name: str
    ndim: int
    sha256: str
    sha256_gz: str


MNIST_FILES = (
    MnistFile(
        "train",
        "train-images-idx3-ubyte",
        3,
        "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
        "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    ),
    MnistFile(
        "train",
        "train-labels-idx1-ubyte",
        1,
        "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
        "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    ),
    MnistFile(
        "test",
        "t10k-images-idx3-ubyte",
        3,
        "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
        "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    ),
    MnistFile(
        "test",
        "t10k-labels-idx1-ubyte",
        1,
        "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
        "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
    ),
)


@dataclass
class Images(Splits):
    """Flattened, standardised images (float32) and int64 labels for the three splits;
    ``name``: digits, mnist, or idx (IDX files that are not MNIST's)."""

    name: str
    image_shape: tuple[int, int]

    @property
    def n_features(self) -> int:
        return self.X_train.shape[1]


def standardise(splits: list[torch.Tensor], scale: float) -> list[torch.Tensor]:
    """x / scale, then (x - mean) / std with the first (training) split's scalar mean and std."""
    scaled = [s.to(torch.float32).flatten(1) / scale for s in splits]
    mean, std = scaled[0].mean(), scaled[0].std()
    return [(s - mean) / std for s in scaled]


def shuffled(n: int) -> torch.Tensor:
    """The fixed permutation every split is cut from."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(SPLIT_SEED))


def load_digits() -> Images:
    """scikit-learn's 8x8 digits (pixels 0..16), shuffled once and cut 70/15/15."""
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError:
        raise DataError(
            "scikit-learn is not installed (pip install scikit-learn), and it holds the bundled "
            "digits; or pass MNIST with --data DIR"
        ) from None
    bunch = sklearn_digits()
    images = torch.tensor(bunch.images, dtype=torch.float32)
    labels = torch.tensor(bunch.target, dtype=torch.int64)
    digest = hashlib.sha256(images.numpy().tobytes() + labels.numpy().tobytes()).hexdigest()
    order = shuffled(len(labels))
    n1, n2 = int(0.7 * len(order)), int(0.85 * len(order))
    parts = order[:n1], order[n1:n2], order[n2:]
    X = standardise([images[p] for p in parts], 16.0)
    source = "scikit-learn's bundled 8x8 digits"
    Y = [labels[p] for p in parts]
    return Images(X[0], Y[0], X[1], Y[1], X[2], Y[2], source, digest, DIGITS, (8, 8))


def find_file(folder: Path, spec: MnistFile) -> tuple[Path, str]:
    """The raw or gzipped copy of one MNIST file in ``folder``, and the sha256 it must have."""
    for path, sha in (
        (folder / spec.name, spec.sha256),
        (folder / f"{spec.name}.gz", spec.sha256_gz),
    ):
        if path.is_file():
            return path, sha
    raise DataError(
        f"{folder} has no {spec.name} (or {spec.name}.gz); --data DIR needs the four MNIST IDX "
        f"files: {', '.join(f.name for f in MNIST_FILES)}"
    )


def read_split(folder: Path, split: str, verify: bool) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Images and labels of MNIST's train or test files, checked; also their sha256s, joined."""
    found = [(spec, *find_file(folder, spec)) for spec in MNIST_FILES if spec.split == split]
    (_, img_path, _), (_, lbl_path, _) = found
    images, labels = read_idx(img_path, 3), read_idx(lbl_path, 1)
    if len(labels) != len(images):
        raise DataError(
            f"{lbl_path} has {len(labels):,} labels but {img_path} {len(images):,} images"
        )
    if int(labels.max()) >= N_CLASSES:
        bad = int(torch.nonzero(labels >= N_CLASSES)[0])
        raise DataError(
            f"{lbl_path}: label {int(labels[bad])} at index {bad} is outside 0..{N_CLASSES - 1}"
        )
    digests = []
    for spec, path, want in found:
        digests.append(sha256_of(path))
        if verify and digests[-1] != want:
            raise DataError(
                f"{path}: sha256 {digests[-1]} is not MNIST's {spec.name} ({want}); not using it "
                "(--no-verify trains on IDX files that are not MNIST)"
            )
    return images, labels.to(torch.int64), "".join(digests)


def load_idx_folder(folder: Path, verify: bool = True) -> Images:
    """MNIST (or any IDX files of the same names): test is t10k; 1/12 of train validates."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"--data {folder}: not a folder (give the folder holding the IDX files)")
    train_images, train_labels, train_sha = read_split(folder, "train", verify)
    test_images, test_labels, test_sha = read_split(folder, "test", verify)
    order = shuffled(len(train_labels))
    n_val = max(1, round(len(order) / 12))
    if len(order) - n_val < 1:
        raise DataError(
            f"{folder}: {len(order)} training images are too few to split off validation"
        )
    fit, val = order[:-n_val], order[-n_val:]
    X = standardise([train_images[fit], train_images[val], test_images], 255.0)
    digest = hashlib.sha256((train_sha + test_sha).encode()).hexdigest()
    name = "mnist" if verify else "idx"
    shape = tuple(train_images.shape[1:])
    Y = (train_labels[fit], train_labels[val], test_labels)
    return Images(X[0], Y[0], X[1], Y[1], X[2], Y[2], str(folder), digest, name, shape)


def download_mnist(folder: Path) -> Path:
    """The four gzipped files into ``folder``, each kept only if its sha256 matches."""
    for spec in MNIST_FILES:
        dest = folder / f"{spec.name}.gz"
        if not (dest.is_file() and sha256_of(dest) == spec.sha256_gz):
            download(f"{MNIST_URL}/{spec.name}.gz", dest, spec.sha256_gz)
    return folder


def cached(folder: Path) -> bool:
    return all(any(folder.glob(f"{spec.name}*")) for spec in MNIST_FILES)


def load_data(
    data: str | None,
    verify: bool = True,
    cache_dir: Path | None = None,
    say: Callable[[str], None] = print,
) -> Images:
    """The dataset ``--data`` names, else MNIST found or downloaded, else the bundled digits."""
    given = data or os.environ.get(MNIST_ENV)
    if given == DIGITS:
        return load_digits()
    if given:
        return load_idx_folder(Path(given), verify)
    folder = cache_dir or CACHE_DIR
    if cached(folder):
        return load_idx_folder(folder)
    try:
        say(f"MNIST: no local copy (--data DIR); downloading it to {folder}")
        return load_idx_folder(download_mnist(folder))
    except DataError as exc:
        reason = str(exc).splitlines()[0]
        say(f"MNIST is not available ({reason}); training on scikit-learn's bundled 8x8 digits")
        return load_digits()
