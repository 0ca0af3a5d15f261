"""Names a user gives that become Python names or file names in the generated code.

An op's name is the generated module's file name (``<out>/<name>.py``) and the name it is
imported by, so it must be a plain Python identifier: that rules out path separators and ``..``
(a module written outside ``--out``), ``-`` and the empty name (a module nobody can import),
keywords (``class``) and dunders (``__init__`` would replace the package's ``__init__.py``).
The check is one function so every place that reads a name can use the same rule.
"""

from __future__ import annotations

import difflib
import keyword
from collections.abc import Iterable


def identifier_problem(name: object) -> str | None:
    """Why ``name`` cannot be a Python name in generated code, or None when it can."""
    if not isinstance(name, str):
        return f"must be a string, got {type(name).__name__}"
    if not name:
        return "is empty"
    if "/" in name or "\\" in name or ".." in name:
        return "contains a path separator or '..'"
    if not name.isidentifier():
        return "is not a Python identifier (letters, digits and '_', not starting with a digit)"
    if keyword.iskeyword(name):
        return "is a Python keyword"
    if name.startswith("__") and name.endswith("__"):
        return "begins and ends with '__', which Python reserves"
    return None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` naming the known name closest to a misspelt ``word``, or ''."""
    close = difflib.get_close_matches(word, sorted(known), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def gradient_name(tensor: str) -> str:
    """The name of ``tensor``'s gradient in generated code: ``d<tensor>``, or ``d<tensor>_``
    where that is a Python keyword (a tensor ``el`` or ``ef`` made ``del = ...``, code that does
    not parse; found by trying a GAT layer), the trailing underscore as PEP 8 has it."""
    name = f"d{tensor}"
    return f"{name}_" if keyword.iskeyword(name) else name


BATCH_SHAPE = "batch_shape"  # a generated module's name for the leading ``...`` axes' shape

# What a generated module itself defines or reads: a tensor, size or param of the same name would
# shadow it (``torch = x.shape[0]``) and break the module at run time.
RESERVED = frozenset(
    {
        "torch",
        "math",
        "forward",
        "backward",
        "backward_all",
        "Function",
        "OP",
        "SAVED",
        "ctx",
        "self",
        "saved",
        "grad_out",
        "grads",  # the double backward's locals and constants (the template's _Backward)
        "cotangents",
        "needs",  # the backward's flags (derive/ir/needs.py) and the double backward's
        "present",  # (derive/ir/given.py): a param of the name was read as the flags
        "NOT_DERIVED",
        BATCH_SHAPE,
        "Batch",
        "batch",
    }
    # python's own names the generated functions call where an op's names are bound (a tensor
    # named tuple made tuple(batch_shape) a call of it; a param float made float("-inf") one;
    # found by probing): tests/unit/test_names.py holds the generated modules to this list
    | {
        "IndexError",
        "RuntimeError",
        "all",
        "any",
        "bool",
        "enumerate",
        "float",
        "int",
        "isinstance",
        "len",
        "list",
        "max",
        "min",
        "next",
        "range",
        "set",
        "staticmethod",
        "str",
        "sum",
        "tuple",
        "type",
        "zip",
    }
)


def value_name_problem(name: str) -> str | None:
    """Why a tensor, size or param cannot have this name in a generated module, or None."""
    problem = identifier_problem(name)
    if problem is not None:
        return problem
    if name in RESERVED:
        return "is a name the generated module uses itself"
    if name.startswith("_"):
        return "starts with '_', which generated modules keep for their own names"
    return None
