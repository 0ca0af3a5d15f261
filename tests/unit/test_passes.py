"""The kernel IR's passes, one behaviour per test: statements in, the exact statements out."""

from __future__ import annotations

import itertools

import sympy as sp

from derive.ir import nodes as ir
from derive.ir.passes import batched_matmuls, common_subexpressions, merged_siblings, released
from derive.ir.printer import TorchPrinter

i, j = sp.symbols("i j", integer=True)
x, y, g = (ir.Ref(n, axes=(i, j)) for n in "xyg")
square = ir.Apply("torch.square({0})", (x,), axes=(i, j))


def _mul(a, b):
    return ir.Binary("*", a, b, axes=(i, j))


def _printed(block: list[ir.Statement]) -> list[str]:
    names = (f"t{k}" for k in itertools.count())
    return [TorchPrinter().doprint(s) for s in common_subexpressions(block, lambda _: next(names))]


def test_a_tensor_computed_twice_is_computed_once() -> None:
    # torch.square(x) * g + torch.square(x) * y: one square, read twice
    block = [ir.Assign(("d",), ir.Binary("+", _mul(square, g), _mul(square, y), axes=(i, j)))]
    assert _printed(block) == ["t0 = torch.square(x)", "d = t0 * g + t0 * y", "del t0"]


def test_the_largest_repeat_first_and_across_statements() -> None:
    both = _mul(square, g)
    block = [
        ir.Assign(("a",), ir.Binary("+", both, y, axes=(i, j))),
        ir.Assign(("b",), ir.Binary("-", both, x, axes=(i, j))),
    ]
    assert _printed(block) == ["t0 = torch.square(x) * g", "a = t0 + y", "b = t0 - x", "del t0"]


def test_an_assignment_s_whole_value_is_never_shared() -> None:
    """``a = x * g`` then ``a[...] += ...``: a name bound to it would see the update."""
    block = [ir.Assign(("a",), _mul(x, g)), ir.Assign(("b",), ir.Neg(_mul(x, g), axes=(i, j)))]
    assert _printed(block) == ["a = x * g", "b = -x * g"]


def test_nothing_is_shared_across_a_write_of_what_it_reads() -> None:
    update = ir.Update("x", (ir.Ref("t", axes=(i,)),), "+", ir.Ref("v", axes=(i,)))
    block = [ir.Assign(("a",), ir.Neg(square)), update, ir.Assign(("b",), ir.Neg(square))]
    assert _printed(block) == ["a = -torch.square(x)", "x[t] += v", "b = -torch.square(x)"]


def test_views_and_python_numbers_stay_inline() -> None:
    view = ir.Permute(x, (1, 0), axes=(j, i))
    n = ir.Binary("*", ir.Ref("N", scalar=True), ir.Number(2))
    block = [ir.Assign(("a",), ir.Binary("*", view, n)), ir.Assign(("b",), ir.Binary("/", view, n))]
    assert _printed(block) == ["a = x.T * N * 2", "b = x.T / (N * 2)"]


# -- sibling contractions: q, k, v from slices of one weight -----------------------------------
c, k = sp.symbols("c k", integer=True)
xc = ir.Ref("x", axes=(i, c))


def _slice_of_w(at: int, size: int = 3) -> ir.Node:
    """W[:, at] over (c, j), W's second axis ``size`` long."""
    return ir.Slice(ir.Ref("W"), (None, at), (sp.Symbol("C"), sp.Integer(size)), axes=(c, j))


def _sibling(at: int, size: int = 3) -> ir.Contract:
    """sum_c x[i, c] W[c, at, j]."""
    return ir.Contract((xc, _slice_of_w(at, size)), (i, j, c), axes=(i, j))


def _merged(block: list[ir.Statement]) -> list[str]:
    names = (f"t{k}" for k in itertools.count())
    return [TorchPrinter().doprint(s) for s in merged_siblings(block, lambda _: next(names))]


def test_contractions_over_every_slice_of_an_axis_are_one() -> None:
    """sum_c x[i, c] W[c, s, j] for s = 0, 1, 2 is the slice s of one einsum over all of W."""
    block = [ir.Assign((name,), _sibling(s)) for s, name in enumerate("qkv")]
    assert _merged(block) == [
        't0 = torch.einsum("ac,cdb->dab", x, W)',
        "q = t0[0]",
        "k = t0[1]",
        "v = t0[2]",
        "del t0",
    ]


def test_siblings_merge_inside_larger_expressions() -> None:
    bias = ir.Ref("b", axes=(i, j))
    block = [
        ir.Assign(("q",), ir.Binary("+", bias, _sibling(1, size=2), axes=(i, j))),
        ir.Assign(("k",), ir.Binary("*", _sibling(0, size=2), bias, axes=(i, j))),
    ]
    assert _merged(block) == [
        't0 = torch.einsum("ac,cdb->dab", x, W)',
        "q = b + t0[1]",
        "k = t0[0] * b",
        "del t0",
    ]


