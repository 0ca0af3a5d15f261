"""Names a user gives that become Python names or file names in the generated code.

An op's name is the generated module's file name (``<out>/<name>.py``) and the name it is
imported by, so it must be a plain Python identifier: that rules out path separators and ``..``
(a module written outside ``--out``), ``-`` and the empty name (a module nobody can import),
keywords (``class``) and dunders (``__init__`` would replace the package's ``__init__.py``).
The check is one function so every place that reads a name can use the same rule.
"""

from __future__ import annotations

import keyword


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
