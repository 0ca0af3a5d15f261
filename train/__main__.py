"""``python -m train``: see ``train.cli`` for the options."""

from train.cli import main

raise SystemExit(main())
