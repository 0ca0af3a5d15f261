"""The options that define a run: stored in every checkpoint so ``--resume`` repeats them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Self

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64}
BACKWARDS = ("generated", "autograd")
SHARED = ("steps", "seed", "lr", "batch_size")  # every model's config sets their defaults
SAMPLE_SEED_OFFSET = 10  # the seed samples from a generator seeded 2147483647 + 10
SEED_LIMIT = 2**64  # torch generators take seeds in [0, 2**64)


def sampler_seed(seed: int) -> int:
    """The run's seed + 10, as the seed does, wrapped so any 64-bit --seed stays a valid seed."""
    return (seed + SAMPLE_SEED_OFFSET) % SEED_LIMIT


@dataclass(frozen=True)
class Schedule:
    """What every run's config shares: its options common to all models, lr then lr / 10 from
    the halfway step, a dtype by name, and the round trip through a checkpoint.

    Each model's config gives the first four their defaults in its class line,
    ``class GPTConfig(Schedule, steps=5000, seed=3407, lr=5e-4, batch_size=32)``: they are
    declared here once, and a config that gives some must give all four.
    """

    steps: int
    seed: int
    lr: float
    batch_size: int
    dtype: str = "float32"
    backward: str = "generated"
    # the step lr drops to lr / 10 at; 0: the halfway step. A resumed run that extends --steps
    # past a drop keeps it there (preflight.resume_config): its lr never rises again
    decay_at: int = 0

    def __init_subclass__(cls, **defaults: object) -> None:
        super().__init_subclass__()
        shared = {f: t for f, t in Schedule.__annotations__.items() if f in SHARED}
        if defaults and set(defaults) != set(shared):
            raise TypeError(f"{cls.__name__}: give defaults for exactly {', '.join(SHARED)}")
        # own annotations with a default: @dataclass then takes the default for the subclass
        cls.__annotations__ = {
            **{f: shared[f] for f in defaults},
            **cls.__dict__.get("__annotations__", {}),
        }
        for name, value in defaults.items():
            setattr(cls, name, value)

    @property
    def decay_step(self) -> int:
        """The step from which the lr is ``lr / 10``: the halfway step unless fixed earlier."""
        return self.decay_at or self.steps // 2

    def lr_at(self, step: int) -> float:
        """Step decay: ``lr`` for the first half of the steps, ``lr / 10`` from the halfway step."""
        return self.lr if step < self.decay_step else self.lr / 10

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def as_dict(self) -> dict:
        """The options as checkpoint data: plain values, tuples as lists."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, values: dict) -> Self:
        """Rebuild from a checkpoint, ignoring keys a newer or older version may have added.

        Each value must have its field's type (that of the field's default) and a named
        choice must be one the option offers; else ``TypeError`` naming the field, so a
        checkpoint stored with a wrong field is refused at load, not steps later.
        """
        if not isinstance(values, dict):
            raise TypeError(f"the config is a {type(values).__name__}, not a dict")
        known = {f.name: f for f in fields(cls)}
        kept = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if k in known}
        for name, value in kept.items():
            if not _fits(value, known[name].default):
                raise TypeError(f"config field {name} is {value!r}")
        for name, allowed in cls.choices().items():
            if name in kept and kept[name] not in allowed:
                raise TypeError(f"config field {name} is {kept[name]!r}")
        return cls(**kept)

    @classmethod
    def choices(cls) -> dict[str, tuple[str, ...]]:
        """The options whose value is one of a few names."""
        return {"dtype": tuple(DTYPES), "backward": BACKWARDS}


def _fits(value: object, default: object) -> bool:
    """``value`` has the type of ``default``: an int (not a bool) for an int, an int or float
    for a float, a tuple of ints for a tuple."""
    if isinstance(default, bool) or isinstance(value, bool):
        return type(value) is type(default)
    if isinstance(default, float):
        return isinstance(value, int | float)
    if isinstance(default, tuple):
        return isinstance(value, tuple) and all(_fits(v, 1) for v in value)
    return isinstance(value, type(default))
