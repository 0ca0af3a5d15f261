"""``python -m train``: the makemore MLP (see ``train.cli``); ``--model classifier``: the digit
classifier (see ``train.classifier.cli``). ``train.models`` picks.

``python -m train ... | head``: when the reader of stdout (or stderr) leaves, the run goes on
and writes its checkpoint, metrics and plot; only what it prints is dropped.
"""

from train.models import main
from train.streams import survive_closed_pipes

survive_closed_pipes()
raise SystemExit(main())
