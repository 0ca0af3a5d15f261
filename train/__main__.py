"""``python -m train``: the makemore MLP; ``--model classifier``: the digit classifier;
``--model gpt``: makemore's GPT (``train.cli``, ``train.models``).

``python -m train ... | head``: when the reader of stdout (or stderr) leaves, the run goes on
and writes its checkpoint, metrics and plot; only what it prints is dropped.
"""

from train.cli import main
from train.streams import survive_closed_pipes

survive_closed_pipes()
raise SystemExit(main())
