"""The models ``python -m train`` trains, one spec file each: ``--model mlp`` (the default),
``classifier``, ``gpt`` and ``cnn``. A new model is one new file here, defining the functions
``ModelSpec`` names and ending in ``SPEC = ModelSpec.define(globals(), ...its facts)``, and one
name in ``MODELS``; the command line (``train.cli``), the loop, checkpoints, Ctrl-C and the end
of a run (``train.engine``) are shared. A model's network (parameters, plain-torch forward,
evaluation, sampling) may live beside its spec (``mlp_net``, ``gpt_net``, ``classifier_net``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from train.engine import RunState
from train.progress import Progress

MODELS = ("mlp", "classifier", "gpt", "cnn")


@dataclass(frozen=True)
class OptionGroups:
    """The parser's groups a spec adds its own options to (``run``: stored in the checkpoint)."""

    run: argparse._ArgumentGroup
    data: argparse._ArgumentGroup
    out: argparse._ArgumentGroup


# what a model's module defines under these names (``ModelSpec.define`` collects them)
HOOKS = (
    "options",
    "resolve_config",
    "load_data",
    "check_memory",
    "init",
    "make_optimizer",
    "make_step",
    "trainer",
    "checkpoint_fields",
    "checkpoint_shapes",
    "describe",
    "finish",
)
OPTIONAL_HOOKS = ("run_fields", "sample")


@dataclass(frozen=True)
class ModelSpec:
    """What a model states; ``C`` is its config, ``D`` its data, ``R`` its run, ``job`` the
    command (``train.engine.Job``: options, checkpoint path, device, processes).

    Its facts, given to ``define`` (its name is its module's: ``--model name``):
      config, run     ``C``, a ``train.config.Schedule`` dataclass of the run's options (stored in
                      the checkpoint); ``R``, a ``train.engine.RunState`` with fields of its own
      about, examples ``--help``'s description and epilog
      out, checkpoint_every, figure   default ``--out`` and ``--checkpoint-every``; the plot the
                      run writes in ``--out`` (``loss.png``, ``monitor.png``)
      make            the Makefile target and its options variable (hints name the make line)
      autograd        what ``--backward autograd`` runs, for ``--help``
      fields          its checkpoint's own keys and their types (required; ``type(None)``: may be
                      None); ``data_keys``: what its checkpoint's ``data`` field records
      progress, advice   the progress line's class; the hint after divergence
      distributed     trains on several processes under torchrun; ``min_batch``: the smallest
                      ``--batch-size``
    Its functions, defined in its module under these names:
      options(groups)                     adds the model's own options (``OptionGroups``)
      resolve_config(args, saved) -> C    the given options over the checkpoint's (``saved``,
                                          when resuming) over the defaults
      load_data(args, C, saved) -> D      ``D.source``, ``D.sha256``: what it was read from
      check_memory(C, D)                  refuses a model or batch that would not fit
      init(C, D, generator) -> params     in the optimizer's order; ``make_optimizer(C, params)``
      make_step(C) -> step                the ``--backward`` step (looked up when training starts)
      trainer(R, step, job, progress)     ``(take_step, after_step)`` for ``engine.run_steps``;
                                          after_step None: the progress line
      checkpoint_fields(R, periodic)      its own keys' values (``periodic``: a save every
                                          ``--checkpoint-every`` steps, not Ctrl-C's or the end's)
      checkpoint_shapes(C, saved)         every parameter a checkpoint must hold, and its shape
      describe(R, job) -> str             printed before the first step
      finish(R, final, job) -> bool       after the final checkpoint ``final``: evaluate, write
                                          and print; False when the model's loss is not finite
      run_fields(args, saved) -> dict     (optional) ``R``'s own fields, new or resumed
      sample(saved, C, args, device, g)   (optional) ``--sample K``'s names
    """

    name: str
    config: type
    about: str
    examples: str
    out: str
    checkpoint_every: int
    figure: str
    make: tuple[str, str]
    autograd: str
    fields: dict[str, tuple[type, ...]]
    options: Callable[[OptionGroups], None]
    resolve_config: Callable[[argparse.Namespace, dict | None], Any]
    load_data: Callable[[argparse.Namespace, Any, dict | None], Any]
    check_memory: Callable[[Any, Any], None]
    init: Callable[..., dict]
    make_optimizer: Callable[..., Any]
    make_step: Callable[[Any], Callable]
    trainer: Callable[..., tuple]
    checkpoint_fields: Callable[[Any, bool], dict]
    checkpoint_shapes: Callable[[Any, dict], dict[str, tuple[int, ...]]]
    describe: Callable[..., str]
    finish: Callable[..., bool]
    run_fields: Callable[[argparse.Namespace, dict | None], dict] = lambda args, saved: {}
    sample: Callable[..., list[str]] | None = None
    run: type = RunState
    data_keys: tuple[str, ...] = ("path", "sha256")
    progress: type = Progress
    advice: str = "Try a smaller --lr."
    distributed: bool = False
    min_batch: int = 1

    @classmethod
    def define(cls, namespace: dict[str, Any], **facts: Any) -> ModelSpec:
        """The spec of the model whose module's names are ``namespace`` (its ``globals()``):
        the functions under ``HOOKS``' names, then its ``facts`` (which may name a function
        the module imports, ``options=classifier_options.options``)."""
        name = namespace["__name__"].rsplit(".", 1)[-1]
        hooks = {hook: namespace[hook] for hook in HOOKS + OPTIONAL_HOOKS if hook in namespace}
        parts = {**hooks, **facts}
        missing = [hook for hook in HOOKS if not callable(parts.get(hook))]
        if missing:
            raise TypeError(f"model {name!r} defines no {', '.join(missing)}")
        return cls(name, **parts)

    @property
    def tag(self) -> str | None:
        """The ``model`` field of its checkpoints; None for the MLP's, which predate it."""
        return None if self.name == MODELS[0] else self.name

    @property
    def prog(self) -> str:
        return "python -m train" + ("" if self.name == MODELS[0] else f" --model {self.name}")


def spec(name: str) -> ModelSpec:
    """The spec of ``--model name``, imported only when chosen (the GPT's imports are not the
    classifier's)."""
    return import_module(f"train.models.{name}").SPEC
