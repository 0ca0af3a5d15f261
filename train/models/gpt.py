"""makemore's GPT on the names (``python -m train --model gpt``), its backward chained by hand.

token + position embeddings -> n_layer pre-norm blocks -> final layernorm -> bias-free head, its
parameters, plain-torch forward and sampler in ``gpt_net``. ``generated_step`` runs the forward
through generated/ (embedding, layernorm, causal_self_attention, linear, gelu or gelu_tanh,
sequence_cross_entropy), keeping each op's ``saved``, then every backward in reverse, one
visible call per op; no ``loss.backward()``. A residual ``x + f(x)`` sends its gradient down
both paths, so the backward adds the branch's dx to the running one. ``autograd_step`` is the
same model through ``gpt_net``'s plain torch forward and ``loss.backward()``.

Under ``torchrun`` every process draws the same global batch from the same generator and takes
its own contiguous shard; the generated step runs on the shard, its gradients are summed over
the processes (``train.distributed``) and every process applies the same AdamW update, so all of
them hold the same parameters and generator state, and rank 0's checkpoint is every process's.
``weight`` is the loss's own gradient, ``dloss/dloss``: 1 on one process. With several, each
process's loss is the mean over its own counted positions, so it is weighted by its share of the
global batch's counted positions, and the weighted gradients sum to the one-process ones. Both
steps return the weighted loss as a tensor (no ``.item()``, so the step compiles whole).

A checkpoint adds the vocabulary and the block size; the end of a run prints train, val and
test loss (over the MLP's test words, ``train.data``) and 20 names.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from generated import (
    causal_self_attention,
    embedding,
    gelu,
    gelu_tanh,
    layernorm,
    linear,
    sequence_cross_entropy,
)
from train import preflight, report
from train.cli import add_names_data, positive, positive_float
from train.config import Schedule
from train.data import IGNORE, Sequences, load_sequences, names_path
from train.engine import Job, RunState, advance, draw
from train.models import ModelSpec, OptionGroups
from train.models.gpt_net import (
    BLOCK_PARAMS,
    LN_EPS,
    Params,
    Shape,
    block,
    init_params,
    logits_torch,
    loss_torch,
    param_shapes,
    sample_names,
    split_loss,
    step_bytes,
)
from train.progress import Progress

GELUS = ("tanh", "erf")  # makemore's NewGELU (tanh approximation), or F.gelu's exact erf form
GELU = {"tanh": gelu_tanh, "erf": gelu}
Grads = dict[str, torch.Tensor]
StepFn = Callable[[Params, torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, Grads]]


@dataclass(frozen=True)
class GPTConfig(Schedule, steps=5000, seed=3407, lr=5e-4, batch_size=32):
    """makemore's defaults: 4 layers, 4 heads, 64 wide; AdamW 5e-4, betas (0.9, 0.99), wd 0.01,
    seed 3407 (makemore's).

    makemore keeps its learning rate constant, so ``lr_at`` does too (the MLP and the
    classifier divide theirs by 10 at the halfway step).
    """

    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 64
    weight_decay: float = 0.01
    gelu: str = "tanh"

    def lr_at(self, step: int) -> float:
        return self.lr

    @classmethod
    def choices(cls) -> dict[str, tuple[str, ...]]:
        return {**super().choices(), "gelu": GELUS}


# --- options, data, memory ----------------------------------------------------------------------


def options(groups: OptionGroups) -> None:
    d, run = GPTConfig(), groups.run
    run.add_argument("--lr", type=positive_float, metavar="X", help=f"AdamW, constant ({d.lr})")
    run.add_argument("--weight-decay", type=float, metavar="X", help=f"({d.weight_decay})")
    run.add_argument("--n-layer", type=positive(), metavar="N", help=f"({d.n_layer})")
    run.add_argument("--n-head", type=positive(), metavar="N", help=f"({d.n_head})")
    run.add_argument("--n-embd", type=positive(), metavar="N", help=f"({d.n_embd})")
    run.add_argument("--gelu", choices=GELUS, help=f"tanh: makemore's NewGELU ({d.gelu})")
    add_names_data(groups.data)


def resolve_config(args: argparse.Namespace, saved: dict | None) -> GPTConfig:
    config = preflight.resolve(GPTConfig, preflight.given_options(args, GPTConfig), saved)
    if config.n_embd % config.n_head:
        raise preflight.UsageError(
            f"--n-embd {config.n_embd} is not a multiple of --n-head {config.n_head}"
        )
    return config


def load_data(args: argparse.Namespace, config: GPTConfig, saved: dict | None) -> Sequences:
    return load_sequences(names_path(args.data, saved))


def shape(config: GPTConfig, vocab_size: int, block_size: int) -> Shape:
    return Shape(vocab_size, block_size, config.n_layer, config.n_head, config.n_embd)


def check_memory(config: GPTConfig, data: Sequences) -> None:
    """Refuse a model or batch that would not fit, before its parameters are allocated."""
    s = shape(config, len(data.chars), data.block_size)
    need = step_bytes(s, config.batch_size, config.dtype)
    what = f"--n-layer {s.n_layer} --n-embd {s.n_embd} --batch-size {config.batch_size}"
    preflight.check_fits(need, what, "use a smaller model or --batch-size")


# --- init and the step --------------------------------------------------------------------------


def init(config: GPTConfig, data: Sequences, g: torch.Generator) -> Params:
    """On the CPU, so every device starts alike."""
    return init_params(shape(config, len(data.chars), data.block_size), g, config.torch_dtype)


def make_optimizer(config: GPTConfig, params: Params) -> torch.optim.AdamW:
    """makemore's AdamW: betas (0.9, 0.99), eps 1e-8, weight decay on every parameter."""
    return torch.optim.AdamW(
        list(params.values()),
        lr=config.lr,
        betas=(0.9, 0.99),
        eps=1e-8,
        weight_decay=config.weight_decay,
    )


def block_forward(
    x: torch.Tensor, p: list[torch.Tensor], config: GPTConfig
) -> tuple[torch.Tensor, tuple]:
    """One pre-norm block, ``x + attn(ln1(x))`` then ``x + mlp(ln2(x))``, and what each op saved."""
    B, T, C = x.shape
    g1, b1_, Wqkv, bqkv, Wo, bo, g2, b2_, W1, b1, W2, b2 = p
    h, ln1 = layernorm.forward(x, g1, b1_, eps=LN_EPS)
    a, attn = causal_self_attention.forward(h, Wqkv, bqkv, Wo, bo, n_head=config.n_head)
    x = x + a
    h, ln2 = layernorm.forward(x, g2, b2_, eps=LN_EPS)
    u, fc = linear.forward(h.reshape(B * T, C), W1, b1)  # (B*T, 4C)
    u, act = GELU[config.gelu].forward(u)
    m, proj = linear.forward(u, W2, b2)
    return x + m.view(B, T, C), (ln1, attn, ln2, fc, act, proj)


def block_backward(
    dx: torch.Tensor, saved: tuple, config: GPTConfig
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """``block_forward``'s ops in reverse: dx of the block's input, and its parameters' grads in
    ``BLOCK_PARAMS`` order. A residual sends dx down both paths: the branch's dx is added."""
    B, T, C = dx.shape
    ln1, attn, ln2, fc, act, proj = saved
    du, dW2, db2 = linear.backward(dx.reshape(B * T, C), proj)
    (du,) = GELU[config.gelu].backward(du, act)
    dh, dW1, db1 = linear.backward(du, fc)
    dh, dg2, db2_ = layernorm.backward(dh.view(B, T, C), ln2)
    dx = dx + dh
    da, dWqkv, dbqkv, dWo, dbo = causal_self_attention.backward(dx, attn)
    dh, dg1, db1_ = layernorm.backward(da, ln1)
    return dx + dh, (dg1, db1_, dWqkv, dbqkv, dWo, dbo, dg2, db2_, dW1, db1, dW2, db2)


def generated_step(
    params: Params, X: torch.Tensor, Y: torch.Tensor, weight: torch.Tensor, *, config: GPTConfig
) -> tuple[torch.Tensor, Grads]:
    """Loss and every parameter's gradient through generated/ forwards and backwards."""
    B, T = X.shape
    lm_head = params["lm_head"]
    no_bias = lm_head.new_zeros(lm_head.shape[1])  # the head is bias-free; its db is dropped

    # forward, keeping what each op saved for its backward
    tok, tok_saved = embedding.forward(X, params["wte"])  # (B, T, C)
    # one row per position, broadcast over the batch: its backward takes dx summed over it
    pos, pos_saved = embedding.forward(torch.arange(T, device=X.device), params["wpe"])  # (T, C)
    x, saved = tok + pos, []
    for layer in range(config.n_layer):
        x, block_saved = block_forward(x, block(params, layer), config)
        saved.append(block_saved)
    h, lnf = layernorm.forward(x, params["lnf_gain"], params["lnf_bias"], eps=LN_EPS)
    logits, head = linear.forward(h.reshape(B * T, -1), lm_head, no_bias)
    loss, ce = sequence_cross_entropy.forward(logits.view(B, T, -1), Y)
    # what the backward reads is in the saved sets: the activations go now, and each op's saved
    # set once its backward has run, as autograd frees a node's (the step's peak memory)
    del tok, pos, h, logits

    # backward, in reverse, from dloss = weight
    grads: Grads = {}
    dlogits, _ = sequence_cross_entropy.backward(weight.to(loss.dtype), ce)
    del ce
    dh, grads["lm_head"], _ = linear.backward(dlogits.reshape(B * T, -1), head, (True, True, False))
    del dlogits, head
    dx, grads["lnf_gain"], grads["lnf_bias"] = layernorm.backward(dh.view(x.shape), lnf)
    del dh, lnf, x
    for layer in reversed(range(config.n_layer)):
        dx, block_grads = block_backward(dx, saved.pop(), config)
        grads.update({f"h{layer}.{k}": g for k, g in zip(BLOCK_PARAMS, block_grads, strict=True)})
    _, grads["wpe"] = embedding.backward(dx.sum(0), pos_saved)
    _, grads["wte"] = embedding.backward(dx, tok_saved)
    return loss.detach() * weight, grads


def autograd_step(
    params: Params, X: torch.Tensor, Y: torch.Tensor, weight: torch.Tensor, *, config: GPTConfig
) -> tuple[torch.Tensor, Grads]:
    """Same model and batch: plain torch forward and ``loss.backward()``, on detached leaves."""
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    loss = loss_torch(logits_torch(leaves, X, config), Y) * weight
    loss.backward()
    return loss.detach(), {k: leaves[k].grad for k in params}


STEPS = {"generated": generated_step, "autograd": autograd_step}


def make_step(config: GPTConfig) -> StepFn:
    """The ``--backward``'s step bound to the config's sizes, looked up when training starts."""
    return partial(STEPS[config.backward], config=config)


def trainer(run: RunState, step: StepFn, job: Job, progress: Progress) -> tuple:
    """This process's shard of the global batch, its weighted loss and gradients, summed over
    the processes with the Ctrl-C flag in one all-reduce, then the same update everywhere."""
    X, Y, world = run.data.X_train, run.data.Y_train, job.world
    share = run.config.batch_size // world.size

    def take_step(interrupted: Callable[[], bool]) -> bool:
        ix = draw(run, X.shape[0])
        shard = ix[world.rank * share : (world.rank + 1) * share]
        n_global, n_shard = (Y[ix] != IGNORE).sum().item(), (Y[shard] != IGNORE).sum().item()
        weight = torch.tensor(n_shard / n_global, dtype=run.config.torch_dtype, device=X.device)
        loss, grads = step(run.params, X[shard], Y[shard], weight)
        grads, loss, stop = world.reduce(grads, loss, interrupted())
        advance(run, loss.item(), grads)
        return stop

    return take_step, None


# --- the checkpoint, the end of a run, --sample ------------------------------------------------


def checkpoint_fields(run: RunState, periodic: bool) -> dict:
    d = run.data
    data = {"path": d.source, "sha256": d.sha256}
    return {"data": data, "chars": d.chars, "block_size": d.block_size}


def checkpoint_shapes(config: GPTConfig, saved: dict) -> dict[str, tuple[int, ...]]:
    return param_shapes(shape(config, len(saved["chars"]), saved["block_size"]))


def describe(run: RunState, job: Job) -> str:
    c, d, world = run.config, run.data, job.world
    n_params = sum(p.numel() for p in run.params.values())
    where = job.device + (f", {world.size} processes" if world.size > 1 else "")
    compiled = " (compiled)" if job.args.compile else ""
    return (
        f"GPT: {c.n_layer} layers, {c.n_head} heads, n_embd {c.n_embd}, block size "
        f"{d.block_size}, vocabulary {len(d.chars)}: {n_params:,} parameters\n"
        f"words train {len(d.Y_train):,} / val {len(d.Y_val):,} / test {len(d.Y_test):,}\n"
        f"backward {c.backward}{compiled}, {c.dtype}, {where}, AdamW "
        f"lr {c.lr:g} wd {c.weight_decay:g}, batch {c.batch_size}, steps {run.step:,} -> "
        f"{c.steps:,}"
    )


def finish(run: RunState, final: dict, job: Job) -> bool:
    """Train, val and test loss (the test words are the MLP's), metrics, loss curve, names."""
    d, c = run.data, run.config
    losses = {split: split_loss(run.params, X, Y, c) for split, (X, Y) in d.splits().items()}

    def sample(count: int, g: torch.Generator) -> list[str]:
        return sample_names(run.params, c, d.chars, d.block_size, count, g)

    return report.end_with_names(run, job, "gpt", losses, sample, block_size=d.block_size)


def sample(saved: dict, config: GPTConfig, args, device: str, g: torch.Generator) -> list[str]:
    params = {k: v.to(device) for k, v in saved["params"].items()}
    return sample_names(params, config, saved["chars"], saved["block_size"], args.sample, g)


SPEC = ModelSpec.define(
    globals(),
    config=GPTConfig,
    about="Train makemore's GPT on names with the backward chained by hand from\n"
    "generated/ (no loss.backward()). Defaults are makemore's.",
    examples="""examples:
  python -m train --model gpt                          makemore's GPT, 5,000 steps, runs/gpt
  python -m train --model gpt --resume                 continue after Ctrl-C
  python -m train --model gpt --sample 10              10 names from the saved model
  python -m train --model gpt --backward autograd --out runs/gpt-autograd
  torchrun --nproc_per_node=2 -m train --model gpt     the same run on two processes
""",
    out="runs/gpt",
    checkpoint_every=1000,
    figure="loss.png",
    make=("gpt", "GPT_ARGS"),
    autograd="the same model in plain torch ops",
    fields={"chars": (str,), "block_size": (int,)},
    distributed=True,
)
