"""stdout and stderr that outlive their reader: ``python -m train ... | head`` exits early, and
the next print would raise BrokenPipeError, killing the run before it saves anything.

Python ignores SIGPIPE, so a write to a closed pipe raises; these wrappers catch it once, point
the stream's file descriptor at /dev/null (so the buffered text and later writes go nowhere
without error) and let the run go on.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO


class PipeSafe:
    """A text stream whose writes and flushes survive a closed pipe."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._discard()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._discard()

    def _discard(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)
        try:
            self._stream.flush()  # what was buffered now goes to /dev/null
        except OSError:
            pass

    def __getattr__(self, name: str) -> object:  # isatty, fileno, encoding, ...
        return getattr(self._stream, name)


def survive_closed_pipes() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` (a real process only: tests capture them)."""
    sys.stdout = PipeSafe(sys.stdout)  # type: ignore[assignment]
    sys.stderr = PipeSafe(sys.stderr)  # type: ignore[assignment]
