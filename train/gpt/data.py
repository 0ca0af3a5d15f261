"""The names as makemore's GPT reads them: one padded sequence per word.

Vocabulary and the 80/10/10 word split are the MLP's (``train.data``), so the GPT's test loss
is over the same test words, and over the same predictions: every character of a word and the
end token, each from all the characters before it. Word ``emma`` with block size 6 is

    x = [0, e, m, m, a, 0]      (0 is '.', the start token, then padding)
    y = [e, m, m, a, 0, -1]     (0 ends the word; -1 marks padding, ignored by the loss)

as makemore's ``CharDataset``; the block size is the longest word's length + 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from train.data import Splits, build_vocab, read_words, sha256_of, split_words

IGNORE = -1  # target of a padding position: F.cross_entropy(ignore_index=-1)


@dataclass
class SequenceData(Splits):
    """X, Y are (words, block_size) int64; ``chars[i]`` is the symbol with index i."""

    chars: str
    sha256: str
    block_size: int


def encode(words: list[str], chars: str, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets of every word (see the module docstring)."""
    stoi = {ch: i for i, ch in enumerate(chars)}
    X = torch.zeros(len(words), block_size, dtype=torch.long)
    Y = torch.full((len(words), block_size), IGNORE, dtype=torch.long)
    for i, word in enumerate(words):
        ix = torch.tensor([stoi[ch] for ch in word], dtype=torch.long)
        X[i, 1 : 1 + len(ix)] = ix
        Y[i, : len(ix)] = ix
        Y[i, len(ix)] = 0
    return X, Y


def load_sequences(path: Path) -> SequenceData:
    """Read, build the vocabulary from the whole file, split the words and encode the splits."""
    words = read_words(path)
    chars = build_vocab(words)
    block_size = max(len(w) for w in words) + 1
    train, val, test = split_words(words)
    return SequenceData(
        *encode(train, chars, block_size),
        *encode(val, chars, block_size),
        *encode(test, chars, block_size),
        chars=chars,
        sha256=sha256_of(path),
        block_size=block_size,
    )
