"""The documentation quotes code: every quote must be what ships, and every example must run.

- a ```python block whose first line is ``# from generated/<op>.py ...`` quotes emitted code:
  each of its lines must be a line of those modules;
- the README's op file is the one the tests generate (tests/op_table.py's SIGMOID);
- the README's gradient penalty runs and equals F.layer_norm's;
- docs/language.md's table of functions lists exactly the registry, in its order, and the
  registry row it quotes is a row of derive/functions.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.op_table import SIGMOID

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LANGUAGE = ROOT / "docs" / "language.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


def block(path: Path, first_line: str) -> str:
    (found,) = [b for b in python_blocks(path) if b.startswith(first_line)]
    return found


def section(path: Path, heading: str) -> str:
    """The text under a ``## heading`` up to the next one."""
    text = path.read_text()
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


QUOTES = [
    pytest.param(quote, id=f"{path.relative_to(ROOT)}:{k}")
    for path in DOCUMENTS
    for k, quote in enumerate(python_blocks(path))
    if quote.startswith("# from generated/")
]


def test_the_readme_and_the_pipeline_page_quote_emitted_code() -> None:
    quoting = {q.id.split(":")[0] for q in QUOTES}
    assert {"README.md", "docs/pipeline.md"} <= quoting, quoting


@pytest.mark.parametrize("quote", QUOTES)
def test_quoted_torch_lines_are_in_the_generated_modules(quote: str) -> None:
    header, body = quote.split("\n", 1)
    names = re.findall(r"generated/(\w+)\.py", header)
    shipped = {
        line.strip()
        for name in names
        for line in (ROOT / "generated" / f"{name}.py").read_text().splitlines()
    }
    quoted = [line.strip() for line in body.splitlines() if line.strip()]
    assert quoted, f"an empty quote of {names}"
    missing = [line for line in quoted if line not in shipped]
    assert not missing, f"the docs quote lines the generator no longer emits: {missing}"


def test_your_own_op_example_is_the_tested_op_file() -> None:
    example = block(README, "# my_ops/sigmoid.py").split("\n", 1)[1]  # drop the comment line
    assert example.strip() == SIGMOID.strip()


def test_gradient_penalty_example_runs_and_equals_torch() -> None:
    import torch
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(5, 8, dtype=torch.float64, generator=gen, requires_grad=True)
    gain, bias = (torch.randn(8, dtype=torch.float64, generator=gen) for _ in range(2))
    scope = {"torch": torch, "x": x, "gain": gain, "bias": bias}
    exec(block(README, "from generated import layernorm"), scope)  # noqa: S102  README's lines
    (gx,) = torch.autograd.grad(
        F.layer_norm(x, (8,), gain, bias).pow(2).sum(), x, create_graph=True
    )
    (want,) = torch.autograd.grad(gx.pow(2).sum(), x)
    assert torch.allclose(scope["penalty_grad"][0], want, rtol=0, atol=1e-10)


def test_functions_table_lists_exactly_the_registry() -> None:
    from derive.functions import FUNCTIONS

    listed = re.findall(r"^\| `(\w+)\(", section(LANGUAGE, "Functions"), flags=re.M)
    assert listed == list(FUNCTIONS)


def test_the_readme_names_every_function_of_the_registry() -> None:
    from derive.functions import FUNCTIONS

    brief = " ".join(section(README, "The op language in brief").split())
    listed = re.search(r"the functions `([^`]*)`", brief).group(1).split()
    assert listed == [name for name in FUNCTIONS if name != "where"]  # where() shown apart


def test_quoted_registry_row_is_a_row_of_the_registry() -> None:
    (row,) = re.findall(r"```python\n(_row\(.*?)\n```", section(LANGUAGE, "Add a function"))
    rows = (ROOT / "derive" / "functions.py").read_text().splitlines()
    assert row.strip() in {line.strip() for line in rows}, row
