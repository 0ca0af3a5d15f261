"""makemore's MLP on the names, the seed's run (``python -m train``; ``--model mlp``).

embedding -> concat -> linear -> batchnorm -> tanh -> linear -> cross entropy, its parameters,
plain-torch forward and sampler in ``mlp_net``. ``generated_loss_and_grads`` is the point of
backgen: the seed's forward through the generated ops, keeping each op's ``saved``, then the
backward in reverse order, one visible call per op, and no ``loss.backward()``;
``autograd_step`` is the reference it is measured against. A checkpoint adds the vocabulary and
batchnorm's statistics over the training set; the end of a run prints train and val loss and 20
names, in the seed's order (calibrate, evaluate, sample; the test split is left untouched).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import torch

from generated import batchnorm, cross_entropy, embedding, linear, tanh
from train import preflight, report
from train.cli import add_names_data, positive, positive_float
from train.compare import compare_gradients, format_table
from train.config import Schedule
from train.data import Contexts, load_contexts, names_path
from train.device import on_device, to_cpu
from train.engine import Diverged, Job, RunState, advance, draw
from train.models import ModelSpec, OptionGroups
from train.models.mlp_net import (
    BN_EPS,
    PARAM_NAMES,
    BatchNormStats,
    ModelShape,
    Params,
    calibrate,
    check_examples_fit,
    checkpoint_stats,
    forward_torch,
    init_params,
    param_shapes,
    sample_names,
    split_loss,
    step_bytes,
)
from train.progress import Progress

OPTIMIZERS = ("sgd", "adamw")
# what --lr means when not given: the seed's 0.1 for plain SGD; Adam-style steps are already
# normalised per parameter, so 0.1 would be far too large for them
DEFAULT_LR = {"sgd": 0.1, "adamw": 0.003}
Grads = dict[str, torch.Tensor]
Step = Callable[[Params, torch.Tensor, torch.Tensor], tuple[float, Grads]]


@dataclass(frozen=True)
class MLPConfig(Schedule, steps=200_000, seed=2147483647, lr=0.1, batch_size=32):
    """Defaults are the seed's setup (200k steps of batch 32, lr 0.1 then 0.01)."""

    n_embd: int = 10
    n_hidden: int = 200
    block_size: int = 3
    optimizer: str = "sgd"

    @classmethod
    def choices(cls) -> dict[str, tuple[str, ...]]:
        return {**super().choices(), "optimizer": OPTIMIZERS}


@dataclass
class Run(RunState):
    """``RunState`` plus when batchnorm was last calibrated (see ``calibration_due``)."""

    calibrated_step: int = 0


def run_fields(args: argparse.Namespace, saved: dict | None) -> dict:
    """A resumed run's statistics are as old as its checkpoint (see ``calibration_due``)."""
    return {"calibrated_step": saved["step"]} if saved else {}


# --- options, data, memory ----------------------------------------------------------------------


def options(groups: OptionGroups) -> None:
    d, run = MLPConfig(), groups.run
    run.add_argument(
        "--lr",
        type=positive_float,
        metavar="X",
        help="learning rate X for the first half of the steps, then X/10 from step steps//2 "
        "(a resumed run that extends --steps past the drop keeps it) "
        f"({DEFAULT_LR['sgd']} for sgd, {DEFAULT_LR['adamw']} for adamw)",
    )
    run.add_argument("--n-embd", type=positive(), metavar="N", help=f"embedding size ({d.n_embd})")
    run.add_argument(
        "--n-hidden", type=positive(), metavar="N", help=f"hidden units ({d.n_hidden})"
    )
    run.add_argument("--block-size", type=positive(), metavar="N", help=f"context ({d.block_size})")
    run.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        help=f"torch.optim optimizer fed the gradients through .grad ({d.optimizer})",
    )
    add_names_data(groups.data)
    groups.out.add_argument(
        "--check-every",
        type=positive(0),
        default=0,
        metavar="K",
        help="every K steps print the generated-vs-autograd gradient table (0: never)",
    )


def resolve_config(args: argparse.Namespace, saved: dict | None) -> MLPConfig:
    given = preflight.given_options(args, MLPConfig)
    if saved is None:  # the optimizer's own learning rate
        given.setdefault("lr", DEFAULT_LR[given.get("optimizer", MLPConfig.optimizer)])
    return preflight.resolve(MLPConfig, given, saved)


def load_data(args: argparse.Namespace, config: MLPConfig, saved: dict | None) -> Contexts:
    path = names_path(args.data, saved)
    check_examples_fit(path, config.block_size)
    return load_contexts(path, config.block_size)


def shape(config: MLPConfig, vocab_size: int) -> ModelShape:
    return ModelShape(vocab_size, config.block_size, config.n_embd, config.n_hidden)


