"""Malformed op files, one row each: every one ends in a DerivationError that names the op and,
where there is one, the definition; none is emitted as a broken module (issue 11's table)."""

from __future__ import annotations

import pytest
import sympy as sp
import torch

from derive import DerivationError, Op
from derive.emit.generate import module_source
from derive.language import parse
from derive.verify.oracle import oracle_output

X = ["x[N, M]"]
ROWS: list[tuple[str, list, list, dict, str]] = [
    # (why, inputs, definitions, params, what the message must say)
    ("no definitions", X, [], {}, "at least one definition"),
    ("stray index", X, ["out[n, m] = x[n, q]"], {}, "index q is neither"),
    ("index missing on the left", X, ["out[n] = x[n, m]"], {}, "index m is neither"),
    ("unknown function", X, ["out[n, m] = floor(x[n, m])"], {}, "unknown function floor"),
    ("SymPy's namespace", X, ["out[n, m] = gamma(x[n, m])"], {}, "unknown function gamma"),
    # SymPy's relation as a call, Ne(a, b) for a != b: the operator is named
    (
        "a relation as a call",
        X,
        ["out[n, m] = where(Ne(x[n, m], 1), x[n, m], 0)"],
        {},
        "with its operator (!= for Ne)",
    ),
    # SymPy's logic and branches: named as unknown functions, with the where() to write (a
    # Piecewise's True branch was "'True' is a Python keyword", And a comparison outside a
    # where(); found by probing)
    (
        "a Piecewise",
        X,
        ["out[n, m] = Piecewise((x[n, m], x[n, m] > 0), (0, True))"],
        {},
        "unknown function Piecewise",
    ),
    (
        "an And",
        X,
        ["out[n, m] = where(And(x[n, m] > 0, x[n, m] < 1), x[n, m], 0)"],
        {},
        "unknown function And (known:",
    ),
    # an index only compared with data has no range; the message wrote SymPy's Eq(y[n], c)
    (
        "an index only compared",
        ["x[N, M]", "y[N]: int64"],
        ["out[n, c] = where(y[n] == c, 1, 0)"],
        {},
        "range of index 'c' in where(y[n] == c, 1, 0)",
    ),
    ("Max of a number", X, ["out[n, m] = Max(x[n, m], 0)"], {}, "write maximum(value, 0)"),
    ("a tensor called", X, ["out[n, m] = x(n, m)"], {}, "'x' is a tensor, read with brackets"),
    ("unknown tensor", X, ["out[n, m] = y[n, m]"], {}, "unknown tensor 'y'"),
    # a misspelling is named, with the tensor meant (the message was SymPy's TypeError)
    ("misspelled tensor", X, ["out[n] = Sum(xx[n, m], m)"], {}, "did you mean 'x'?"),
    ("a param subscripted", X, ["out[n, m] = x[n, m] * a[n]"], {"a": 1.0}, "'a' is 0-d"),
    ("a size subscripted", X, ["out[n, m] = x[n, m] * N[n]"], {}, "'N' is a size"),
    # a bare tensor was "unknown name 'x'", or "cannot lower x (IndexedBase)" naming no line
    ("a tensor without indices", X, ["out = x"], {}, "'x' is read without its indices"),
    ("a tensor as an exponent", X, ["out[n, m] = x[n, m] ** x"], {}, "without its indices"),
    # Sum(x, m, m) derived M * sum_m x where the forward summed once (and raised)
    ("an index twice in one Sum", X, ["out[n] = Sum(x[n, m], m, m)"], {}, "'m' twice"),
    ("an index twice in one Max", X, ["out = Max(x[n, m], n, m, n)"], {}, "'n' twice"),
    # the batch index is the user's '...', not the internal name 'batch'
    ("'...' on the right only", ["x[..., C]"], ["out = Sum(x[..., c], c)"], {}, "'...' (the"),
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
    ("unbalanced", X, ["out[n, m] = (x[n, m]"], {}, "'(' at column 13 is never closed"),
    ("a ')' too many", X, ["out[n, m] = x[n, m])"], {}, "unbalanced parenthesis: the ')'"),
    ("a '(' closed by ']'", X, ["out[n, m] = x[(n, m]"], {}, "'(' at column 15 is closed by"),
    ("a method", X, ["out[n, m] = x[n, m].conjugate()"], {}, "'.' at column 20: attributes"),
    ("an attribute", X, ["out[n, m] = exp.__name__"], {}, "'.' at column 16"),
    ("an imaginary number", X, ["out[n, m] = x[n, m] * 1j"], {}, "'1j' is an imaginary"),
    ("lhs starts with a digit", X, ["2out[n, m] = x[n, m]"], {}, "not a Python identifier"),
    ("lhs named torch", X, ["torch[n, m] = x[n, m]"], {}, "'torch'"),
    ("lhs named forward", X, ["forward[n, m] = x[n, m]"], {}, "'forward'"),
    ("lhs named backward", X, ["backward[n, m] = x[n, m]"], {}, "'backward'"),
    ("lhs named ctx", X, ["ctx[n, m] = x[n, m]"], {}, "'ctx'"),
    ("lhs named self", X, ["self[n, m] = x[n, m]"], {}, "'self'"),
    ("lhs named grad_out", X, ["grad_out[n, m] = x[n, m]"], {}, "'grad_out'"),
    ("lhs a keyword", X, ["lambda[n, m] = x[n, m]"], {}, "keyword"),
    ("a keyword read", X, ["out[n, m] = lambda * x[n, m]"], {}, "'lambda' is a Python keyword"),
    ("a keyword as an index", X, ["out[n] = Sum(x[n, if], if)"], {}, "'if' is a Python keyword"),
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
    ("param a string", X, ["out[n, m] = x[n, m] * a"], {"a": "abc"}, "no param declared before"),
    (  # a default names an earlier param (stride=kernel_size), never a later one
        "param defaulting to a later one",
        X,
        ["out[n, m] = x[n, m] * a * b"],
        {"a": "b", "b": 2.0},
        "param 'a' defaults to 'b', which is declared after it: declare 'b' first",
    ),
    ("param a bool", X, ["out[n, m] = x[n, m] * a"], {"a": True}, "must be a number"),
    ("param named torch", X, ["out[n, m] = x[n, m]"], {"torch": 1.0}, "'torch'"),
    ("param a keyword", X, ["out[n, m] = x[n, m]"], {"class": 1.0}, "keyword"),
    ("only int64 inputs", ["t[N]: int64"], ["out[n] = t[n] * 2.0"], {}, "data index"),
    ("integer output", ["x[N]", "t[N]: int64"], ["out[n] = t[n]"], {}, "data index"),
    ("float as a subscript", ["x[N]", "y[N]"], ["out[n] = x[y[n]]"], {}, "subscript"),
    ("a product of indices as a subscript", X, ["out[n, m] = x[n*m, m]"], {}, "affine"),
    ("a float in a subscript", X, ["out[n, m] = x[n, m - 0.5]"], {}, "affine"),
    ("a size as a stride", X, ["out[n, m] = x[n, N*m]"], {}, "coefficient N"),
    ("a function in a subscript", X, ["out[n, m] = x[n, abs(m - 1)]"], {}, "no tensor or"),
    ("a float param in a subscript", X, ["out[n, m] = x[n, m - p]"], {"p": 0.5}, "an int"),
    ("a param alone as a subscript", X, ["out[n] = x[n, p]"], {"p": 1}, "used as an index"),
    ("a shift with no range", X, ["out[n, m] = x[n + 1, m]"], {}, "ranges={'n'"),
    ("Sum over nothing", X, ["out[n] = Sum(x[n, m])"], {}, "at least one index"),
    ("Sum over a number", X, ["out[n] = Sum(x[n, m], 2)"], {}, "indices"),
    ("Sum over an unused index", X, ["out[n] = Sum(x[n, m], k)"], {}, "range of index 'k'"),
    ("Max over an expression", X, ["out[n] = Max(x[n, m], m + 1)"], {}, "indices"),
    # Max(a, eps) meant the larger of two values: a reduction over a param or a size
    ("Max over a param", X, ["out[n, m] = Max(x[n, m], e)"], {"e": 1e-8}, "maximum(value, e)"),
    ("Max over a size", X, ["out[n, m] = Max(x[n, m], M)"], {}, "'M' is a size"),
    ("a tensor named as a gradient", X, ["dx[n, m] = x[n, m]"], {}, "'dx' is the gradient of 'x'"),
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
    (
        "a function of inf in a where nested in a where",
        X,
        ["out[n, m] = where(m <= n, where(n <= m, x[n, m] * cos(inf), -inf), 0)"],
        {},
        "inf may only be a branch",
    ),
    # SymPy evaluates cos(inf) to AccumBounds(-1, 1): the inf is gone, the error must not be
    ("a function of inf", X, ["out[n, m] = cos(inf) * x[n, m]"], {}, "inf may only be a branch"),
    ("exp of a masked -inf", X, ["out[n, m] = exp(where(m <= n, x[n, m], -inf) * inf)"], {}, "inf"),
    # probing: SymPy takes an input finite and decided these, where(x > -inf, x, 0) read as x
    ("an input above -inf", X, ["out[n, m] = where(x[n, m] > -inf, x[n, m], 0)"], {}, "decides"),
    ("an input below inf", X, ["out[n, m] = where(inf > x[n, m], x[n, m], 0)"], {}, "'inf > x"),
    ("a finite test", X, ["out[n, m] = where(abs(x[n, m]) < inf, x[n, m], 0)"], {}, "< inf'"),
    ("an input equal to inf", X, ["out[n, m] = where(x[n, m] == inf, 0, x[n, m])"], {}, "False"),
    ("an input not -inf", X, ["out[n, m] = where(x[n, m] != -inf, x[n, m], 0)"], {}, "!= -inf"),
    ("a NaN test", X, ["out[n, m] = where(x[n, m] != x[n, m], 0, x[n, m])"], {}, "with itself"),
    (
        "a comparison as a value",
        X,
        ["out[n, m] = x[n, m] * (n < m)"],
        {},
        "outside a where() condition",
    ),
    ("a size as a subscript", X, ["out[n] = x[n, M]"], {}, "is a size, not an index"),
    ("a symbolic axis read past its end", X, ["out[n] = x[n, M + 1]"], {}, "M - 1 for the axis"),
    ("a symbolic axis read at -1", X, ["out[n] = x[n, -1]"], {}, "is written M - 1"),
    # probing: these said "cannot lower floor(t/2)" without the definition, and SympifyError
    ("an index floor-divided", X, ["out[n, m] = x[n, m] * (m // 2)"], {}, "(// or %)"),
    ("an index's remainder", X, ["out[n, m] = x[n, m] * (m % 2)"], {}, "(// or %)"),
    ("a slice", X, ["out[n] = Sum(x[n, :], m)"], {}, "a slice (':')"),
    # probing: a param named as a gradient was assigned over by it (dx: w's gradient 5x off)
    ("a param named as a gradient", X, ["out[n, m] = x[n, m] * dx"], {"dx": 3.0}, "'dx' has"),
    ("a param named needs", X, ["out[n, m] = x[n, m] * needs"], {"needs": 3.0}, "uses itself"),
    ("a param named present", X, ["out[n, m] = x[n, m] * present"], {"present": 3.0}, "itself"),
    ("a param named float", X, ["out[n, m] = x[n, m] * float"], {"float": 3.0}, "itself"),
    ("an input named tuple", ["x[N, M]", "tuple[M]"], ["out[n, m] = x[n, m] * tuple[m]"], {}, "it"),
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
        ["h[n, m] = tanh(x[n, m])", "v = view(h, N*M)", "out[k] = 2 * v[k]"],
        {},
        "view() of an intermediate",
    ),
    # issue 24: each was a broken module written with exit 0, a traceback, or a wrong message
    ("a negative constant subscript", ["x[N, 3]"], ["out[n] = x[n, -1]"], {}, "is written 2"),
    ("a constant subscript at the size", ["x[N, 3]"], ["out[n] = x[n, 3]"], {}, "[0, 3)"),
    ("a fractional subscript", ["x[N, 3]"], ["out[n] = x[n, 1.5]"], {}, "not a whole number"),
    ("a Max over an output index", ["x[N]"], ["out[n] = Max(x[n], n)"], {}, "stay free"),
    ("a Sum over an output index", ["x[N]"], ["out[n] = Sum(x[n], n)"], {}, "stay free"),
    ("a Max over every output index", X, ["out[n, m] = Max(x[n, m], n, m)"], {}, "stay free"),
    ("a Sum over a summed index", X, ["out = Sum(Sum(x[n, m], m), m, n)"], {}, "already summed"),
    ("a Max over a maxed index", X, ["out[n] = Max(Max(x[n, m], m), m)"], {}, "already summed"),
    (
        "a view with more elements",
        X,
        ["v = view(x, N, M, 2)", "o[n, m, k] = v[n, m, k]"],
        {},
        "keeps",
    ),
    ("a view with fewer elements", X, ["v = view(x, N)", "out[n] = v[n]"], {}, "keeps every"),
    ("a view of other sizes", X, ["v = view(x, M, N*2)", "out[m, n] = v[m, n]"], {}, "keeps"),
    ("a view by -1", X, ["v = view(x, -1)", "out[n] = v[n]"], {}, "not a positive int"),
    ("a view by 0", X, ["v = view(x, 0)", "out[n] = v[n]"], {}, "not a positive int"),
    ("a view by an index", X, ["v = view(x, n, M)", "out[n, m] = v[n, m]"], {}, "not a size"),
    ("a view by an unknown size", X, ["v = view(x, K)", "out[k] = v[k]"], {}, "not a size"),
    ("a view by a quotient", X, ["v = view(x, N*M/p, p)", "o[i, j] = v[i, j]"], {"p": 2}, "sizes="),
    (
        "a view by a float param",
        X,
        ["v = view(x, N*M/p, p)", "o[i, j] = v[i, j]"],
        {"p": 2.0},
        "int",
    ),
    ("a nan param", X, ["out[n, m] = x[n, m] * a"], {"a": float("nan")}, "finite"),
    ("an inf param", X, ["out[n, m] = x[n, m] * a"], {"a": float("inf")}, "finite"),
    ("a -inf param", X, ["out[n, m] = x[n, m] * a"], {"a": -float("inf")}, "finite"),
    ("a huge int param", X, ["out[n, m] = x[n, m] * a"], {"a": 10**400}, "at most 63"),
    ("a complex param", X, ["out[n, m] = x[n, m] * a"], {"a": 1j}, "must be a number"),
    ("a None param", X, ["out[n, m] = x[n, m] * a"], {"a": None}, "must be a number"),
    ("a list param", X, ["out[n, m] = x[n, m] * a"], {"a": [1.0]}, "must be a number"),
    ("sqrt(-1)", X, ["out[n, m] = x[n, m] * sqrt(-1)"], {}, "imaginary"),
    # SymPy wrote these with I (x + I pi; I x / sqrt(x**2 + 1) in the backward): a traceback
    ("sqrt of a negative", X, ["out[n, m] = sqrt(-x[n, m]**2 - 1)"], {}, "is not real"),
    ("log of a negative", X, ["out[n, m] = log(-exp(x[n, m]))"], {}, "is not real"),
    ("a negative base", X, ["out[n, m] = (-2) ** (x[n, m] ** 2)"], {}, "is not real"),
    ("-1 to a real power", X, ["out[n, m] = (-1) ** x[n, m]"], {}, "a real power of -1"),
    ("log(-2)", X, ["out[n, m] = x[n, m] * log(-2)"], {}, "imaginary"),
    ("a negative to a half", X, ["out[n, m] = x[n, m] * (-2)**0.5"], {}, "imaginary"),
    ("x/0", X, ["out[n, m] = x[n, m] / 0"], {}, "divides by zero"),
    ("log(0)", X, ["out[n, m] = x[n, m] * log(0)"], {}, "log(0)"),
    ("0/0", X, ["out[n, m] = x[n, m] * (0/0)"], {}, "undefined constant"),
    ("inf - inf", X, ["out[n, m] = x[n, m] + (inf - inf)"], {}, "undefined constant"),
    ("a param named like an index", X, ["out[n, m] = x[n, m]"], {"n": 1.0}, "used as an index"),
    ("a param summed over", X, ["out[n] = Sum(x[n, k], k)"], {"k": 2.0}, "used as an index"),
    ("a param named exp", X, ["out[n, m] = exp(x[n, m])"], {"exp": 1.0}, "function of the op"),
    ("a param named Sum", X, ["out[n, m] = x[n, m]"], {"Sum": 1.0}, "function of the op"),
    ("a param named where", X, ["out[n, m] = x[n, m]"], {"where": 1.0}, "function of the op"),
    ("an input named log", ["log[N]"], ["out[n] = log[n]"], {}, "function of the op"),
    ("an input named view", ["view[N]"], ["out[n] = view[n]"], {}, "function of the op"),
    ("a size named Max", ["x[Max]"], ["out[n] = x[n]"], {}, "function of the op"),
    ("a param named Integer", X, ["out[n, m] = 2 * x[n, m]"], {"Integer": 2}, "SymPy's parser"),
    ("an input named Float", ["Float[N]"], ["out[n] = Float[n]"], {}, "SymPy's parser"),
    ("a definition named tanh", X, ["tanh[n, m] = x[n, m]"], {}, "function of the op"),
    ("a read of a later definition", X, ["a[n, m] = b[n, m]", "b[n, m] = x[n, m]"], {}, "later"),
    ("a cycle", X, ["a[n, m] = b[n, m] + x[n, m]", "b[n, m] = a[n, m]"], {}, "defined later"),
    ("a read of itself", X, ["a[n, m] = a[n, m] + x[n, m]"], {}, "reads itself"),
    ("a later 0-d read", X, ["a[n, m] = x[n, m] * s", "s = Sum(x[n, m], n, m)"], {}, "later"),
    ("a view of a later tensor", X, ["v = view(h, N*M)", "h[n, m] = x[n, m]"], {}, "later"),
    # an index named like a tensor above it: the parser read the tensor (Sum over 's'?)
    (
        "a tensor as an index",
        X,
        ["s[n, m] = x[n, m]", "out[n] = Sum(x[n, s], s)"],
        {},
        "'s' is both a tensor and an index",
    ),
    (
        "a tensor as a Sum's index",
        X,
        ["s[n, m] = x[n, m]", "out[n] = Sum(x[n, m], m, s)"],
        {},
        "'s' is both a tensor and the index",
    ),
    ("an output of constants only", X, ["c = 2", "out = c"], {}, "only definitions that read"),
    # tuples and dicts parse as python's, not as expressions (found by probing: a raw
    # AttributeError)
    ("a tuple", X, ["out[n, m] = (x[n, m], x[n, m])"], {}, "tuple"),
    ("a dict", X, ["out[n, m] = {x[n, m]: 1}"], {}, "dict"),
    ("too deeply nested", X, ["out[n, m] = " + "(" * 400 + "x[n, m]" + ")" * 400], {}, "nested"),
    # an index named 't + p' was "neither on the left-hand side nor summed" (found by probing)
    ("a shifted left-hand side", X, ["out[n, m + p] = x[n, m]"], {"p": 1}, "not 'm + p'"),
    # m's range from the text (x[n, m]); the body is a number, reading no tensor
    (
        "a body that cancels to a number",
        X,
        ["out[n, m] = x[n, m] - (x[n, m] - 1)"],
        {},
        "no tensor",
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
    ("a size that reads itself", {}, {"N": "N / 2"}, "reads itself"),
    ("a lower-case size", {"k": 2}, {"d": "N / k"}, "capitalised"),
    ("a float param as a divisor", {"k": 2.0}, {"K": "N / k"}, "must be an int"),
    ("a fraction in a sum", {}, {"K": "N / 2 + 1"}, "//"),
    ("a float in a sum", {}, {"K": "N - 1.5"}, "integers"),
    ("a float param in a floor", {"s": 2.0}, {"K": "N // s"}, "must be an int"),
    ("a square root of a size", {}, {"K": "N**0.5"}, "is neither"),
    ("an unknown name in a sum", {}, {"K": "N - q"}, "unknown name 'q'"),
    ("an unknown name", {}, {"K": "N / q"}, "unknown name 'q'"),
    ("an undeclared param", {}, {"K": "N / groups"}, "unknown name 'groups'"),
    ("an undeclared size", {}, {"K": "N / G"}, "unknown name 'G'"),
    ("a division by zero", {}, {"K": "N / 0"}, "'N / 0' divides by zero"),
    ("a floor division by zero", {}, {"K": "N // 0 + 1"}, "divides by zero"),
    ("a keyword in a size", {}, {"K": "N / lambda"}, "'lambda' is a Python keyword"),
    ("an unbalanced size", {}, {"K": "(N / 2"}, "unbalanced parenthesis"),
    ("a float divisor", {}, {"K": "N / 2.5"}, "factor 0.4"),
    ("a float factor", {}, {"K": "1.5*N"}, "factor 1.5"),
    ("a zero factor", {}, {"K": "0*N"}, "positive"),
    ("a negative size", {}, {"K": "-N"}, "factor -1"),
    ("three quarters", {}, {"K": "N*3/4"}, "factor 3/4"),
    ("an empty size", {}, {"K": ""}, "cannot parse"),
    ("a size named like a function", {}, {"Sum": "N"}, "function of the op"),
    ("a size that is not a string", {}, {"K": 5}, "must be a string"),
    ("a size that is a list", {}, {"K": ["N"]}, "must be a string"),
    ("a size keyed by an int", {}, {5: "N"}, "must be a string"),
    # a call was SymPy's "name 'Function' is not defined" (found by probing)
    ("a Max in a size", {"p": 2}, {"K": "Max(N, p)"}, "no function but // (floor division)"),
    ("an abs in a size", {"p": 2}, {"K": "abs(N - p)"}, "not abs"),
    ("sizes that read each other", {}, {"K": "L - 1", "L": "K + 1"}, "'K', 'L' read each other"),
    ("a power of a size in a sum", {}, {"K": "N**-1 + 1"}, "//"),
    # the forward refused every default call; `derive check` raised TypeError (found probing)
    ("a divisor 0 at the defaults", {"p": 1}, {"K": "N // (p - 1)"}, "which is 0 at the params'"),
    ("a quotient by a zero default", {"h": 0}, {"K": "N / h"}, "divides by h"),
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


# declared ranges (issue 25): an index's range is a size, and agrees with its subscripts
RANGE_ROWS = [
    # (why, sizes, ranges, definition, what the message must say)
    ("a range that is no size", {}, {"t": "N - 1"}, "out[n, t] = x[n, t]", "must name a size"),
    ("a range of an unknown size", {}, {"t": "L"}, "out[n, t] = x[n, t]", "must name a size"),
    ("a range against a tensor", {}, {"m": "N"}, "out[n, m] = x[n, m]", "declared with range"),
    ("a capitalised index", {}, {"T": "N"}, "out[n, m] = x[n, m]", "lower-case"),
    ("a range that is no string", {}, {"t": 5}, "out[n, m] = x[n, m]", "must be a string"),
    ("a keyword index", {}, {"in": "N"}, "out[n, m] = x[n, m]", "'in' is a Python keyword"),
    # a key no definition uses was ignored (a misspelling: found writing ops as users do)
    (
        "a range of no index",
        {},
        {"q": "N"},
        "out[n, m] = x[n, m]",
        "ranges: 'q' is an index of no definition (the definitions' indices: m, n)",
    ),
    ("a misspelt range", {}, {"mm": "M"}, "out[n, m] = x[n, m]", "'mm' is an index of no "),
    ("a misspelt range, named", {}, {"mm": "M"}, "out[n, m] = x[n, m]", "did you mean 'm'?"),
    (
        "a misspelt range of an index that needs one",
        {},
        {"q": "M"},
        "out[n, t] = Sum(where(s <= t, x[n, s], 0), s)",
        "ranges={'t': '...'} with the size it runs over (ranges names 'q', not 't')",
    ),
]


@pytest.mark.parametrize(
    ("why", "sizes", "ranges", "definition", "says"), RANGE_ROWS, ids=[r[0] for r in RANGE_ROWS]
)
def test_malformed_range_is_refused_in_one_line(why, sizes, ranges, definition, says, tmp_path):
    op = Op(name="bad", inputs=X, definitions=[definition], sizes=sizes, ranges=ranges)
    with pytest.raises(DerivationError) as info:
        module_source(op, tmp_path)
    message = str(info.value)
    assert message.startswith("op 'bad'") and "\n" not in message, message
    assert says in message, message


# Op's fields with wrong types (issue 24): each refused in one line naming the field
GOOD = {"inputs": X, "definitions": ["out[n, m] = x[n, m]"]}
HUGE = "x" * 20_000
FIELD_ROWS: list[tuple[str, str, object, str]] = [
    # (why, field, value, what the message must say)
    ("name None", "name", None, "op name must be a string"),
    ("name an int", "name", 5, "op name must be a string"),
    ("name a list", "name", ["a"], "op name must be a string"),
    ("name empty", "name", "", "empty"),
    ("name with a dash", "name", "my-op", "identifier"),
    ("name with a space", "name", "my op", "identifier"),
    ("name a keyword", "name", "class", "keyword"),
    ("name a dunder", "name", "__init__", "'__'"),
    ("name a path", "name", "../up", "path separator"),
    ("name huge", "name", HUGE, "characters long"),
    ("name torch", "name", "torch", "would shadow it"),  # found by probing: out/torch.py
    ("name math", "name", "math", "would shadow it"),
    ("inputs None", "inputs", None, "inputs must be a list of strings"),
    ("inputs an int", "inputs", 5, "inputs must be a list"),
    ("inputs a string", "inputs", "x[N, M]", "got str"),
    ("inputs a dict", "inputs", {"x": "N, M"}, "got dict"),
    ("inputs a set", "inputs", {"x[N, M]"}, "got set"),
    ("an input an int", "inputs", [5], "inputs[0] must be a string, got int"),
    ("an input None", "inputs", [None], "got NoneType"),
    ("an input a list", "inputs", [["x[N, M]"]], "got list"),
    ("an input bytes", "inputs", [b"x[N, M]"], "got bytes"),
    ("an input empty", "inputs", [""], "inputs[0] is empty"),
    ("an input blank", "inputs", ["   "], "is empty"),
    ("an input huge", "inputs", [HUGE], "characters long"),
    ("a second input an int", "inputs", ["x[N, M]", 3], "inputs[1]"),
    ("an input without a name", "inputs", ["[N]"], "cannot read input"),
    ("an input named 2x", "inputs", ["2x[N]"], "not a Python identifier"),
    ("no inputs", "inputs", [], "unknown"),
    ("definitions None", "definitions", None, "definitions must be a list"),
    ("definitions an int", "definitions", 7, "got int"),
    ("definitions a string", "definitions", "out[n, m] = x[n, m]", "got str"),
    ("definitions a dict", "definitions", {"out": "x"}, "got dict"),
    ("a definition an int", "definitions", [5], "definitions[0] must be a string"),
    ("a definition None", "definitions", [None], "got NoneType"),
    ("a definition a list", "definitions", [["out[n, m] = x[n, m]"]], "got list"),
    ("a definition empty", "definitions", [""], "definitions[0] is empty"),
    ("a definition huge", "definitions", ["out[n, m] = x[n, m]" + " + x[n, m]" * 2000], "long"),
    ("params None", "params", None, "params must be a dict"),
    ("params a list", "params", [1.0], "got list"),
    ("params pairs", "params", [("eps", 1.0)], "got list"),
    ("params a string", "params", "eps", "got str"),
    ("params an int", "params", 1, "got int"),
    ("a param keyed by an int", "params", {1: 1.0}, "must be a string"),
    ("a param keyed by None", "params", {None: 1.0}, "must be a string"),
    ("a param named ''", "params", {"": 1.0}, "is empty"),
    ("a param named 'a b'", "params", {"a b": 1.0}, "identifier"),
    ("a param a dict", "params", {"eps": {"v": 1}}, "must be a number"),
    ("a param a string number", "params", {"eps": "1e-5"}, "must be a number"),
    ("sizes None", "sizes", None, "sizes must be a dict"),
    ("sizes a list", "sizes", ["D"], "got list"),
    ("sizes a string", "sizes", "D = N", "got str"),
    ("a size huge", "sizes", {"K": HUGE}, "characters long"),
    ("doc None", "doc", None, "doc must be a string"),
    ("doc an int", "doc", 5, "doc must be a string"),
    ("doc a list", "doc", ["a doc"], "doc must be a string"),
    ("doc huge", "doc", HUGE, "characters long"),
    ("stepwise a string", "stepwise", "yes", "True or False"),
    ("stepwise an int", "stepwise", 1, "True or False"),
    ("stepwise None", "stepwise", None, "True or False"),
    ("stepwise a list", "stepwise", [True], "True or False"),
    ("source None", "source", None, "source must be a string"),
    ("source an int", "source", 5, "source must be a string"),
    ("source with a line break", "source", "ops/a.py\nimport os", "line break"),
]


@pytest.mark.parametrize(
    ("why", "field", "value", "says"), FIELD_ROWS, ids=[r[0] for r in FIELD_ROWS]
)
def test_a_field_of_the_wrong_type_is_refused_in_one_line(why, field, value, says, tmp_path):
    op = Op(**{"name": "bad", **GOOD, field: value})
    with pytest.raises(DerivationError) as info:
        module_source(op, tmp_path)
    message = str(info.value)
    assert message.startswith("op '") and "\n" not in message and "Traceback" not in message
    assert len(message) < 400, message  # a huge string is counted, not repeated
    assert says in message, message


TRIPLE = "'" * 3
DOCS = ['a """ b', "a back\\slash", 'ends in a quote"', "tab\tand\x00nul", TRIPLE, '\\"""', "é∑"]


@pytest.mark.parametrize("doc", DOCS)
def test_any_doc_is_emitted_as_itself(doc: str, tmp_path) -> None:
    """A doc is the module's docstring, escaped: never 'emitted code is not valid Python'."""
    op = Op(name="d", inputs=["x[N]"], definitions=["out[n] = tanh(x[n])"], doc=doc)
    namespace: dict = {}
    exec(compile(module_source(op, tmp_path), "d.py", "exec"), namespace)  # noqa: S102
    assert namespace["__doc__"].startswith(f"d: {doc}\n")


def test_the_table_is_large_enough() -> None:
    assert len(ROWS) >= 60
    assert len(ROWS) + len(SIZE_ROWS) + len(FIELD_ROWS) >= 190


def test_e_after_a_nested_subscript_is_an_index_not_eulers_number():
    # found by probing: a pattern for the innermost brackets read C[a[n], e] without its e,
    # so Sum over e (a dot product of two embedding rows) was refused as a Sum over 'E'
    op = Op(
        "rows_dot",
        ["C[V, E]", "a[N]: int64", "b[N]: int64"],
        ["out[n] = Sum(C[a[n], e] * C[b[n], pi] * C[b[n], e], e)"],
    )
    with pytest.raises(DerivationError, match="pi"):
        parse(op)  # pi subscripts C: an index too, and then one the left side lacks
    op = Op("rows_dot", op.inputs, ["out[n] = Sum(C[a[n], e] * C[b[n], e], e)"])
    assert parse(op).steps[0].body.has(sp.Sum)
    C = torch.randn(5, 3, dtype=torch.float64)
    a, b = torch.tensor([0, 2, 4]), torch.tensor([1, 1, 3])
    torch.testing.assert_close(oracle_output(op, {"C": C, "a": a, "b": b}), (C[a] * C[b]).sum(1))


def test_a_constant_read_at_data_is_refused_in_one_line(tmp_path) -> None:
    """A tensor read at an int tensor's entry is range-checked at run time; a constant is a
    formula taken into its reader, with no entries to check (found by probing: ``c[idx[n]]``
    with idx = 5 past c's 3 entries gave the formula's 6)."""
    op = Op(
        name="bad",
        inputs=["x[N]", "idx[N]: int64"],
        ranges={"k": "K"},
        sizes={"K": "3"},
        definitions=["c[k] = k + 1", "out[n] = x[n] * c[idx[n]]"],
    )
    with pytest.raises(DerivationError) as info:
        module_source(op, tmp_path)
    message = str(info.value)
    assert message.startswith("op 'bad'") and "\n" not in message, message
    assert "cannot be read at a subscript of data" in message, message


@pytest.mark.parametrize(
    ("params", "subscript", "says"),
    [
        ({"p": -1}, "m + p", "param 'p' defaults to -1, but it must be >= 0"),
        ({"s": 0}, "s*m", "param 's' defaults to 0, but it must be positive"),
    ],
)
def test_a_default_the_forward_would_refuse_is_refused_in_one_line(
    params, subscript, says, tmp_path
) -> None:
    """A module whose call with its own defaults always raised was written without a word,
    and `derive check` printed a traceback (found by probing)."""
    definition = f"out[n, m] = x[n, {subscript}]"
    op = Op(name="bad", inputs=X, definitions=[definition], params=params, ranges={"m": "M"})
    with pytest.raises(DerivationError) as info:
        module_source(op, tmp_path)
    message = str(info.value)
    assert message.startswith("op 'bad'") and "\n" not in message, message
    assert says in message, message
