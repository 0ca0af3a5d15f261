"""The README quotes generated code and the user-op example: the quotes must be what ships."""

from __future__ import annotations

import re
from pathlib import Path

from tests.op_table import SIGMOID

ROOT = Path(__file__).resolve().parent.parent


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_quoted_torch_lines_are_in_the_generated_modules() -> None:
    emitted = _python_blocks()[0]
    shipped = {
        line.strip()
        for name in ("batchnorm", "cross_entropy")
        for line in (ROOT / "generated" / f"{name}.py").read_text().splitlines()
    }
    quoted = [line.strip() for line in emitted.splitlines() if line.strip()]
    assert quoted, "the README lost its excerpt of emitted code"
    missing = [line for line in quoted if line not in shipped]
    assert not missing, f"README quotes lines the generator no longer emits: {missing}"


def test_add_your_own_op_example_is_the_tested_op_file() -> None:
    example = _python_blocks()[1].split("\n", 1)[1]  # drop the "# my_ops/sigmoid.py" comment
    assert example.strip() == SIGMOID.strip()


def test_op_language_table_lists_exactly_the_registry() -> None:
    from derive.functions import FUNCTIONS

    text = (ROOT / "README.md").read_text()
    section = text[text.index("## The op language") : text.index("## Check an op")]
    listed = re.findall(r"^\| `(\w+)\(", section, flags=re.M)
    assert listed == list(FUNCTIONS)
