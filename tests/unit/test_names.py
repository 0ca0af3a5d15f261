"""No name an op gives shadows one its generated functions read (derive/names.py, RESERVED).

A generated function binds the op's names (inputs, params, sizes, intermediates) as its own
variables, so every other name it reads must be one no op may take: a tensor named ``tuple``
made ``tuple(batch_shape)`` a call of a tensor, a param ``float`` made ``float("-inf")`` a
call of a number (found by probing). Each catalogue module is read as Python: in every
function that binds one of its op's names, each builtin it reads is reserved.
"""

from __future__ import annotations

import ast
import builtins
import glob
import runpy
from pathlib import Path

import pytest

from derive.language import parse
from derive.names import RESERVED

BUILTINS = frozenset(dir(builtins)) - {"True", "False", "None"}
MODULES = sorted(p for p in glob.glob("generated/*.py") if Path(p).stem != "__init__")


def _op_names(path: str) -> set[str]:
    g = parse(runpy.run_path(f"ops/{Path(path).name}")["OP"])
    return set(g.tensors) | {str(p) for p in g.params} | {str(s) for s in g.sizes}


@pytest.mark.parametrize("path", MODULES)
def test_every_builtin_a_function_binding_op_names_reads_is_reserved(path: str) -> None:
    names = _op_names(path)
    unreserved = set()
    for f in ast.walk(ast.parse(Path(path).read_text())):
        if not isinstance(f, ast.FunctionDef):
            continue
        nodes = list(ast.walk(f))
        bound = {a.arg for a in f.args.args + f.args.kwonlyargs}
        bound |= {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        if bound & names:
            reads = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            unreserved |= (reads & BUILTINS) - RESERVED
    assert not unreserved, f"{path}: reads {sorted(unreserved)}, which an op may name"
