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


def _block(first_line: str) -> str:
    (block,) = [b for b in _python_blocks() if b.startswith(first_line)]
    return block


def test_add_your_own_op_example_is_the_tested_op_file() -> None:
    example = _block("# my_ops/sigmoid.py").split("\n", 1)[1]  # drop the comment line
    assert example.strip() == SIGMOID.strip()


def test_gradient_penalty_example_runs_and_equals_torch() -> None:
    import torch
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(5, 8, dtype=torch.float64, generator=gen, requires_grad=True)
    gain, bias = (torch.randn(8, dtype=torch.float64, generator=gen) for _ in range(2))
    scope = {"torch": torch, "x": x, "gain": gain, "bias": bias}
    exec(_block("from generated import layernorm"), scope)  # noqa: S102  the README's own lines
    (gx,) = torch.autograd.grad(
        F.layer_norm(x, (8,), gain, bias).pow(2).sum(), x, create_graph=True
    )
    (want,) = torch.autograd.grad(gx.pow(2).sum(), x)
    assert torch.allclose(scope["penalty_grad"][0], want, rtol=0, atol=1e-10)


def test_op_language_table_lists_exactly_the_registry() -> None:
    from derive.functions import FUNCTIONS

    text = (ROOT / "README.md").read_text()
    section = text[text.index("## The op language") : text.index("## Check an op")]
    listed = re.findall(r"^\| `(\w+)\(", section, flags=re.M)
    assert listed == list(FUNCTIONS)
