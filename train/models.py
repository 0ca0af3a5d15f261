"""``python -m train``'s front door: ``--model classifier`` runs the digit classifier
(``train.classifier.cli``), ``--model gpt`` makemore's GPT (``train.gpt.cli``); without
``--model`` (or with ``--model mlp``) the makemore MLP
(``train.cli``). The option is taken out before the chosen CLI parses the rest.
"""

from __future__ import annotations

import sys

MODELS = ("mlp", "classifier", "gpt")


def pick_model(argv: list[str]) -> tuple[str | None, list[str]]:
    """The value of ``--model X`` / ``--model=X`` (None when absent) and the other arguments."""
    rest, model, i = [], None, 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--model":
            model = argv[i + 1] if i + 1 < len(argv) else ""
            i += 2
            continue
        if arg.startswith("--model="):
            model = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    return model, rest


def main(argv: list[str] | None = None) -> int:
    """Dispatch to the chosen model's CLI; an unknown model is one line and exit 2."""
    model, rest = pick_model(list(sys.argv[1:] if argv is None else argv))
    if model == "classifier":
        from train.classifier.cli import main as classifier_main

        return classifier_main(rest)
    if model == "gpt":
        from train.gpt.cli import main as gpt_main

        return gpt_main(rest)
    if model not in (None, "mlp"):
        print(
            f"error: unknown --model {model!r}; choose one of {', '.join(MODELS)}", file=sys.stderr
        )
        return 2
    if model is None and {"-h", "--help"} & set(rest):
        print(
            "(python -m train --model classifier --help: the MLP digit classifier;\n"
            " python -m train --model gpt --help: makemore's GPT)\n"
        )
    from train.cli import main as mlp_main

    return mlp_main(rest)
