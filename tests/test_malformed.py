"""Malformed op files, one row each: every one ends in a DerivationError that names the op and,
where there is one, the definition; none is emitted as a broken module (issue 11's table)."""

from __future__ import annotations

import pytest

from derive import DerivationError, Op
from derive.emit.generate import module_source

X = ["x[N, M]"]
ROWS: list[tuple[str, list, list, dict, str]] = [
    # (why, inputs, definitions, params, what the message must say)
    ("no definitions", X, [], {}, "at least one definition"),
    ("stray index", X, ["out[n, m] = x[n, q]"], {}, "index q is neither"),
    ("index missing on the left", X, ["out[n] = x[n, m]"], {}, "index m is neither"),
    ("unknown function", X, ["out[n, m] = floor(x[n, m])"], {}, "unknown function floor"),
    ("SymPy's namespace", X, ["out[n, m] = gamma(x[n, m])"], {}, "unknown function gamma"),
    ("unknown tensor", X, ["out[n, m] = y[n, m]"], {}, "unknown"),
    ("unknown size", X, ["out[n, m] = x[n, m] * K"], {}, "unknown size 'K'"),
    ("oo", X, ["out[n, m] = x[n, m] * oo"], {}, "unknown name 'oo'"),
    ("undeclared scalar", X, ["out[n, m] = x[n, m] * alpha"], {}, "unknown name 'alpha'"),
    ("too many indices", X, ["out[n, m] = x[n, m, m]"], {}, "indices"),
    ("too few indices", X, ["out[n] = x[n]"], {}, "indices"),
    ("repeated lhs index", X, ["out[n, n] = x[n, n]"], {}, "twice"),
    ("sizes disagree", ["x[N]", "y[M]"], ["out[n] = x[n] + y[n]"], {}, "different sizes"),
    ("defined twice", X, ["a[n, m] = x[n, m]", "a[n, m] = x[n, m]"], {}, "already defined"),
    ("redefines an input", X, ["x[n, m] = x[n, m]"], {}, "already defined"),
    ("no '='", X, ["out[n, m] x[n, m]"], {}, "expected"),
    ("empty right-hand side", X, ["out[n, m] = "], {}, "cannot parse"),
    ("syntax error", X, ["out[n, m] = x[n, m] +* 2"], {}, "cannot parse"),
    ("unbalanced", X, ["out[n, m] = (x[n, m]"], {}, "cannot parse"),
    ("lhs starts with a digit", X, ["2out[n, m] = x[n, m]"], {}, "not a Python identifier"),
    ("lhs named torch", X, ["torch[n, m] = x[n, m]"], {}, "'torch'"),
    ("lhs named forward", X, ["forward[n, m] = x[n, m]"], {}, "'forward'"),
    ("lhs named backward", X, ["backward[n, m] = x[n, m]"], {}, "'backward'"),
    ("lhs named ctx", X, ["ctx[n, m] = x[n, m]"], {}, "'ctx'"),
    ("lhs named self", X, ["self[n, m] = x[n, m]"], {}, "'self'"),
    ("lhs named grad_out", X, ["grad_out[n, m] = x[n, m]"], {}, "'grad_out'"),
    ("lhs a keyword", X, ["lambda[n, m] = x[n, m]"], {}, "keyword"),
    ("input named torch", ["torch[N]"], ["out[n] = torch[n]"], {}, "'torch'"),
    ("input named forward", ["forward[N]"], ["out[n] = forward[n]"], {}, "'forward'"),
    ("input named ctx", ["ctx[N]"], ["out[n] = ctx[n]"], {}, "'ctx'"),
    ("input named self", ["self[N]"], ["out[n] = self[n]"], {}, "'self'"),
    ("input named math", ["math[N]"], ["out[n] = math[n]"], {}, "'math'"),
    ("input declared twice", ["x[N]", "x[N]"], ["out[n] = x[n]"], {}, "declared twice"),
    ("bad input text", ["x[N"], ["out[n] = x[n]"], {}, "cannot read input"),
    ("bad dtype", ["x[N]: int32"], ["out[n] = x[n]"], {}, "int64 or float"),
    ("lower-case size", ["x[n]"], ["out[i] = x[i]"], {}, "size symbol"),
    ("zero as a size", ["x[0]"], ["out[i] = x[i]"], {}, "size symbol"),
    ("size named OP", ["x[OP]"], ["out[i] = x[i]"], {}, "'OP'"),
    ("size named Function", ["x[Function]"], ["out[i] = x[i]"], {}, "'Function'"),
    ("param named like an input", X, ["out[n, m] = x[n, m]"], {"x": 1.0}, "name of an input"),
    ("param a string", X, ["out[n, m] = x[n, m] * a"], {"a": "abc"}, "must be a number"),
    ("param a bool", X, ["out[n, m] = x[n, m] * a"], {"a": True}, "must be a number"),
    ("param named torch", X, ["out[n, m] = x[n, m]"], {"torch": 1.0}, "'torch'"),
    ("param a keyword", X, ["out[n, m] = x[n, m]"], {"class": 1.0}, "keyword"),
    ("only int64 inputs", ["t[N]: int64"], ["out[n] = t[n] * 2.0"], {}, "data index"),
    ("integer output", ["x[N]", "t[N]: int64"], ["out[n] = t[n]"], {}, "data index"),
    ("float as a subscript", ["x[N]", "y[N]"], ["out[n] = x[y[n]]"], {}, "subscript"),
    ("expression subscript", X, ["out[n, m] = x[n + 1, m]"], {}, "subscript"),
    ("Sum over nothing", X, ["out[n] = Sum(x[n, m])"], {}, "at least one index"),
    ("Sum over a number", X, ["out[n] = Sum(x[n, m], 2)"], {}, "indices"),
    ("Sum over an unused index", X, ["out[n] = Sum(x[n, m], k)"], {}, "range of index 'k'"),
    ("Max over an expression", X, ["out[n] = Max(x[n, m], m + 1)"], {}, "indices"),
    ("view of an unknown tensor", X, ["v = view(y, N*M)"], {}, "unknown tensor 'y'"),
    ("maximum with one argument", X, ["out[n, m] = maximum(x[n, m])"], {}, "2 argument"),
    ("sigmoid with two", X, ["out[n, m] = sigmoid(x[n, m], 1)"], {}, "1 argument"),
    # a 0-d tensor is read whole (tests/cases/scalar_reads.py): never as an index
    ("a 0-d tensor as a subscript", ["x[N]", "s"], ["out = x[s]"], {}, "'s' is a 0-d tensor"),
    ("a 0-d tensor named like an index", ["x[N]", "n"], ["out[n] = x[n] * n"], {}, "'n' is a 0-d"),
    ("a 0-d int64 input", ["x[N]", "t: int64"], ["out[n] = x[n]"], {}, "needs an axis"),
    ("a capitalised 0-d subscript", ["x[N]", "S"], ["out = x[S]"], {}, "'S' is a 0-d tensor"),
    # the forward binds N = x.shape[0]: an input N was replaced by an int (a TypeError per call)
    ("an input named like a size", ["x[N]", "N[N]"], ["out[n] = x[n] * N[n]"], {}, "of a size"),
    ("a 0-d input named like a size", ["x[N]", "N"], ["out[n] = x[n] * N"], {}, "of a size"),
    # forward(x, *, N=2.0) then bound N = x.shape[0]: the param was silently unused
    ("a param named like a size", ["x[N]"], ["out[n] = x[n] * N"], {"N": 2.0}, "of a size"),
    ("a definition named like a param", X, ["eps[n, m] = x[n, m]"], {"eps": 1.0}, "of a param"),
    ("a view of a 0-d tensor", X, ["s = Sum(x[n, m], n, m)", "v = view(s, 1)"], {}, "0-d"),
    ("int64 power", ["x[N]", "t[N]: int64"], ["out[n] = x[n] ** t[n]"], {}, "t"),
    ("an int64 as a value", ["x[N]", "t[N]: int64"], ["out[n] = x[n] * t[n]"], {}, "t"),
    ("a constant output", X, ["out = 3"], {}, "out"),
    # where(), constant subscripts (issue 13's causal mask and head split)
    ("where on a value", X, ["out[n, m] = where(x[n, m], x[n, m], 0)"], {}, "comparison"),
    ("where of two", X, ["out[n, m] = where(n <= m, x[n, m])"], {}, "where() takes 3"),
    ("inf outside where", X, ["out[n, m] = x[n, m] + inf"], {}, "inf may only be a branch"),
    # SymPy evaluates cos(inf) to AccumBounds(-1, 1): the inf is gone, the error must not be
    ("a function of inf", X, ["out[n, m] = cos(inf) * x[n, m]"], {}, "inf may only be a branch"),
    ("exp of a masked -inf", X, ["out[n, m] = exp(where(m <= n, x[n, m], -inf) * inf)"], {}, "inf"),
    ("a comparison as a value", X, ["out[n, m] = x[n, m] * (n < m)"], {}, "cannot parse"),
    ("constant subscript, symbolic axis", X, ["out[n] = x[n, 0]"], {}, "fixed size"),
    (
        "constant subscript past the axis",
        ["x[N, 2*M]"],
        ["y = view(x, N, 2, M)", "out[n, m] = y[n, 2, m]"],
        {},
        "constant subscript 2",
    ),
    (
        "view of an intermediate in a collapsed op",
        X,
        ["h[n, m] = tanh(x[n, m])", "v = view(h, N*M)"],
        {},
        "view() of an intermediate",
    ),
]


