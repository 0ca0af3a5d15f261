"""One source per fact (issue 26): the tables that must name the same things, tied to theirs.

- the function registry (``derive/functions.py``) and the two references that keep their own
  implementations on purpose: the reference interpreter's table and the text oracle's name
  exactly the registry's functions (a missing row would be refused at check time, an extra
  one is a function the language lost);
- the reference's unit tests (``UNARY_CASES``) cover every function of one argument, drawn in
  the registry's domain;
- the catalogue: ``ops/``, the numeric tests' op table (``tests/op_table.py``) and the table
  of docs/generated-modules.md name the same ops.
"""

from __future__ import annotations

import re
from pathlib import Path

from derive.functions import ALIASES, FUNCTIONS
from derive.verify import oracle, reference_functions

ROOT = Path(__file__).resolve().parents[2]
# an op of ops/ the op table leaves out, and where it is tested instead
NOT_IN_OP_TABLE = {"exercise": "the whole graph, tests/modules/test_exercise.py"}


def _unary() -> list:
    return [f for f in FUNCTIONS.values() if f.arity == 1]


def _names(rows: list) -> set[str]:
    """The names the reference may meet for these rows: as written, and SymPy's class name."""
    return {f.name for f in rows} | {f.node.__name__ for f in rows if f.node is not None}


def test_every_function_of_the_registry_has_a_reference_implementation() -> None:
    missing = _names(_unary()) - set(reference_functions.UNARY)
    assert not missing, f"the reference interpreter cannot evaluate {sorted(missing)}"
    extremes = [f for f in FUNCTIONS.values() if f.arity == 2]
    assert {f.node.__name__ for f in extremes} == set(reference_functions.VARIADIC)
    assert [f.name for f in FUNCTIONS.values() if f.arity == 3] == ["where"]  # its own branch


def test_every_reference_implementation_is_a_function_of_the_registry() -> None:
    known = _names(_unary()) | set(ALIASES) | {"Heaviside"}  # relu's derivative, see its table
    extra = set(reference_functions.UNARY) - known
    assert not extra, f"the reference implements {sorted(extra)}, which the language lacks"


def test_the_reference_reads_its_kinks_off_the_registry() -> None:
    kinked = _names([f for f in _unary() if f.kinked])
    assert reference_functions.KINKED == kinked | {"Heaviside"}
    assert {"abs", "sign", "relu"} <= reference_functions.KINKED


def test_the_text_oracle_names_exactly_the_registry() -> None:
    expected = {n for n in FUNCTIONS if n != "where"} | set(ALIASES)  # where(): its own branch
    assert set(oracle.FUNCTIONS) == expected


def test_the_reference_tests_cover_every_function_in_its_domain() -> None:
    from tests.engine.test_reference import UNARY_CASES

    positive = {ALIASES.get(name, name): flag for name, _, _, flag in UNARY_CASES}
    for f in _unary():
        assert f.name in positive, f"UNARY_CASES does not test {f.name}"
        assert positive[f.name] == (f.domain != "real"), f"{f.name}: drawn outside its domain"


def _ops() -> set[str]:
    return {p.stem for p in (ROOT / "ops").glob("*.py")}


def test_the_op_table_lists_exactly_the_ops_of_ops() -> None:
    from tests.op_table import OPS

    listed = [spec.name for spec in OPS]
    assert len(listed) == len(set(listed)), listed
    assert set(listed) | set(NOT_IN_OP_TABLE) == _ops()
    assert not set(listed) & set(NOT_IN_OP_TABLE)
    for name, spec in zip(listed, OPS, strict=True):
        assert spec.module.__name__ == f"generated.{name}", name


def test_the_catalogue_page_lists_exactly_the_ops_of_ops() -> None:
    page = (ROOT / "docs" / "generated-modules.md").read_text()
    table = page.split("\n## The catalogue\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `(\w+)` \|", table, flags=re.M)
    assert len(listed) == len(set(listed)), listed
    assert set(listed) == _ops()
