"""How long ``make generate`` takes for the whole catalogue, into a throwaway folder.

Timed as a subprocess, exactly the command ``make generate`` runs (interpreter start, imports
of sympy and torch included), but with ``--out`` a temporary folder: never into generated/.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def generate_command(out_dir: str) -> list[str]:
    """``python -m derive generate <ops/*.py sorted> --out out_dir --formulas``: make's."""
    ops = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "ops").glob("*.py"))
    return [sys.executable, "-m", "derive", "generate", *ops, "--out", out_dir, "--formulas"]


def time_generate(repeats: int) -> dict:
    """Median wall seconds of ``repeats`` fresh generations (each into an empty folder)."""
    times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="bench-generate-") as out_dir:
            command = generate_command(out_dir)
            start = time.perf_counter()
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
            times.append(time.perf_counter() - start)
        if done.returncode != 0:
            return {"error": done.stderr.strip().splitlines()[-1:], "seconds": times}
    shown = " ".join(["python -m derive generate", *command[4:-3], "--out <tmp> --formulas"])
    return {"median_s": statistics.median(times), "seconds": times, "command": shown}
