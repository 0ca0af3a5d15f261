"""``python -m train``: the makemore MLP (see ``train.cli``); ``--model classifier``: the digit
classifier (see ``train.classifier.cli``). ``train.models`` picks."""

from train.models import main

raise SystemExit(main())