def check_memory(config: MLPConfig, data: Contexts) -> None:
    """Refuse a run whose step would not fit, instead of being killed by the OS mid-run."""
    need = step_bytes(
        shape(config, len(data.chars)), config.batch_size, config.dtype, len(data.Y_train)
    )
    what = (
        f"--block-size {config.block_size} --n-embd {config.n_embd} "
        f"--n-hidden {config.n_hidden} --batch-size {config.batch_size}"
    )
    preflight.check_fits(need, what, "use a smaller model or --batch-size")


# --- init and the step --------------------------------------------------------------------------


def init(config: MLPConfig, data: Contexts, g: torch.Generator) -> Params:
    return init_params(shape(config, len(data.chars)), g, config.torch_dtype)


def make_optimizer(config: MLPConfig, params: Params) -> torch.optim.Optimizer:
    """Plain SGD (the seed's ``p += -lr * grad``) or AdamW; both read gradients from ``.grad``."""
    if config.optimizer == "adamw":
        return torch.optim.AdamW(list(params.values()), lr=config.lr)
    return torch.optim.SGD(list(params.values()), lr=config.lr)


def generated_loss_and_grads(
    params: Params, Xb: torch.Tensor, Yb: torch.Tensor
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """The loss (a tensor: no ``.item()``, so it compiles whole) and the gradients in
    ``PARAM_NAMES`` order, through generated/ forwards and backwards.

    The one hand-chained MLP step: the training loop and the benchmark's G and GC run it.
    No name outlives its use (``del``): a local would keep a full-size activation alive to
    the end of the step, and the benchmark's large size measures that peak.
    """
    C, W1, b1, W2, b2, bngain, bnbias = (params[name] for name in PARAM_NAMES)

    # forward, keeping what each op saved for its backward
    emb, emb_saved = embedding.forward(Xb, C)  # (N, T, E)
    emb_shape = emb.shape
    embcat = emb.view(emb_shape[0], -1)  # concatenate the T embeddings: (N, T*E)
    hprebn, lin1_saved = linear.forward(embcat, W1, b1)
    hpreact, bn_saved = batchnorm.forward(hprebn, bngain, bnbias, eps=BN_EPS)
    del emb, embcat, hprebn
    h, tanh_saved = tanh.forward(hpreact)
    del hpreact
    logits, lin2_saved = linear.forward(h, W2, b2)
    del h
    loss, ce_saved = cross_entropy.forward(logits, Yb)
    del logits

    # backward, in reverse; dloss/dloss = 1
    dlogits, _ = cross_entropy.backward(torch.ones_like(loss), ce_saved)
    dh, dW2, db2 = linear.backward(dlogits, lin2_saved)
    del dlogits, ce_saved, lin2_saved
    (dhpreact,) = tanh.backward(dh, tanh_saved)
    del dh, tanh_saved
    dhprebn, dbngain, dbnbias = batchnorm.backward(dhpreact, bn_saved)
    del dhpreact, bn_saved
    dembcat, dW1, db1 = linear.backward(dhprebn, lin1_saved)
    del dhprebn, lin1_saved
    demb = dembcat.view(emb_shape)  # undo the concatenation
    _, dC = embedding.backward(demb, emb_saved)
    return loss, (dC, dW1, db1, dW2, db2, dbngain, dbnbias)


def generated_step(params: Params, Xb: torch.Tensor, Yb: torch.Tensor) -> tuple[float, Grads]:
    """Loss and every parameter's gradient through generated/ forwards and backwards."""
    loss, grads = generated_loss_and_grads(params, Xb, Yb)
    return loss.item(), dict(zip(PARAM_NAMES, grads, strict=True))


def autograd_step(params: Params, Xb: torch.Tensor, Yb: torch.Tensor) -> tuple[float, Grads]:
    """Same model and batch: the plain-torch forward and ``loss.backward()``, on detached
    copies, so the caller's tensors never carry autograd state."""
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    loss = forward_torch(leaves, Xb, Yb)
    loss.backward()
    return loss.item(), {k: leaves[k].grad for k in PARAM_NAMES}


STEPS = {"generated": generated_step, "autograd": autograd_step}


def make_step(config: MLPConfig) -> Step:
    """The ``--backward``'s step, looked up when training starts (a test may swap one in)."""
    return STEPS[config.backward]


def trainer(run: Run, step: Step, job: Job, progress: Progress) -> tuple:
    """A minibatch, loss and gradients, update; every ``--check-every`` steps the gradient
    table of both backwards on that batch first."""
    X, Y, check_every = run.data.X_train, run.data.Y_train, job.args.check_every

    def take_step(interrupted: Callable[[], bool]) -> bool:
        ix = draw(run, X.shape[0])
        Xb, Yb = X[ix], Y[ix]
        if check_every and run.step % check_every == 0:
            print(format_table(run.step, compare_gradients(STEPS, run.params, Xb, Yb)), flush=True)
        advance(run, *step(run.params, Xb, Yb))
        return interrupted()

    return take_step, None


# --- the checkpoint -----------------------------------------------------------------------------


def calibration_due(run: Run) -> bool:
    """Calibrate at a periodic save only after one epoch's worth of examples since the last.

    Calibration is one forward pass over the whole training set, so it costs less than an
    epoch of training steps (forward, backward and update of as many examples); on the names
    data one calibration took as long as about 2,300 steps of 32, an epoch is 5,700. Calibrating
    only after ``steps * batch_size >= len(train)`` examples bounds its share of the run
    however small ``--checkpoint-every`` is (before, ``--checkpoint-every 1`` calibrated at
    every step). A checkpoint saved without it holds ``bn_stats = None``: resuming never reads
    them, and ``--sample`` calibrates from the run's data.
    """
    examples = (run.step - run.calibrated_step) * run.config.batch_size
    return examples >= len(run.data.Y_train)


def checkpoint_fields(run: Run, periodic: bool) -> dict:
    """The data's path, the vocabulary and batchnorm's statistics (None in a periodic save
    before ``calibration_due``); ``Diverged`` rather than statistics that are not finite."""
    bn_stats = None
    if not periodic or calibration_due(run):
        stats = calibrate(run.params, run.data.X_train)
        if not (torch.isfinite(stats.mean).all() and torch.isfinite(stats.var).all()):
            raise Diverged(run.step, "the batchnorm statistics are not finite")
        bn_stats, run.calibrated_step = to_cpu({"mean": stats.mean, "var": stats.var}), run.step
    data = {"path": run.data.source, "sha256": run.data.sha256}
    return {"data": data, "chars": run.data.chars, "bn_stats": bn_stats}


def checkpoint_shapes(config: MLPConfig, saved: dict) -> dict[str, tuple[int, ...]]:
    return param_shapes(shape(config, len(saved["chars"])))


# --- the end of a run, and --sample ------------------------------------------------------------


def describe(run: Run, job: Job) -> str:
    c, d = run.config, run.data
    n_params = sum(p.numel() for p in run.params.values())
    return (
        f"{n_params:,} parameters, vocabulary {len(d.chars)}, examples train {len(d.Y_train):,} "
        f"/ val {len(d.Y_val):,} / test {len(d.Y_test):,}\n"
        f"backward {c.backward}, {c.dtype}, {c.optimizer} lr {c.lr:g} then {c.lr / 10:g} from "
        f"step {c.decay_step:,}, batch {c.batch_size}, steps {run.step:,} -> {c.steps:,}"
    )


def finish(run: Run, final: dict, job: Job) -> bool:
    """Train and val loss under the final checkpoint's batchnorm statistics, on the CPU where
    they are; then the metrics, the loss curve and 20 names."""
    stats = BatchNormStats(**final["bn_stats"])
    d, params = on_device(run.data, "cpu"), to_cpu(run.params)
    losses = {
        "train": split_loss(params, stats, d.X_train, d.Y_train),
        "val": split_loss(params, stats, d.X_val, d.Y_val),
    }
    block_size = run.config.block_size

    def sample(count: int, g: torch.Generator) -> list[str]:
        return sample_names(params, stats, d.chars, block_size, count, g)

    return report.end_with_names(run, job, None, losses, sample)


def sample(saved: dict, config: MLPConfig, args, device: str, g: torch.Generator) -> list[str]:
    """On the CPU; a checkpoint saved mid-run calibrates batchnorm from the run's data."""
    stats = checkpoint_stats(saved, args.data, config.block_size)
    return sample_names(saved["params"], stats, saved["chars"], config.block_size, args.sample, g)


SPEC = ModelSpec.define(
    globals(),
    config=MLPConfig,
    run=Run,
    about="Train the seed's character-level MLP (makemore) with the backward passes\n"
    "in generated/ and no loss.backward(). The defaults reproduce the seed's run.",
    examples="""examples:
  python -m train --data names.txt                 the seed's run (200k steps), into runs/default
  python -m train --steps 20000 --out runs/short   a short run
  python -m train --resume --out runs/short        continue after Ctrl-C (same result as no stop)
  python -m train --sample 10 --out runs/short     10 names from the saved model
  python -m train --backward autograd --check-every 10000   the reference, with gradient tables
""",
    out="runs/default",
    checkpoint_every=10_000,
    figure="loss.png",
    make=("train", "TRAIN_ARGS"),
    autograd="the same model, init and batches",
    fields={"chars": (str,), "bn_stats": (dict, type(None))},
    min_batch=2,  # batchnorm's unbiased variance divides by batch - 1
)
