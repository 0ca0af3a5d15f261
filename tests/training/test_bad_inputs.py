"""Issue 24's sweep for ``python -m train``: bad input to every model is one clear line, never
a traceback, and loses no file (the rows for ``python -m derive``:
tests/tools/test_bad_inputs_cli.py).

One row per bad input (``tests.sweep``): the command line (``train ...`` is ``python -m
train``), what the folder holds first (``setup``), and a fragment of the one error line. Each
row runs in-process in a fresh folder, with the data and a tiny finished run of each model
copied into it; afterwards every file that was there is byte for byte as it was. A few rows run
a real process: signals mid-run and a reader that leaves the pipe.

Every row that reaches the data names it (``--data``); the names data beside the checkout,
MNIST and the network are out of reach here, so nothing is downloaded or trained at length.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.sweep import LONG, Row, check_row, enospc, in_process, put
from tests.training.helpers import REPO, write_folder, write_words
from train import checkpoint, data, preflight
from train.models import classifier_data

MLP = ["--n-embd", "4", "--n-hidden", "8", "--batch-size", "8"]
GPT = ["--n-layer", "1", "--n-head", "2", "--n-embd", "8", "--batch-size", "4"]
CLF = ["--hidden", "8", "--batch-size", "8", "--monitor-every", "2"]
PNG_OF_MY_OWN = bytes.fromhex("89504e470d0a1a0a") + b"my own plot, not a run's"


def mlp(*extra: str) -> list[str]:
    return ["train", "--data", "w.txt", "--steps", "3", *MLP, "--out", "new", *extra]


def gpt(*extra: str) -> list[str]:
    return ["train", "--model", "gpt", "--data", "w.txt", "--steps", "2", *GPT, "--out", "new"] + [
        *extra
    ]


def clf(*extra: str) -> list[str]:
    base = ["train", "--model", "classifier", "--data", "idx", "--no-verify", "--steps", "2"]
    return [*base, *CLF, "--out", "new", *extra]


# --- what a row's folder holds before it runs -------------------------------------------------


def edited(run: str, edit: Callable[[dict], object], digest: bool = True) -> Callable:
    """Setup: ``bad.pt``, the tiny ``run``'s checkpoint with ``edit`` applied, its sha256
    recomputed (``digest``) so that only the edit is wrong."""

    def setup(tmp: Path, fx: dict) -> None:
        payload = torch.load(fx[run] / "checkpoint.pt", weights_only=True)
        edit(payload)
        if digest:
            payload.pop("sha256", None)
            payload["sha256"] = checkpoint.content_digest(payload)
        torch.save(payload, tmp / "bad.pt")

    return setup


def run_of(model: str) -> Callable:
    """Setup: a finished tiny run of ``model`` in ``run/``."""
    return lambda tmp, fx: shutil.copytree(fx[model], tmp / "run")


def flipped(tmp: Path, fx: dict) -> None:
    raw = bytearray((fx["mlp"] / "checkpoint.pt").read_bytes())
    losses = torch.load(fx["mlp"] / "checkpoint.pt", weights_only=True)["losses"]
    at = raw.find(losses.numpy().tobytes()) + 4
    raw[at] ^= 0x10
    (tmp / "bad.pt").write_bytes(bytes(raw))


def pickled_object(tmp: Path, fx: dict) -> None:
    torch.save({"format": checkpoint.FORMAT, "what": Path("x")}, tmp / "bad.pt")


def setitem(key: str, value: object) -> Callable[[dict], object]:
    return lambda payload: payload.__setitem__(key, value)


def config_item(key: str, value: object) -> Callable[[dict], object]:
    return lambda payload: payload["config"].__setitem__(key, value)


def full_disk_at_checkpoint(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(checkpoint.torch, "save", lambda obj, f: enospc(getattr(f, "name", "?")))


def read_only(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(preflight.os, "access", lambda path, mode: False)


def unwritable(mp: pytest.MonkeyPatch) -> None:
    """access() says yes (as to root) but no file can be made: a read-only mount, /sys."""

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    mp.setattr(preflight.tempfile, "TemporaryFile", refuse)


# --- the MLP: python -m train -------------------------------------------------------------------
ARGPARSE_MLP = [
    (flag, value, f"argument {flag}")
    for flag, values in {
        "--steps": ["0", "-1", "x", "1.5", "", "1e3"],
        "--seed": ["-1", str(2**64), "x", "1.0"],
        "--lr": ["0", "-1", "nan", "inf", "-inf", "x", ""],
        "--batch-size": ["1", "0", "x"],
        "--n-embd": ["0", "-2", "x"],
        "--n-hidden": ["0", "x"],
        "--block-size": ["0", "x"],
        "--dtype": ["float16", ""],
        "--optimizer": ["adam", "SGD"],
        "--backward": ["numeric"],
        "--checkpoint-every": ["0", "x"],
        "--check-every": ["-1", "x"],
        "--sample": ["0", "x", "1000000"],
        "--threads": ["0", "x", "5000", str(2**40)],
        "--device": ["tpu"],
    }.items()
    for value in values
]
ROWS = [Row(f"mlp {f} {v!r}", mlp(f, v), e) for f, v, e in ARGPARSE_MLP]
ROWS += [
    Row("mlp unknown flag", mlp("--n-layers", "2"), "unrecognized arguments"),
    Row("mlp unknown model", ["train", "--model", "perceptron"], "unknown --model 'perceptron'"),
    Row("mlp empty model", ["train", "--model", ""], "unknown --model ''"),
    Row("mlp --model without value", ["train", "--model"], "unknown --model ''"),
    Row("mlp resume and overwrite", mlp("--resume", "--overwrite"), "give one"),
    Row("mlp --lr 1e308 in float32", mlp("--lr", "1e308"), "--lr must be a finite number"),
    Row("mlp --lr 1e39 in float32", mlp("--lr", "1e39"), "the largest float32"),
    Row("mlp huge batch", mlp("--batch-size", str(10**9)), "needs about"),
    Row("mlp huge context", mlp("--block-size", str(10**9)), "needs about"),
    Row("mlp huge n-hidden", mlp("--n-hidden", str(10**12)), "needs about"),
    # paths
    Row("mlp --out empty", mlp("--out", ""), "--out is empty"),
    Row("mlp --out a file", mlp("--out", "file"), "--out file is a file", (put("file", "k"),)),
    Row(
        "mlp --out under a file",
        mlp("--out", "file/run"),
        "file is a file, not a folder",
        (put("file", "k"),),
    ),
    Row("mlp --out the data", mlp("--out", "w.txt"), "--out w.txt is a file"),
    Row("mlp --out read-only", mlp(), "cannot write in", (), read_only),
    Row("mlp --out unwritable to root too", mlp(), "(Permission denied)", (), unwritable),
    Row("mlp --out name too long", mlp("--out", LONG), "longer than 255 bytes"),
    Row("mlp --checkpoint name too long", mlp("--checkpoint", LONG + ".pt"), "longer than 255"),
    Row("mlp --metrics name too long", mlp("--metrics", f"x/{LONG}.json"), "longer than 255"),
    Row("gpt --checkpoint name too long", gpt("--checkpoint", LONG), "longer than 255"),
    Row("classifier --out name too long", clf("--out", LONG), "longer than 255 bytes"),
    Row("mlp --checkpoint empty", mlp("--checkpoint", ""), "--checkpoint is empty"),
    Row(
        "mlp --checkpoint a folder",
        mlp("--checkpoint", "dir"),
        "is a directory",
        (put("dir", None),),
    ),
    Row(
        "mlp --checkpoint the data",
        mlp("--checkpoint", "w.txt"),
        "--data w.txt is also --checkpoint",
    ),
    Row(
        "mlp --checkpoint a user file",
        mlp("--checkpoint", "notes.pt"),
        "not a backgen training checkpoint",
        (put("notes.pt", b"mine"),),
    ),
    Row(
        "mlp --checkpoint a user file --overwrite",
        mlp("--checkpoint", "notes.pt", "--overwrite"),
        "not a backgen training checkpoint",
        (put("notes.pt", b"mine"),),
    ),
    Row(
        "mlp --checkpoint under a file",
        mlp("--checkpoint", "file/c.pt"),
        "file is a file, not a folder",
        (put("file", "k"),),
    ),
    Row(
        "mlp --checkpoint is loss.png", mlp("--checkpoint", "new/loss.png"), "is also --checkpoint"
    ),
    Row(
        "mlp --checkpoint is metrics.json",
        mlp("--checkpoint", "new/metrics.json"),
        "is also --checkpoint",
    ),
    Row(
        "mlp --checkpoint is --metrics",
        mlp("--checkpoint", "x.pt", "--metrics", "x.pt"),
        "is also --checkpoint",
    ),
    Row("mlp --metrics empty", mlp("--metrics", ""), "--metrics is empty"),
    Row("mlp --metrics a folder", mlp("--metrics", "dir"), "is a directory", (put("dir", None),)),
    Row("mlp --metrics the data", mlp("--metrics", "w.txt"), "--data w.txt is also --metrics"),
    Row(
        "mlp --metrics the checkpoint",
        mlp("--metrics", "new/checkpoint.pt"),
        "--metrics new/checkpoint.pt is also --checkpoint",
    ),
    Row(
        "mlp --metrics the loss curve",
        mlp("--metrics", "new/loss.png"),
        "is also the run's loss.png",
    ),
    Row(
        "mlp --metrics a user json",
        mlp("--metrics", "notes.json"),
        "move it or pick another --metrics",  # it said --out (found by probing)
        (put("notes.json", '{"mine": 1}'),),
    ),
    Row(
        "mlp --metrics under a file",
        mlp("--metrics", "file/m.json"),
        "file is a file, not a folder",
        (put("file", "k"),),
    ),
    Row(
        "mlp a user's loss.png",
        mlp(),
        "new/loss.png exists and was not written",
        (put("new/loss.png", PNG_OF_MY_OWN),),
    ),
    Row(
        "mlp a user's metrics.json",
        mlp(),
        "was not written by a training run (not run metrics); refusing to replace it: move it "
        "or pick another --out",
        (put("new/metrics.json", '{"mine": 1}'),),
    ),
    Row("mlp loss.png a folder", mlp(), "is not a regular file", (put("new/loss.png", None),)),
    Row(
        "mlp metrics.json a folder",
        mlp(),
        "is not a regular file",
        (put("new/metrics.json", None),),
    ),
    Row("mlp --data empty", mlp("--data", ""), "--data is empty"),
    Row("mlp --data missing", mlp("--data", "nothing.txt"), "data file not found"),
    Row("mlp --data a folder", mlp("--data", "dir"), "dir", (put("dir", None),)),
    Row("mlp --data binary", mlp("--data", "b.txt"), "looks binary", (put("b.txt", b"a\x00b\n"),)),
    Row(
        "mlp --data not utf-8",
        mlp("--data", "b.txt"),
        "is not UTF-8",
        (put("b.txt", b"\xff\xfe\n"),),
    ),
    Row("mlp --data empty file", mlp("--data", "b.txt"), "is empty", (put("b.txt", "\n\n"),)),
    Row(
        "mlp --data one word", mlp("--data", "b.txt"), "1 word is too few", (put("b.txt", "ab\n"),)
    ),
    Row(
        "mlp --data with dots",
        mlp("--data", "b.txt"),
        "contains '.'",
        (put("b.txt", "a.b\ncd\n" * 9),),
    ),
    # an existing run, and resuming it
    Row(
        "mlp over a finished run",
        mlp("--out", "run"),
        "already holds a training run",
        (run_of("mlp"),),
    ),
    Row("mlp --resume nothing", mlp("--resume"), "no checkpoint at new/checkpoint.pt"),
    Row(
        "mlp --resume changed option",
        ["train", "--resume", "--out", "run", "--n-hidden", "32"],
        "drop those options",
        (run_of("mlp"),),
    ),
    Row(
        "mlp --resume fewer steps",
        ["train", "--resume", "--out", "run", "--steps", "1"],
        "past --steps 1",
        (run_of("mlp"),),
    ),
    Row(
        "mlp --resume other data",
        ["train", "--resume", "--out", "run", "--data", "o.txt"],
        "is not the data this checkpoint was trained on (",  # and names the run's own file
        (run_of("mlp"), put("o.txt", "ab\ncd\n" * 9)),
    ),
    Row(
        "mlp --resume a gpt run",
        ["train", "--resume", "--out", "run"],
        "is not an MLP checkpoint",
        (run_of("gpt"),),
    ),
    Row(
        "mlp --resume a classifier run",
        ["train", "--resume", "--out", "run"],
        "is not an MLP checkpoint",
        (run_of("clf"),),
    ),
    Row("mlp --sample nothing", ["train", "--sample", "3", "--out", "new"], "no checkpoint at"),
    Row(  # probing: every training option beside --sample was ignored without a word
        "mlp --sample with training options",
        ["train", "--sample", "2", "--n-hidden", "50", "--steps", "99", "--overwrite"],
        "--n-hidden, --steps, --overwrite would be ignored",
    ),
    Row(
        "mlp --sample a folder checkpoint",
        ["train", "--sample", "3", "--checkpoint", "dir"],
        "is a directory",
        (put("dir", None),),
    ),
]

# damaged checkpoints, given to --resume and to --sample
DAMAGE = [
    ("garbage", put("bad.pt", b"garbage, not a zip"), "cannot read checkpoint bad.pt"),
    ("empty", put("bad.pt", b""), "cannot read checkpoint bad.pt"),
    ("text", put("bad.pt", "hello\n"), "cannot read checkpoint bad.pt"),
    ("zip junk", put("bad.pt", b"PK\x03\x04" + b"\0" * 64), "cannot read checkpoint bad.pt"),
    ("pickled object", pickled_object, "torch.load(weights_only=True) refuses it"),
    ("a list", lambda tmp, fx: torch.save([1, 2], tmp / "bad.pt"), "not a backgen training"),
    ("byte flipped", flipped, "is damaged: its contents do not match"),
    ("no checksum", edited("mlp", lambda p: p.pop("sha256"), digest=False), "has no checksum"),
    ("missing params", edited("mlp", lambda p: p.pop("params")), "lacks params"),
    ("step text", edited("mlp", setitem("step", "7")), "field step is str"),
    ("step negative", edited("mlp", setitem("step", -4)), "field step is negative"),
    ("step bool", edited("mlp", setitem("step", True)), "field step is bool"),
    ("config text", edited("mlp", setitem("config", "x")), "field config is str"),
    ("config lr text", edited("mlp", config_item("lr", "0.1")), "config"),
    ("config dtype", edited("mlp", config_item("dtype", "float16")), "config"),
    ("config optimizer", edited("mlp", config_item("optimizer", "lion")), "config"),
    ("config n_hidden float", edited("mlp", config_item("n_hidden", 16.0)), "config"),
    ("params a list", edited("mlp", setitem("params", [1])), "field params is list"),
    (
        "param wrong shape",
        edited("mlp", lambda p: p["params"].__setitem__("W1", torch.zeros(2))),
        "parameter W1 has shape",
    ),
    ("chars a number", edited("mlp", setitem("chars", 5)), "field chars is int"),
    ("data text", edited("mlp", setitem("data", "x")), "field data is str"),
    ("data no path", edited("mlp", setitem("data", {"sha256": "0"})), "field data lacks its path"),
    ("generator zeros", edited("mlp", setitem("generator", torch.zeros(3))), "wrong type or shape"),
    ("generator a list", edited("mlp", setitem("generator", [1])), "field generator is list"),
    ("losses a list", edited("mlp", setitem("losses", [1.0])), "field losses is list"),
    (
        "optimizer no groups",
        edited("mlp", setitem("optimizer", {"state": {}, "param_groups": []})),
        "wrong type or shape",
    ),
    ("optimizer a list", edited("mlp", setitem("optimizer", [])), "field optimizer is list"),
    ("bn_stats a number", edited("mlp", setitem("bn_stats", 3)), "field bn_stats is int"),
    ("seconds text", edited("mlp", setitem("seconds", "1")), "field seconds is str"),
]
RESUME_MLP = ["train", "--resume", "--checkpoint", "bad.pt", "--out", "new", "--data", "w.txt"]
ROWS += [Row(f"mlp --resume {name}", RESUME_MLP, e, (s,)) for name, s, e in DAMAGE]
SAMPLE_DAMAGE = {
    "garbage",
    "pickled object",
    "byte flipped",
    "step text",
    "config text",
    "config lr text",
    "params a list",
    "chars a number",
    "data text",
    "bn_stats a number",
}
ROWS += [
    Row(f"mlp --sample {name}", ["train", "--sample", "2", "--checkpoint", "bad.pt"], e, (s,))
    for name, s, e in DAMAGE
    if name in SAMPLE_DAMAGE
]

# --- the GPT: python -m train --model gpt ---------------------------------------------------------
ARGPARSE_GPT = {
    "--steps": ["0", "x"],
    "--seed": ["-1", str(2**64)],
    "--lr": ["0", "nan", "inf", "x"],
    "--weight-decay": ["x"],
    "--batch-size": ["0", "x"],
    "--n-layer": ["0", "x"],
    "--n-head": ["0"],
    "--n-embd": ["0", "-8"],
    "--gelu": ["relu"],
    "--dtype": ["float16"],
    "--backward": ["numeric"],
    "--checkpoint-every": ["0"],
    "--sample": ["0", "100000"],
    "--threads": ["0", "99999"],
    "--device": ["tpu"],
}
ROWS += [
    Row(f"gpt {f} {v!r}", gpt(f, v), f"argument {f}")
    for f, values in ARGPARSE_GPT.items()
    for v in values
]
ROWS += [
    Row(
        "gpt negative weight decay",
        gpt("--weight-decay", "-1"),
        "--weight-decay must be a finite number",
    ),
    Row(
        "gpt nan weight decay",
        gpt("--weight-decay", "nan"),
        "--weight-decay must be a finite number",
    ),
    Row(
        "gpt inf weight decay",
        gpt("--weight-decay", "inf"),
        "--weight-decay must be a finite number",
    ),
    Row(
        "gpt lr times weight decay",
        gpt("--lr", "1e20", "--weight-decay", "1e20"),
        "overflows float32",
    ),
    Row("gpt --lr 1e308", gpt("--lr", "1e308"), "--lr must be a finite number"),
    Row("gpt heads do not divide", gpt("--n-head", "3"), "is not a multiple of --n-head 3"),
    Row("gpt more heads than width", gpt("--n-head", "16"), "is not a multiple"),
    Row("gpt --n-embd 65536", gpt("--n-embd", "65536", "--n-head", "1"), "needs about"),
    Row("gpt huge batch", gpt("--batch-size", str(10**9)), "needs about"),
    Row("gpt deep", gpt("--n-layer", str(10**9)), "needs about"),
    Row("gpt resume and overwrite", gpt("--resume", "--overwrite"), "give one"),
    Row("gpt --out a file", gpt("--out", "file"), "--out file is a file", (put("file", "k"),)),
    Row(
        "gpt --out under a file",
        gpt("--out", "file/x"),
        "file is a file, not a folder",
        (put("file", "k"),),
    ),
    Row("gpt --out empty", gpt("--out", ""), "--out is empty"),
    Row(
        "gpt --metrics the checkpoint",
        gpt("--metrics", "new/checkpoint.pt"),
        "is also --checkpoint",
    ),
    Row(
        "gpt --checkpoint the loss curve",
        gpt("--checkpoint", "new/loss.png"),
        "is also --checkpoint",
    ),
    Row("gpt --checkpoint the data", gpt("--checkpoint", "w.txt"), "--data w.txt is also"),
    Row(
        "gpt a user's loss.png",
        gpt(),
        "new/loss.png exists and was not written",
        (put("new/loss.png", PNG_OF_MY_OWN),),
    ),
    Row("gpt --data missing", gpt("--data", "nothing.txt"), "data file not found"),
    Row("gpt --data empty", gpt("--data", ""), "--data is empty"),
    Row(
        "gpt over a finished run",
        gpt("--out", "run"),
        "already holds a training run",
        (run_of("gpt"),),
    ),
    Row("gpt --resume nothing", gpt("--resume"), "no checkpoint at"),
    Row(
        "gpt --resume an mlp run",
        ["train", "--model", "gpt", "--resume", "--out", "run"],
        "is not a gpt checkpoint",
        (run_of("mlp"),),
    ),
    Row(
        "gpt --resume changed width",
        ["train", "--model", "gpt", "--resume", "--out", "run", "--n-embd", "16"],
        "drop those options",
        (run_of("gpt"),),
    ),
    Row(
        "gpt --sample nothing",
        ["train", "--model", "gpt", "--sample", "2", "--out", "new"],
        "no checkpoint at",
    ),
]
GPT_DAMAGE = [
    ("garbage", put("bad.pt", b"junk"), "cannot read checkpoint"),
    (
        "byte flipped",
        edited("gpt", lambda p: p.__setitem__("step", p["step"] + 1), digest=False),
        "is damaged",
    ),
    ("block_size text", edited("gpt", setitem("block_size", "8")), "field block_size is str"),
    ("config gelu", edited("gpt", config_item("gelu", "relu")), "config"),
    ("config n_head text", edited("gpt", config_item("n_head", "2")), "config"),
    ("chars a list", edited("gpt", setitem("chars", ["a"])), "field chars is list"),
    (
        "optimizer state empty",
        edited("gpt", setitem("optimizer", {"state": {}, "param_groups": []})),
        "wrong type or shape",
    ),
    ("param missing", edited("gpt", lambda p: p["params"].pop("wte")), "has no parameter wte"),
]
RESUME_GPT = ["train", "--model", "gpt", "--resume", "--checkpoint", "bad.pt", "--out", "new"]
ROWS += [
    Row(f"gpt --resume {n}", [*RESUME_GPT, "--data", "w.txt"], e, (s,)) for n, s, e in GPT_DAMAGE
]
ROWS += [
    Row(
        f"gpt --sample {n}",
        ["train", "--model", "gpt", "--sample", "2", "--checkpoint", "bad.pt"],
        e,
        (s,),
    )
    for n, s, e in GPT_DAMAGE[:4]
]

# --- the classifier: python -m train --model classifier ------------------------------------------
ARGPARSE_CLF = {
    "--steps": ["0", "x"],
    "--seed": ["-1", str(2**64), "x"],
    "--batch-size": ["0", "x"],
    "--lr": ["x"],
    "--momentum": ["x"],
    "--weight-decay": ["x"],
    "--clip-grad-norm": ["x"],
    "--dtype": ["half"],
    "--backward": ["numeric"],
    "--checkpoint-every": ["0"],
    "--monitor-every": ["0", "x"],
    "--threads": ["0", "99999"],
    "--device": ["tpu"],
}
ROWS += [
    Row(f"classifier {f} {v!r}", clf(f, v), f"argument {f}")
    for f, values in ARGPARSE_CLF.items()
    for v in values
]
ROWS += [
    Row("classifier unknown optimizer", clf("--optimizer", "lion"), "unknown optimizer 'lion'"),
    Row("classifier --lr 0", clf("--lr", "0"), "--lr must be a positive number"),
    Row("classifier --lr -1", clf("--lr", "-1"), "--lr must be a positive number"),
    Row("classifier --lr nan", clf("--lr", "nan"), "--lr must be a positive number"),
    Row("classifier --lr inf", clf("--lr", "inf"), "--lr must be a finite number"),
    Row("classifier --lr 1e308", clf("--lr", "1e308"), "--lr must be a finite number"),
    Row(
        "classifier --momentum -1",
        clf("--optimizer", "sgd", "--momentum", "-1"),
        "--momentum must be 0",
    ),
    Row(
        "classifier --momentum nan",
        clf("--optimizer", "sgd", "--momentum", "nan"),
        "--momentum must be 0",
    ),
    Row(
        "classifier --momentum 1e308",
        clf("--optimizer", "sgd", "--momentum", "1e308"),
        "--momentum must be a finite",
    ),
    Row("classifier --momentum with adam", clf("--momentum", "0.5"), "--momentum applies to sgd"),
    Row("classifier --weight-decay -1", clf("--weight-decay", "-1"), "--weight-decay must be 0"),
    Row(
        "classifier --weight-decay inf",
        clf("--weight-decay", "inf"),
        "--weight-decay must be a finite",
    ),
    Row(
        "classifier lr times weight decay",
        clf("--optimizer", "adamw", "--lr", "1e20", "--weight-decay", "1e20"),
        "overflows float32",
    ),
    Row(
        "classifier --clip-grad-norm -1",
        clf("--clip-grad-norm", "-1"),
        "--clip-grad-norm must be 0",
    ),
    Row(
        "classifier --clip-grad-norm nan",
        clf("--clip-grad-norm", "nan"),
        "--clip-grad-norm must be 0",
    ),
    Row(
        "classifier --clip-grad-norm inf",
        clf("--clip-grad-norm", "inf"),
        "--clip-grad-norm must be a finite",
    ),
    Row("classifier --hidden 0", clf("--hidden", "0"), "--hidden wants sizes"),
    Row("classifier --hidden x", clf("--hidden", "16,x"), "--hidden wants sizes"),
    Row("classifier --hidden empty part", clf("--hidden", "8,,8"), "--hidden wants sizes"),
    Row("classifier --hidden negative", clf("--hidden", "-1"), "--hidden wants sizes"),
    Row("classifier --hidden huge", clf("--hidden", f"{10**8},{10**8}"), "needs about"),
    Row("classifier huge batch", clf("--batch-size", str(10**12)), "needs about"),
    Row("classifier resume and overwrite", clf("--resume", "--overwrite"), "give one"),
    Row("classifier --data missing", clf("--data", "nothing"), "nothing"),
    Row("classifier --data a file", clf("--data", "w.txt"), "w.txt"),
    Row("classifier --data empty", clf("--data", ""), "--data is empty"),
    Row(
        "classifier --out a file", clf("--out", "file"), "--out file is a file", (put("file", "k"),)
    ),
    Row(
        "classifier --out under a file",
        clf("--out", "file/x"),
        "file is a file, not a folder",
        (put("file", "k"),),
    ),
    Row("classifier --out empty", clf("--out", ""), "--out is empty"),
    Row(
        "classifier --metrics the checkpoint",
        clf("--metrics", "new/checkpoint.pt"),
        "is also --checkpoint",
    ),
    Row(
        "classifier --checkpoint the figure",
        clf("--checkpoint", "new/monitor.png"),
        "is also --checkpoint",
    ),
    Row(
        "classifier --metrics the figure",
        clf("--metrics", "new/monitor.png"),
        "is also the run's monitor.png",
    ),
    Row(
        "classifier a user's monitor.png",
        clf(),
        "new/monitor.png exists and was not written",
        (put("new/monitor.png", PNG_OF_MY_OWN),),
    ),
    Row(
        "classifier a user's metrics.json",
        clf(),
        "new/metrics.json exists and was not written",
        (put("new/metrics.json", "[]"),),
    ),
    Row(
        "classifier --checkpoint a user file",
        clf("--checkpoint", "notes.pt", "--overwrite"),
        "not a backgen training checkpoint",
        (put("notes.pt", b"mine"),),
    ),
    Row(
        "classifier over a finished run",
        clf("--out", "run"),
        "already holds a training run",
        (run_of("clf"),),
    ),
    Row("classifier --resume nothing", clf("--resume"), "no checkpoint at"),
    Row(
        "classifier --resume an mlp run",
        ["train", "--model", "classifier", "--resume", "--out", "run"],
        "is not a classifier checkpoint",
        (run_of("mlp"),),
    ),
    Row(
        "classifier --resume changed hidden",
        ["train", "--model", "classifier", "--resume", "--out", "run", "--hidden", "4"],
        "drop those options",
        (run_of("clf"),),
    ),
    Row("classifier --out read-only", clf(), "cannot write in", (), read_only),
]
CLF_DAMAGE = [
    ("garbage", put("bad.pt", b"junk"), "cannot read checkpoint"),
    ("history text", edited("clf", setitem("history", "x")), "field history is str"),
    ("accs a list", edited("clf", setitem("accs", [1.0])), "field accs is list"),
    (
        "monitor_every text",
        edited("clf", setitem("monitor_every", "2")),
        "field monitor_every is str",
    ),
    (
        "data no source",
        edited("clf", setitem("data", {"sha256": "0"})),
        "field data lacks its name, source",
    ),
    ("config hidden text", edited("clf", config_item("hidden", "8")), "config"),
    ("config optimizer", edited("clf", config_item("optimizer", "lion")), "config"),
    ("params a list", edited("clf", setitem("params", [])), "field params is list"),
]
RESUME_CLF = [
    "train",
    "--model",
    "classifier",
    "--resume",
    "--checkpoint",
    "bad.pt",
    "--out",
    "new",
]
ROWS += [
    Row(f"classifier --resume {n}", [*RESUME_CLF, "--data", "idx", "--no-verify"], e, (s,))
    for n, s, e in CLF_DAMAGE
]

# --- a full disk mid-run: one line, the last good checkpoint named and kept -----------------------
ROWS += [
    Row(
        "mlp full disk at the first checkpoint",
        mlp("--checkpoint-every", "1"),
        "cannot write",
        (),
        full_disk_at_checkpoint,
    ),
    Row(
        "gpt full disk at the first checkpoint",
        gpt("--checkpoint-every", "1"),
        "cannot write",
        (),
        full_disk_at_checkpoint,
    ),
    Row(
        "classifier full disk at the first checkpoint",
        clf("--checkpoint-every", "1"),
        "cannot write",
        (),
        full_disk_at_checkpoint,
    ),
]

if not torch.cuda.is_available():
    ROWS += [
        Row(f"{name} --device cuda without one", argv("--device", "cuda"), "no CUDA device")
        for name, argv in (("mlp", mlp), ("gpt", gpt), ("classifier", clf))
    ]


# --- running a row ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> dict:
    """The data, and one finished tiny run of each model (copied into a row's folder)."""
    root = tmp_path_factory.mktemp("fixtures")
    words = write_words(root / "w.txt", count=200)
    idx = write_folder(root / "idx", n_train=60, n_test=20)
    runs = {
        "mlp": ["--data", str(words), "--steps", "4", *MLP],
        "gpt": ["--model", "gpt", "--data", str(words), "--steps", "2", *GPT],
        "clf": ["--model", "classifier", "--data", str(idx), "--no-verify", "--steps", "4", *CLF],
    }
    fixtures = {"words": words, "idx": idx}
    for name, argv in runs.items():
        out = root / name
        code, _, err = call(["train", *argv, "--out", str(out)])
        assert code == 0, err
        fixtures[name] = out
    return fixtures


def call(argv: list[str]) -> tuple[int, str, str]:
    """``python -m train`` in-process: (exit code, stdout, stderr)."""
    from train.cli import main

    return in_process(main, argv[1:])


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No names data beside the checkout, no MNIST copy, no network."""

    def no_network(url, timeout=None):
        raise urllib.error.URLError("offline (test)")

    monkeypatch.delenv(data.DATA_ENV, raising=False)
    monkeypatch.delenv(classifier_data.MNIST_ENV, raising=False)
    monkeypatch.setattr(data, "CACHE_DIR", tmp_path / "cache" / "repo" / "data")
    monkeypatch.setattr(classifier_data, "CACHE_DIR", tmp_path / "cache" / "mnist")
    monkeypatch.setattr(data.urllib.request, "urlopen", no_network)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_input_is_one_line_and_loses_nothing(row: Row, fx, tmp_path, monkeypatch, offline):
    folder = tmp_path / "work"
    folder.mkdir()
    shutil.copy(fx["words"], folder / "w.txt")
    shutil.copytree(fx["idx"], folder / "idx")
    check_row(row, folder, fx, monkeypatch, call)


def test_the_sweep_is_large_enough():
    assert len(ROWS) >= 150 and len({r.id for r in ROWS}) == len(ROWS)


# --- what the rows above leave as it was, told apart from what they may replace ----------------


def test_a_run_replaces_its_own_plot_and_metrics(fx, tmp_path, offline):
    """The positive control of the loss.png / metrics.json rows: --overwrite of a run's own."""
    shutil.copytree(fx["mlp"], tmp_path / "run")
    argv = [
        "train",
        "--data",
        str(fx["words"]),
        "--steps",
        "5",
        *MLP,
        "--out",
        str(tmp_path / "run"),
    ]
    code, stdout, stderr = call([*argv, "--overwrite"])
    assert code == 0, stderr
    assert preflight.png_has_mark(tmp_path / "run" / "loss.png")
    assert not list((tmp_path / "run").glob(".*tmp"))  # no temporary file left


def test_the_local_names_data_is_found_as_the_makefile_finds_it(tmp_path, monkeypatch):
    """Without --data: ../shared/data/names.txt beside the checkout, before any download."""
    checkout = tmp_path / "main"
    local = tmp_path / "shared" / "data" / "names.txt"
    local.parent.mkdir(parents=True)
    local.write_text("emma\n")
    monkeypatch.delenv(data.DATA_ENV, raising=False)
    monkeypatch.setattr(data.urllib.request, "urlopen", None)  # any download would fail
    assert data.resolve_data_path(None, cache_dir=checkout / "data") == local


def test_classifier_names_its_checkpoint_and_metrics(fx, tmp_path, offline):
    out = tmp_path / "c"
    argv = ["train", "--model", "classifier", "--data", str(fx["idx"]), "--no-verify"]
    code, stdout, stderr = call([*argv, "--steps", "2", *CLF, "--out", str(out), "--no-figure"])
    assert code == 0, stderr
    assert f"checkpoint {out / 'checkpoint.pt'}\nmetrics    {out / 'metrics.json'}\n" in stdout


def test_monitor_accuracy_axis_shows_every_point():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from train.models.classifier_monitor import draw_results

    history = [
        {"step": 10, "train_loss": 2.3, "val_loss": 2.2, "train_acc": 0.08, "val_acc": 0.5},
        {"step": 20, "train_loss": 1.0, "val_loss": 1.1, "train_acc": 0.7, "val_acc": 0.72},
    ]
    fig, (loss, acc) = plt.subplots(1, 2)
    draw_results(loss, acc, history, test_acc=0.7)
    assert acc.get_ylim()[0] <= 8
    plt.close(fig)


# --- real processes: signals mid-run, a reader that leaves ---------------------------------------

SIGNAL_ROWS = [
    ("mlp SIGTERM", ["--data", "w.txt", "--steps", "4000", *MLP], signal.SIGTERM),
    ("mlp SIGINT", ["--data", "w.txt", "--steps", "4000", *MLP], signal.SIGINT),
    ("gpt SIGTERM", ["--model", "gpt", "--data", "w.txt", "--steps", "2000", *GPT], signal.SIGTERM),
    (
        "classifier SIGTERM",
        ["--model", "classifier", "--data", "idx", "--no-verify", "--steps", "4000", *CLF],
        signal.SIGTERM,
    ),
]


def start(argv: list[str], cwd: Path, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "BACKGEN_DATA": ""}
    return subprocess.Popen(
        [sys.executable, "-m", "train", *argv], cwd=cwd, env=env, text=True, **kwargs
    )


@pytest.mark.parametrize("name, argv, signum", SIGNAL_ROWS, ids=[r[0] for r in SIGNAL_ROWS])
def test_a_signal_mid_run_leaves_a_resumable_checkpoint(
    fx, tmp_path, monkeypatch, offline, name, argv, signum
):
    shutil.copy(fx["words"], tmp_path / "w.txt")
    shutil.copytree(fx["idx"], tmp_path / "idx")
    proc = start([*argv, "--out", "run"], tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while not proc.stderr.readline().startswith("step "):  # training has begun
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read()
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    assert "saved run/checkpoint.pt" in stderr and "resume with:" in stderr
    saved = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    assert 0 < saved["step"] < int(argv[argv.index("--steps") + 1])
    at = argv.index("--steps")
    more = ["--resume", "--out", "run", "--steps", str(saved["step"] + 2), "--no-figure"]
    more = more[:-1] if "classifier" not in argv else more  # a plot costs a second; skip it
    monkeypatch.chdir(tmp_path)
    code, _, stderr = call(["train", *argv[:at], *argv[at + 2 :], *more])
    assert code == 0, stderr


def test_a_reader_that_leaves_does_not_stop_the_run(fx, tmp_path):
    """``python -m train ... | head -1``: the run finishes and writes its folder."""
    shutil.copy(fx["words"], tmp_path / "w.txt")
    argv = ["--data", "w.txt", "--steps", "30", *MLP, "--out", "run"]
    proc = start(argv, tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()  # the reader leaves after one line
    stderr = proc.stderr.read()
    proc.wait(timeout=120)
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "checkpoint.pt",
        "loss.png",
        "metrics.json",
    ]
