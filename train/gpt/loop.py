"""The GPT run: new or restored, the training loop on one process or several, checkpoints.

As the MLP's loop (``train.loop``, whose Ctrl-C handling, update and exceptions this reuses):
one ``torch.Generator`` draws the initialisation and then one global batch per step, and a
checkpoint holds its state with the parameters, AdamW's state, the step and the loss history,
so a resumed run takes exactly the steps an uninterrupted one would.

Under ``torchrun`` every process draws the same global batch from the same generator and
takes its own contiguous shard; the generated step runs on the shard, its gradients are
summed over the processes (``train.distributed``) and every process applies the same AdamW
update, so all of them hold the same parameters and generator state, and rank 0's checkpoint
is every process's. Rank 0 alone writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from train import checkpoint
from train.distributed import World
from train.engine import RunState, advance, run_steps, state_payload
from train.gpt.config import GPTConfig
from train.gpt.data import IGNORE, SequenceData
from train.gpt.model import Params, Shape, init_params, param_shapes
from train.gpt.step import StepFn
from train.progress import Progress

MODEL = "gpt"  # marks our checkpoints apart from the MLP's and the classifier's
SINGLE = World()  # one process
REQUIRED = ("config", "data", "chars", "block_size", "step", "params", "optimizer", "generator")


@dataclass
class Run(RunState):
    """The GPT's run: ``RunState`` plus where its data came from."""

    data_path: str = ""


def make_optimizer(config: GPTConfig, params: Params) -> torch.optim.AdamW:
    """makemore's AdamW: betas (0.9, 0.99), eps 1e-8, weight decay on every parameter."""
    return torch.optim.AdamW(
        list(params.values()),
        lr=config.lr,
        betas=(0.9, 0.99),
        eps=1e-8,
        weight_decay=config.weight_decay,
    )


def shape_of(config: GPTConfig, data: SequenceData) -> Shape:
    return Shape.of(config, len(data.chars), data.block_size)


def new_run(config: GPTConfig, data: SequenceData, data_path: str, device: str) -> Run:
    """Fresh parameters from the seeded generator (on the CPU, so every device starts alike);
    the same generator then draws the batches."""
    g = torch.Generator().manual_seed(config.seed)
    params = init_params(shape_of(config, data), g, config.torch_dtype)
    params = {k: v.to(device) for k, v in params.items()}
    return Run(config, data, params, make_optimizer(config, params), g, data_path=data_path)


def restore_run(
    payload: dict, config: GPTConfig, data: SequenceData, data_path: str, device: str
) -> Run:
    """Rebuild a run from a checkpoint payload (see ``snapshot``), on ``device``."""
    params = {k: v.to(device, config.torch_dtype) for k, v in payload["params"].items()}
    optimizer = make_optimizer(config, params)
    optimizer.load_state_dict(payload["optimizer"])  # moves its state to the params' device
    g = torch.Generator()
    g.set_state(payload["generator"])
    at, losses, seconds = payload["step"], payload["losses"].tolist(), payload["seconds"]
    return Run(config, data, params, optimizer, g, at, losses, seconds, at, data_path)


def snapshot(run: Run) -> dict:
    """Everything ``restore_run`` and ``--sample`` need, on the CPU, as plain tensors and
    builtins. Raises ``Diverged`` rather than return a parameter or AdamW state not finite."""
    return {
        **state_payload(run),
        "model": MODEL,
        "data": {"path": run.data_path, "sha256": run.data.sha256},
        "chars": run.data.chars,
        "block_size": run.data.block_size,
    }


def save(run: Run, path: Path, world: World) -> None:
    """Checkpoint the run (rank 0 writes; every rank checks, so all agree on ``Diverged``)."""
    payload = snapshot(run)
    if world.main:
        checkpoint.save(path, payload)
    run.saved_step = run.step


def load_checkpoint(path: Path) -> dict:
    """A GPT checkpoint, its digest and every parameter's shape checked."""
    payload = checkpoint.verified(path, MODEL, REQUIRED)
    try:
        config = GPTConfig.from_dict(payload["config"])
        shape = Shape.of(config, len(payload["chars"]), payload["block_size"])
    except (KeyError, TypeError):
        raise checkpoint.CheckpointError(f"checkpoint {path} has no usable config") from None
    checkpoint.check_shapes(path, payload["params"], param_shapes(shape))
    return payload


def draw_shard(run: Run, world: World, device: str) -> tuple[torch.Tensor, ...]:
    """This process's shard of the step's global batch, and its share of the counted targets.

    Every process draws the same global batch, so each can count the whole batch's targets
    itself: its loss (a mean over its own counted positions) is weighted by its count over
    the global count, and the weighted losses and gradients sum to the one-process ones.
    """
    X, Y = run.data.X_train, run.data.Y_train
    ix = torch.randint(0, X.shape[0], (run.config.batch_size,), generator=run.generator)
    share = run.config.batch_size // world.size
    shard = ix[world.rank * share : (world.rank + 1) * share]
    Xs, Ys = X[shard].to(device), Y[shard].to(device)
    n_global, n_shard = (Y[ix] != IGNORE).sum().item(), (Y[shard] != IGNORE).sum().item()
    weight = torch.tensor(n_shard / n_global, dtype=run.config.torch_dtype, device=device)
    return Xs, Ys, weight


def train(
    run: Run,
    ckpt: Path,
    checkpoint_every: int,
    progress: Progress,
    step_fn: StepFn,
    world: World = SINGLE,
    device: str = "cpu",
) -> None:
    """Step until ``config.steps``; checkpoint every ``checkpoint_every`` steps and at the end.

    Raises ``Interrupted`` after Ctrl-C on any process (all stop at the same step; the caller
    saves) and ``Diverged`` on a non-finite loss, before that step's update, without saving.
    """

    def take_step(interrupted: Callable[[], bool]) -> bool:
        Xs, Ys, weight = draw_shard(run, world, device)
        loss, grads = step_fn(run.params, Xs, Ys, weight)
        grads, loss, stop = world.reduce(grads, loss, interrupted())
        advance(run, loss.item(), grads)
        return stop

    run_steps(
        run,
        take_step,
        lambda: progress.update(run.step, run.losses[-1]),
        lambda: save(run, ckpt, world),
        checkpoint_every,
        patient=world.size > 1,
    )
