"""``python -m train``: the makemore MLP; ``--model classifier``: the digit classifier;
``--model gpt``: makemore's GPT (``train.cli``, ``train.models``).

``python -m train ... | head``: when the reader of stdout (or stderr) leaves, the run goes on
and writes its checkpoint, metrics and plot; only what it prints is dropped.
"""

import signal
import sys


def _stopped_before_starting(signum, frame):  # Ctrl-C while torch loads: nothing to save yet
    print("interrupted before the run started: nothing written", file=sys.stderr)
    raise SystemExit(130)


# a Ctrl-C in the first second, while torch is imported, ended in a traceback through the
# import (found by probing); once it is loaded, the run's own handling of Ctrl-C applies
signal.signal(signal.SIGINT, _stopped_before_starting)

from train.cli import main  # noqa: E402 - after the handler: this import loads torch
from train.distributed import leave, several_processes  # noqa: E402
from train.streams import survive_closed_pipes  # noqa: E402

signal.signal(signal.SIGINT, signal.default_int_handler)  # the run's own Ctrl-C from here on
survive_closed_pipes()
code = main()
if several_processes():
    leave(code)  # past a teardown that can abort a finished run (train.distributed.leave)
raise SystemExit(code)