@pytest.mark.parametrize(
    ("why", "inputs", "defs", "params", "says"), ROWS, ids=[r[0] for r in ROWS]
)
def test_malformed_op_is_refused_in_one_line(why, inputs, defs, params, says, tmp_path) -> None:
    op = Op(name="bad", inputs=inputs, definitions=defs, params=params)
    with pytest.raises(DerivationError) as info:
        module_source(op, tmp_path)
    message = str(info.value)
    assert message.startswith("op 'bad'") and "\n" not in message, message
    assert says in message, message
    if info.value.definition is not None:  # the line of the op file that is wrong
        assert info.value.definition in inputs + defs, info.value.definition


# derived sizes: (why, params, sizes, what the message must say)
SIZE_ROWS = [
    ("a size given twice", {}, {"N": "M"}, "already given by an input"),
    ("a lower-case size", {"k": 2}, {"d": "N / k"}, "capitalised"),
    ("a float param as a divisor", {"k": 2.0}, {"K": "N / k"}, "must be an int"),
    ("a difference", {}, {"K": "N - 1"}, "multiplied or divided"),
    ("an unknown name", {}, {"K": "N / q"}, "neither"),
]


@pytest.mark.parametrize(
    ("why", "params", "sizes", "says"), SIZE_ROWS, ids=[r[0] for r in SIZE_ROWS]
)
def test_malformed_derived_size_is_refused_in_one_line(why, params, sizes, says, tmp_path) -> None:
    op = Op(name="bad", inputs=X, definitions=["out[n, m] = x[n, m]"], params=params, sizes=sizes)
    with pytest.raises(DerivationError) as info:
        module_source(op, tmp_path)
    message = str(info.value)
    assert message.startswith("op 'bad'") and "\n" not in message, message
    assert says in message, message


def test_the_table_is_large_enough() -> None:
    assert len(ROWS) >= 60
