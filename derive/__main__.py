"""Command line: ``python -m derive generate OP_FILE... --out DIR``.

``make generate`` is this command over the catalogue in ops/.
"""

from __future__ import annotations

import argparse
import sys

from derive.errors import DerivationError
from derive.generate import generate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m derive", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="derive and emit one module per op file")
    gen.add_argument("files", nargs="+", help="Python files that each define OP = Op(...)")
    gen.add_argument("--out", required=True, help="folder for the generated modules")
    gen.add_argument("--check", action="store_true", help="verify each module against autograd")
    args = parser.parse_args(argv)
    try:
        written = generate(args.files, args.out, check=args.check)
    except DerivationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for path, changed in written:
        print(f"{'wrote' if changed else 'unchanged'} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
