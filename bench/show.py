"""``python -m bench.show``: wall time of ``python -m derive show OP``, a fresh process each.

Three ways, interleaved round by round so a busy spell of the machine falls on all of them:

- ``cold``: ``--no-cache``, the op derived (SymPy imported, the op derived once, rendered);
- ``warm``: the cache of renderings holding the op (derive/explain/cache.py);
- ``--against DIR``: another checkout's ``show`` (e.g. a ``git worktree`` of an older commit),
  run with its own ``.venv`` and no cache, as it had none.

Prints a markdown table of medians and the ratio of each to the first column.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _time(cwd: Path, python: str, args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [python, "-m", "derive", "show", *args], cwd=cwd, env=env, capture_output=True
    )
    took = time.perf_counter() - start
    if done.returncode:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise SystemExit(f"show {' '.join(args)} in {cwd} failed: {tail}")
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.show", description=__doc__)
    parser.add_argument("ops", nargs="*", help="catalogue names (default: all of ops/)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", type=Path, help="another checkout, with its own .venv")
    parser.add_argument("--width", type=int, default=100)
    args = parser.parse_args(argv)
    ops = args.ops or sorted(p.stem for p in (ROOT / "ops").glob("*.py"))
    with tempfile.TemporaryDirectory() as folder:
        here = dict(os.environ, BACKGEN_CACHE_DIR=folder)
        ways: dict[str, tuple[Path, str, list[str], dict[str, str]]] = {}
        if args.against:
            other = args.against.resolve()
            ways["against"] = (other, str(other / ".venv/bin/python"), [], here)
        ways["cold"] = (ROOT, sys.executable, ["--no-cache"], here)
        ways["warm"] = (ROOT, sys.executable, [], here)
        for op in ops:  # fill the cache (and fail early on an op that does not show)
            _time(ROOT, sys.executable, [op, "--width", str(args.width)], here)
        times: dict[tuple[str, str], list[float]] = {(w, op): [] for w in ways for op in ops}
        for r in range(args.rounds):
            for op in ops:
                for way, (cwd, python, extra, env) in ways.items():
                    run = [op, "--width", str(args.width), *extra]
                    times[(way, op)].append(_time(cwd, python, run, env))
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    names = list(ways)
    print(
        "| op | "
        + " | ".join(f"{w} (s)" for w in names)
        + " | "
        + " | ".join(f"{names[0]}/{w}" for w in names[1:])
        + " |"
    )
    print("|---" * (2 * len(names)) + "|")
    for op in ops:
        med = [statistics.median(times[(w, op)]) for w in names]
        cells = [f"{m:.3f}" for m in med] + [f"{med[0] / m:.2f}x" for m in med[1:]]
        print(f"| {op} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