def test_slices_that_leave_part_of_the_axis_unread_stay_apart() -> None:
    """Two slices of an axis of three: the whole einsum would compute one no one reads."""
    block = [ir.Assign((name,), _sibling(s)) for s, name in enumerate("qk")]
    assert _merged(block) == [
        'q = torch.einsum("ac,cb->ab", x, W[:, 0])',
        'k = torch.einsum("ac,cb->ab", x, W[:, 1])',
    ]


def test_no_siblings_merge_across_a_write_of_what_they_read() -> None:
    update = ir.Update("x", (ir.Ref("t", axes=(i,)),), "+", ir.Ref("u", axes=(i,)))
    block = [ir.Assign(("q",), _sibling(0)), update, ir.Assign(("k",), _sibling(1))]
    assert _merged(block) == [
        'q = torch.einsum("ac,cb->ab", x, W[:, 0])',
        "x[t] += u",
        'k = torch.einsum("ac,cb->ab", x, W[:, 1])',
    ]


# -- batched matrix products as matmuls ---------------------------------------------------------
b, t, s, d = sp.symbols("b t s d", integer=True)
q = ir.Ref("q", axes=(b, t, d))
kk = ir.Ref("k", axes=(b, s, d))


def _matmuls(*values: ir.Node) -> list[str]:
    block = [ir.Assign((f"o{n}",), v) for n, v in enumerate(values)]
    return [TorchPrinter().doprint(st) for st in batched_matmuls(block)]


def test_a_batched_matrix_product_is_a_matmul() -> None:
    """sum_d q[b, t, d] k[b, s, d] = (q @ k^T)[b, t, s]; over (b, s, t) it is k @ q^T."""
    ts = ir.Contract((q, kk), (b, t, s, d), axes=(b, t, s))
    st = ir.Contract((q, kk), (b, t, s, d), axes=(b, s, t))
    assert _matmuls(ts, st) == ["o0 = q @ k.permute(0, 2, 1)", "o1 = k @ q.permute(0, 2, 1)"]


def test_a_batch_axis_out_of_place_is_permuted_back() -> None:
    # the result over (t, b, s): the matmul's (b, t, s), a view permuted
    tbs = ir.Contract((q, kk), (b, t, s, d), axes=(t, b, s))
    assert _matmuls(tbs) == ["o0 = (q @ k.permute(0, 2, 1)).permute(1, 0, 2)"]


def test_other_contractions_stay_einsums() -> None:
    two = ir.Contract((q, ir.Ref("w", axes=(t, d))), (b, t, d), axes=(b,))  # two axes summed
    wide = ir.Broadcast(ir.Ref("u", axes=(b, s)), (True, True, False), axes=(b, s, d))
    stretched = ir.Contract((q, wide), (b, t, s, d), axes=(b, t, s))  # u broadcast over d
    assert _matmuls(two, stretched) == [
        'o0 = torch.einsum("abc,bc->a", q, w)',
        'o1 = torch.einsum("abd,acd->abc", q, u[:, :, None])',
    ]


def test_a_temporary_is_freed_after_its_last_read_but_not_what_is_kept() -> None:
    # a = x * g; b = a * y (a's last read); v = b.T (a view of b); d = v * x; d returned.
    # a, b and v are freed after their last reads (b's storage with v's, the last name on
    # it); xt, a view of the input x, is not (the caller's storage), nor a name none reads
    a, b, v, xt = (ir.Ref(n, axes=(i, j)) for n in ("a", "b", "v", "xt"))
    block = [
        ir.Assign(("xt",), ir.Permute(x, (1, 0), axes=(j, i))),
        ir.Assign(("a",), _mul(xt, g)),
        ir.Assign(("b",), _mul(a, y)),
        ir.Assign(("v",), ir.Permute(b, (1, 0), axes=(j, i))),
        ir.Assign(("d",), _mul(v, x)),
        ir.Assign(("unread",), _mul(x, x)),
    ]
    got = [TorchPrinter().doprint(s) for s in released(block, keep={"d"})]
    assert got == [
        "xt = x.T",
        "a = xt * g",
        "b = a * y",
        "del a",
        "v = b.T",
        "del b",
        "d = v * x",
        "del v",
        "unread = x * x",
    ]


def test_a_name_freed_already_is_not_freed_twice() -> None:
    block = [ir.Assign(("t",), _mul(x, g)), ir.Assign(("d",), _mul(x, x)), ir.Free(("t",))]
    assert released(block, keep={"d"}) == block
