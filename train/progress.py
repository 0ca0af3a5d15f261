"""A dependency-free progress line on stderr: step, smoothed loss, steps/s and time left.

On a terminal the line rewrites itself with '\\r' a few times a second; into a log file or a
pipe it writes a plain line every 5% of the run instead, so logs stay readable.

One minibatch's loss jumps by +-0.3 from step to step, so a single value makes a run seem to
get worse when it does not; the line shows an exponential moving average instead,
``ema = 0.99 ema + 0.01 loss``, divided by ``1 - 0.99**n`` so the first steps are not pulled
toward 0 (Adam's bias correction). It averages over roughly the last 100 steps.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import TextIO

EMA_DECAY = 0.99


def clock(seconds: float) -> str:
    """3:05 or 1:02:03."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """Call ``update`` every step; it decides itself when to print."""

    def __init__(
        self,
        total: int,
        start_step: int,
        stream: TextIO | None = None,
        history: Iterable[float] = (),
    ) -> None:
        """``history``: the losses of earlier sessions of a resumed run, to seed the average."""
        self.total = total
        self.start_step = start_step
        self.stream = stream if stream is not None else sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.perf_counter()
        self.last_print = 0.0
        self.every = max(1, total // 20)
        self.ema, self.weight = 0.0, 0.0
        for loss in history:
            self.smooth(loss)

    def smooth(self, loss: float) -> float:
        """Fold one loss into the moving average; returns the bias-corrected average."""
        self.ema = EMA_DECAY * self.ema + (1 - EMA_DECAY) * loss
        self.weight = EMA_DECAY * self.weight + (1 - EMA_DECAY)
        return self.ema / self.weight

    def rate(self, step: int) -> float:
        """Steps per second in this session (a resumed run's earlier steps do not count)."""
        elapsed = time.perf_counter() - self.started
        return (step - self.start_step) / elapsed if elapsed > 0 else 0.0

    def update(self, step: int, loss: float) -> None:
        self.show(step, f"loss (ema {EMA_DECAY}) {self.smooth(loss):.4f}")

    def show(self, step: int, middle: str) -> None:
        """Print ``step i/n (p%) | middle | rate | time left``, at most 5 times a second live."""
        now = time.perf_counter()
        if self.live and now - self.last_print < 0.2 and step < self.total:
            return
        if not self.live and step % self.every and step < self.total:
            return
        self.last_print = now
        rate = self.rate(step)
        left = (self.total - step) / rate if rate > 0 else 0.0
        line = (
            f"step {step:>{len(str(self.total))}}/{self.total} ({100 * step / self.total:5.1f}%)"
            f" | {middle} | {rate:,.0f} steps/s | {clock(left)} left"
        )
        self.stream.write(("\r" + line + "\x1b[K") if self.live else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the live line so the next output starts on a fresh one."""
        if self.live:
            self.stream.write("\n")
            self.stream.flush()
