"""Checks on an op's text before SymPy reads it: what Python's tokenizer or SymPy's parser
would otherwise report in their own terms (``Starred arguments in lambda not supported``,
``EOF in multi-line statement``), said in the op language's.

- A Python keyword (``lambda``, ``class``, ``None``) cannot be a name of the op: Python would
  read it as syntax, not as a param, tensor, size or index.
- Brackets balance: each ``(`` and ``[`` is closed, by its own kind, in order.
- A name written bare inside a subscript (``x[s]``, ``out[s] = ...``) is used as an index.
- No attribute is read (``x[n].conjugate()``, ``exp.__name__``): SymPy would run the method.
- No imaginary literal (``1j``): values are real.
"""

from __future__ import annotations

import keyword
import re
import tokenize
from io import StringIO

# words conditions.py explains in their own place (nest where(), swap its branches)
OPERATORS = frozenset({"and", "or", "not", "if", "else", "is", "in"})
CLOSES = {"(": ")", "[": "]"}
_WORD = re.compile(r"[A-Za-z_]\w*")
_TOKEN = re.compile(r"[A-Za-z_]\w*|[\[\]]")


def keyword_problem(text: str) -> str | None:
    """Why a Python keyword in ``text`` cannot stand there, or None: written as a name it
    reaches the parser as syntax (``lambda * x[n]`` reads as a lambda's starred arguments).
    An operator word is a name only in a subscript (``x[in]``); elsewhere conditions.py says
    what to write instead of ``and`` or ``if``."""
    indices = bare_subscripts(text)
    for word in _WORD.findall(text):
        if keyword.iskeyword(word) and (word not in OPERATORS or word in indices):
            return (
                f"'{word}' is a Python keyword, so it cannot name a param, tensor, size or "
                f"index (rename it, e.g. '{word}_')"
            )
    return None


def bracket_problem(text: str) -> str | None:
    """Which parenthesis or bracket of ``text`` is unbalanced, or None; columns count from 1.

    Said here, with the place, because Python's tokenizer reports an unclosed one only as
    ``EOF in multi-line statement``."""
    opened: list[tuple[str, int]] = []
    for column, char in enumerate(text, 1):
        if char in CLOSES:
            opened.append((char, column))
        elif char in CLOSES.values():
            if not opened:
                return f"unbalanced parenthesis: the '{char}' at column {column} closes nothing"
            opener, start = opened.pop()
            if CLOSES[opener] != char:
                return (
                    f"unbalanced parenthesis: the '{opener}' at column {start} is closed by "
                    f"'{char}' at column {column}"
                )
    if opened:
        opener, start = opened[-1]
        return f"unbalanced parenthesis: the '{opener}' at column {start} is never closed"
    return None


def bare_subscripts(text: str) -> set[str]:
    """Names written inside ``[...]`` and not subscripted themselves: indices (``n`` and ``k``
    of ``out[n] = x[n, 2*k]``), where ``t`` of ``x[t[n]]`` is a tensor read."""
    tokens = [(m.group(), m.end()) for m in _TOKEN.finditer(text)]
    depth, found = 0, set()
    for token, end in tokens:
        if token in ("[", "]"):
            depth += 1 if token == "[" else -1
        elif depth > 0 and not text[end:].lstrip().startswith("["):
            found.add(token)
    return found


def syntax_problem(text: str) -> str | None:
    """An attribute read or an imaginary literal in ``text``, or None. Python's tokens, so a
    ``.`` inside a number (``0.5``, ``1e-5``) is no attribute: SymPy's parser would evaluate
    ``x[n].conjugate()`` as SymPy's method (``out = x``) and read ``1j`` as SymPy's I."""
    try:
        tokens = list(tokenize.generate_tokens(StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return None  # the parser says what is wrong
    for before, token in zip(tokens, tokens[1:]):
        if token.type == tokenize.OP and token.string == "." and before.type != tokenize.NUMBER:
            column = token.start[1] + 1
            return f"'.' at column {column}: attributes and methods are not part of the language"
        if token.type == tokenize.NUMBER and token.string.lower().endswith("j"):
            return f"'{token.string}' is an imaginary number: values are real"
    return None
