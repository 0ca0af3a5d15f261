"""The kernel IR's passes, one behaviour per test: statements in, the exact statements out."""

from __future__ import annotations

import itertools

import sympy as sp

from derive.ir import nodes as ir
from derive.ir import sharing
from derive.ir.dead import dead_dropped
from derive.ir.fused import softmaxes
from derive.ir.layout import contiguous_layouts
from derive.ir.passes import batched_matmuls, merged_siblings, released, stacked_siblings
from derive.ir.printer import TorchPrinter
from derive.ir.sharing import common_subexpressions
from derive.ir.slices import merged_maps

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


def test_work_on_operands_permuted_alike_is_the_work_permuted() -> None:
    """``s = x * g``, then a contraction reads ``(x.T * g.T).T`` (the same product, laid out
    in its own order: a ConvNeXt MLP's dW1 beside its dx): one product, read by its name."""
    t = (j, i)
    xt, gt = (ir.Permute(v, (1, 0), axes=t) for v in (x, g))
    again = ir.Permute(ir.Binary("*", xt, gt, axes=t), (1, 0), axes=(i, j))
    block = [
        ir.Assign(("s",), _mul(x, g)),
        ir.Assign(("a",), ir.Binary("+", again, y, axes=(i, j))),
    ]
    assert _printed(block) == ["s = x * g", "a = s + y"]


def test_the_largest_repeat_first_and_across_statements() -> None:
    both = _mul(square, g)
    block = [
        ir.Assign(("a",), ir.Binary("+", both, y, axes=(i, j))),
        ir.Assign(("b",), ir.Binary("-", both, x, axes=(i, j))),
    ]
    assert _printed(block) == ["t0 = torch.square(x) * g", "a = t0 + y", "b = t0 - x", "del t0"]


def test_an_assignment_updated_in_place_never_holds_a_shared_value() -> None:
    """``a = x * g`` then ``a[t] += v``: a name bound to x * g would see the update."""
    update = ir.IndexPut("a", (ir.Ref("t", axes=(i,)),), ir.Ref("v", axes=(i,)))
    block = [
        ir.Assign(("a",), _mul(x, g)),
        update,
        ir.Assign(("b",), ir.Neg(_mul(x, g), axes=(i, j))),
    ]
    assert _printed(block) == ["a = x * g", "a = _index_put(a, (t,), v)", "b = -x * g"]


def test_a_name_assigned_once_holds_its_value_for_later_reads() -> None:
    """Not freed here (the function may return it): no ``del`` is added for it."""
    block = [ir.Assign(("a",), _mul(x, g)), ir.Assign(("b",), ir.Neg(_mul(x, g), axes=(i, j)))]
    assert _printed(block) == ["a = x * g", "b = -a"]


def test_nothing_is_shared_across_a_write_of_what_it_reads() -> None:
    update = ir.IndexPut("x", (ir.Ref("t", axes=(i,)),), ir.Ref("v", axes=(i,)))
    block = [ir.Assign(("a",), ir.Neg(square)), update, ir.Assign(("b",), ir.Neg(square))]
    assert _printed(block) == [
        "a = -torch.square(x)",
        "x = _index_put(x, (t,), v)",
        "b = -torch.square(x)",
    ]


def test_views_and_python_numbers_stay_inline() -> None:
    view = ir.Permute(x, (1, 0), axes=(j, i))
    n = ir.Binary("*", ir.Ref("N", scalar=True), ir.Number(2))
    block = [ir.Assign(("a",), ir.Binary("*", view, n)), ir.Assign(("b",), ir.Binary("/", view, n))]
    assert _printed(block) == ["a = x.T * N * 2", "b = x.T / (N * 2)"]


def test_a_name_that_holds_the_value_already_is_read_and_lives_longer() -> None:
    """One definition made ``s = torch.square(x)`` and freed it; a later one computes it
    again: the later reads read s, and s is freed after them (the function's whole block is
    shared over, not one definition's)."""
    block = [
        ir.Assign(("s",), square),
        ir.Assign(("a",), _mul(ir.Ref("s", axes=(i, j)), g)),
        ir.Free(("s",)),
        ir.Assign(("b",), _mul(square, y)),
    ]
    assert _printed(block) == ["s = torch.square(x)", "a = s * g", "b = s * y", "del s"]


def test_a_later_name_for_the_value_is_computed_where_it_is_first_used() -> None:
    block = [ir.Assign(("a",), _mul(square, g)), ir.Assign(("s",), square), ir.Free(("s",))]
    assert _printed(block) == ["s = torch.square(x)", "a = s * g", "del s"]


def test_a_temporary_computed_twice_under_other_index_names_is_one() -> None:
    """``t1 = x[m] >= 0`` after ``t0 = x[n] >= 0``: the same tensor (index names label axes,
    and the printed code is alike), so t1's reads read t0; and ``u = t0``, another name of
    a temporary, is t0."""
    m = sp.Symbol("m", integer=True)
    cond = {k: ir.Binary(">=", ir.Ref("x", axes=(k,)), ir.Number(0), axes=(k,)) for k in (i, m)}
    block = [
        ir.Assign(("t0",), cond[i]),
        ir.Assign(("a",), ir.Where(ir.Ref("t0", axes=(i,)), g, y, axes=(i,))),
        ir.Free(("t0",)),
        ir.Assign(("t1",), cond[m]),
        ir.Assign(("u",), ir.Ref("t1", axes=(m,))),
        ir.Assign(("b",), ir.Where(ir.Ref("u", axes=(m,)), y, g, axes=(m,))),
        ir.Free(("t1", "u")),
    ]
    assert _printed(block) == [
        "t0 = x >= 0",
        "a = torch.where(t0, g, y)",
        "b = torch.where(t0, y, g)",
        "del t0",
    ]


def test_contractions_of_the_same_operands_onto_other_axes_are_other_tensors() -> None:
    """einsum("ij,jk->ik") and einsum("ij,jk->ikj"), alike but for their axes: an einsum's
    subscripts are its axes, so the two are not one (the first keying on values without
    their labels shared them: fuzz 1162, a masked softmax's second order, crashed)."""
    k = sp.Symbol("k", integer=True)
    a, b = ir.Ref("a", axes=(i, j)), ir.Ref("b", axes=(j, k))
    two = ir.Contract((a, b), (i, j, k), axes=(i, k))
    three = ir.Contract((a, b), (i, j, k), axes=(i, k, j))
    block = [
        ir.Assign(("p",), ir.Neg(two, axes=(i, k))),
        ir.Assign(("q",), ir.Neg(three, axes=(i, k, j))),
        ir.Assign(("r",), ir.Neg(two, axes=(i, k))),
    ]
    got = _printed(block)
    assert got[0] == 't0 = torch.einsum("ab,bc->ac", a, b)', got
    assert got[1:4] == ["p = -t0", 'q = -torch.einsum("ab,bc->acb", a, b)', "r = -t0"], got


def test_sharing_keys_each_value_once_not_once_per_round(monkeypatch) -> None:
    """A value's key is built from its children's and kept on the node: a round of sharing
    keys only the nodes it rebuilt (and the names it reads instead), so the keys built stay
    within a few per node of the block. Keying every subtree anew each round (fuzz 941281:
    86 of its 194 s) builds hundreds of thousands here: 40 rounds (the k-th statement
    computes ``x_k * g`` twice), each over every statement's deep value (a tree of 2**8
    leaves, its subtrees shared)."""
    built = []
    init = sharing._Key.__init__

    def counting(self, parts):
        built.append(1)
        init(self, parts)

    monkeypatch.setattr(sharing._Key, "__init__", counting)
    deep = [x, y]
    for _ in range(8):
        deep = [_mul(deep[0], deep[1]), ir.Binary("+", deep[1], deep[0], axes=(i, j))]
    block = []
    for k in range(40):
        twice = _mul(ir.Ref(f"x{k}", axes=(i, j)), g)
        block.append(ir.Assign((f"a{k}",), _mul(_mul(twice, deep[k % 2]), twice)))
    nodes = {id(n): n for s in block for v in s.nodes() for n in ir.walk(v)}
    shared = common_subexpressions(block, lambda stem: f"{stem}_{len(built)}")
    assert sum(isinstance(s, ir.Assign) for s in shared) > 40  # the values were shared
    assert len(built) <= 10 * len(nodes), (len(built), len(nodes))  # 515 for 179 nodes


def test_two_temporaries_alike_once_a_value_inside_is_shared_are_one() -> None:
    """One definition shared ``square`` as ``s`` inside its temporary ``a``; another's ``b``
    reads ``torch.square(x)`` itself: alike only after b's square reads s, then b is a (a
    sigmoid focal loss computed one addcmul twice)."""
    a_value = _mul(ir.Ref("s", axes=(i, j)), y)
    block = [
        ir.Assign(("s",), square),
        ir.Assign(("a",), a_value),
        ir.Assign(("d",), _mul(ir.Ref("a", axes=(i, j)), ir.Ref("s", axes=(i, j)))),
        ir.Free(("a", "s")),
        ir.Assign(("b",), _mul(square, y)),
        ir.Assign(("e",), ir.Binary("+", ir.Ref("b", axes=(i, j)), g, axes=(i, j))),
        ir.Free(("b",)),
    ]
    assert _printed(block) == [
        "s = torch.square(x)",
        "a = s * y",
        "d = a * s",
        "del s",
        "e = a + g",
        "del a",
    ]


def test_no_name_holds_a_value_across_a_write_of_what_it_reads() -> None:
    update = ir.IndexPut("x", (ir.Ref("k", axes=(i,)),), ir.Ref("v", axes=(i,)))
    block = [ir.Assign(("s",), square), ir.Free(("s",)), update, ir.Assign(("b",), _mul(square, y))]
    assert _printed(block) == [
        "s = torch.square(x)",
        "del s",
        "x = _index_put(x, (k,), v)",
        "b = torch.square(x) * y",
    ]


def _addcmul(r: ir.Node, a: ir.Node, b: ir.Node, value: ir.Node | None = None) -> ir.Node:
    if value is None:
        return ir.Apply("torch.addcmul({0}, {1}, {2})", (r, a, b), axes=(i, j))
    return ir.Apply("_addcmul({0}, {1}, {2}, {3})", (r, a, b, value), axes=(i, j))


def test_an_addcmul_of_a_product_made_anyway_reads_it() -> None:
    """layernorm's backward: ``gain * grad_out`` in its sums, then ``addcmul(-S / C, gain,
    grad_out)`` multiplied it again; the scale of the rest rides in torch.add's alpha."""
    s = ir.Ref("s", axes=(i, j))
    rest = ir.Binary("*", s, ir.Number(sp.Rational(-1, 3)), axes=(i, j))
    block = [
        ir.Assign(("a",), ir.Apply("torch.exp({0})", (_mul(x, g),), axes=(i, j))),
        ir.Assign(("b",), _addcmul(rest, g, x)),  # the product in the other order
        ir.Assign(("c",), _addcmul(y, x, g, ir.Number(2))),
        ir.Assign(("d",), _addcmul(y, x, y)),  # x * y is made nowhere else: fused still
    ]
    assert _printed(block) == [
        "t0 = x * g",
        "a = torch.exp(t0)",
        "b = _add_scaled(t0, s, -1 / 3)",
        "c = _add_scaled(y, t0, 2)",
        "del t0",
        "d = torch.addcmul(y, x, y)",
    ]


def test_an_addcmul_stays_fused_where_its_product_cannot_be_shared() -> None:
    """x written between the two reads: the product before is another tensor."""
    update = ir.IndexPut("x", (ir.Ref("k", axes=(i,)),), ir.Ref("v", axes=(i,)))
    block = [
        ir.Assign(("a",), ir.Apply("torch.exp({0})", (_mul(x, g),), axes=(i, j))),
        update,
        ir.Assign(("b",), _addcmul(y, x, g)),
    ]
    assert _printed(block) == [
        "a = torch.exp(x * g)",
        "x = _index_put(x, (k,), v)",
        "b = torch.addcmul(y, x, g)",
    ]


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
    update = ir.IndexPut("x", (ir.Ref("t", axes=(i,)),), ir.Ref("u", axes=(i,)))
    block = [ir.Assign(("q",), _sibling(0)), update, ir.Assign(("k",), _sibling(1))]
    assert _merged(block) == [
        'q = torch.einsum("ac,cb->ab", x, W[:, 0])',
        "x = _index_put(x, (t,), u)",
        'k = torch.einsum("ac,cb->ab", x, W[:, 1])',
    ]


# -- batched matrix products as matmuls ---------------------------------------------------------
b, t, s, d = sp.symbols("b t s d", integer=True)
q = ir.Ref("q", axes=(b, t, d))
kk = ir.Ref("k", axes=(b, s, d))


def _matmuls(*values: ir.Node) -> list[str]:
    block = [ir.Assign((f"o{n}",), v) for n, v in enumerate(values)]
    return [TorchPrinter().doprint(st) for st in batched_matmuls(block)]


def test_a_batched_matrix_product_is_a_bmm() -> None:
    """sum_d q[b, t, d] k[b, s, d] = (q @ k^T)[b, t, s]; over (b, s, t) it is k @ q^T. One
    ``torch.bmm``: ``@`` on 3-D tensors is torch.matmul's expands and reshapes around it."""
    ts = ir.Contract((q, kk), (b, t, s, d), axes=(b, t, s))
    st = ir.Contract((q, kk), (b, t, s, d), axes=(b, s, t))
    assert _matmuls(ts, st) == [
        "o0 = torch.bmm(q, k.permute(0, 2, 1))",
        "o1 = torch.bmm(k, q.permute(0, 2, 1))",
    ]


def test_a_batch_axis_out_of_place_is_permuted_back() -> None:
    # the result over (t, b, s): the matmul's (b, t, s), a view permuted
    tbs = ir.Contract((q, kk), (b, t, s, d), axes=(t, b, s))
    assert _matmuls(tbs) == ["o0 = torch.bmm(q, k.permute(0, 2, 1)).permute(1, 0, 2)"]


def test_two_batch_axes_stay_a_4d_matmul() -> None:
    """sum_d q[b, h, t, d] k[b, h, s, d] (attention's scores): torch.matmul's own batch, not
    a bmm over (b, h) flattened by python calls around it."""
    h = sp.Symbol("h", integer=True)
    q4, k4 = ir.Ref("q", axes=(b, h, t, d)), ir.Ref("k", axes=(b, h, s, d))
    scores = ir.Contract((q4, k4), (b, h, t, s, d), axes=(b, h, t, s))
    assert _matmuls(scores) == ["o0 = q @ k.permute(0, 1, 3, 2)"]


def test_summed_axes_are_flattened_into_one() -> None:
    """sum_{t,d} q[b, t, d] w[t, d]: (t, d) read as one axis, a matrix-vector product."""
    two = ir.Contract((q, ir.Ref("w", axes=(t, d))), (b, t, d), axes=(b,))
    assert _matmuls(two) == ["o0 = q.flatten(1) @ w.flatten(0)"]


def test_a_group_of_kept_axes_takes_its_lengths_from_the_tensor_it_views() -> None:
    """sum_c x[b, c] W[c, s, d] over (b, s, d): one mm of x by W with (s, d) flattened, the
    result unflattened by W's own lengths, read at run time."""
    c = sp.Symbol("c", integer=True)
    x_, w_ = ir.Ref("x", axes=(b, c)), ir.Ref("W", axes=(c, s, d))
    value = ir.Contract((x_, w_), (b, c, s, d), axes=(b, s, d))
    assert _matmuls(value) == ["o0 = (x @ W.flatten(1)).unflatten(1, (W.shape[1], W.shape[2]))"]


def test_a_product_over_the_same_axes_summed_is_a_sum() -> None:
    """sum_d q[b, t, d] p[b, t, d] g[d]: no outer product, so ``(q * p * g).sum(2)``, not a
    bmm of 1 x D by D x 1 matrices."""
    p_, g_ = ir.Ref("p", axes=(b, t, d)), ir.Ref("g", axes=(d,))
    value = ir.Contract((q, p_, g_), (b, t, d), axes=(b, t))
    assert _matmuls(value) == ["o0 = (q * p * g).sum(2)"]


def test_other_contractions_stay_einsums() -> None:
    wide = ir.Broadcast(ir.Ref("u", axes=(b, s)), (True, True, False), axes=(b, s, d))
    stretched = ir.Contract((q, wide), (b, t, s, d), axes=(b, t, s))  # u broadcast over d
    assert _matmuls(stretched) == ['o0 = torch.einsum("abd,acd->abc", q, u[:, :, None])']


# -- stacks of sibling contractions -------------------------------------------------------------
def _stacked(block: list[ir.Statement]) -> list[str]:
    names = (f"t{k}" for k in itertools.count())
    stacked = stacked_siblings(block, lambda _: next(names))
    return [TorchPrinter().doprint(st) for st in batched_matmuls(stacked)]


def _gradients(k: int) -> ir.Ref:
    return ir.Ref(f"g{k}", axes=(b, j))  # the gradient of the slice k


def test_a_stack_of_contractions_is_a_contraction_of_the_stack() -> None:
    """stack_k(c_k sum_b x[b, c] g_k[b, j]) = sum_b x[b, c] stack_k(c_k g_k)[b, k, j]: one mm,
    the scale moved onto g_k."""
    c_ = ir.Ref("x", axes=(b, c))
    block = [
        ir.Assign((f"s{k}",), ir.Contract((c_, _gradients(k)), (c, j, b), axes=(c, j)))
        for k in range(2)
    ]
    half = ir.Binary("/", ir.Ref("s0", axes=(c, j)), ir.Number(2), axes=(c, j))
    block.append(ir.Assign(("dW",), ir.Stack((half, ir.Ref("s1", axes=(c, j))), 1, axes=(c, s, j))))
    assert _stacked(block) == [
        "t0 = torch.stack([g0 / 2, g1], 1)",
        "dW = (x.T @ t0.flatten(1)).unflatten(1, (t0.shape[1], t0.shape[2]))",
        "del t0",
    ]


def test_a_sum_over_every_slice_is_one_contraction_of_the_stack() -> None:
    """sum_k sum_j W[c, k, j] g_k[b, j] = sum_{k, j} W[c, k, j] stack_k(g_k)[b, k, j], read by
    a second family (the stack above) as the same tensor."""
    terms = [
        ir.Contract((_slice_of_w(k, 2), _gradients(k)), (b, c, j), axes=(b, c)) for k in range(2)
    ]
    block = [ir.Assign((f"s{k}",), v) for k, v in enumerate(terms)]
    block.append(
        ir.Assign(
            ("dx",),
            ir.Binary("+", ir.Ref("s0", axes=(b, c)), ir.Ref("s1", axes=(b, c)), axes=(b, c)),
        )
    )
    assert _stacked(block) == [
        "t0 = torch.stack([g0, g1], 1)",
        "dx = t0.flatten(1) @ W.permute(1, 2, 0).flatten(0, 1)",
        "del t0",
    ]


def test_a_family_whose_parts_are_read_again_stays() -> None:
    terms = [
        ir.Contract((_slice_of_w(k, 2), _gradients(k)), (b, c, j), axes=(b, c)) for k in range(2)
    ]
    block = [ir.Assign((f"s{k}",), v) for k, v in enumerate(terms)]
    s0 = ir.Ref("s0", axes=(b, c))
    block.append(ir.Assign(("dx",), ir.Binary("+", s0, ir.Ref("s1", axes=(b, c)), axes=(b, c))))
    block.append(ir.Assign(("again",), ir.Neg(s0, axes=(b, c))))
    assert len([line for line in _stacked(block) if "stack" in line]) == 0


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


def test_a_name_nothing_reads_goes_with_what_only_it_read() -> None:
    """s = zeros; s.scatter_add_(.., a) where no later statement reads s: s, its update and
    the a only they read are dropped, and so is a's ``del``; what d reads stays."""
    i0 = ir.Ref("idx", axes=(i,))
    block = [
        ir.Assign(("a",), _mul(x, g)),
        ir.Assign(("s",), ir.Apply("torch.zeros_like({0})", (x,), axes=(i, j))),
        ir.ScatterAdd("s", 0, i0, ir.Ref("a", axes=(i, j))),
        ir.Free(("a", "x")),
        ir.Assign(("d",), _mul(y, y)),
    ]
    got = [TorchPrinter().doprint(s) for s in dead_dropped(block, keep={"d"})]
    assert got == ["del x", "d = y * y"]
    assert dead_dropped(block, keep={"d", "s"}) == block


# -- a bias in the matmul, element-wise siblings over slices, layouts ------------------------------
def test_a_bias_over_one_sides_kept_axes_rides_in_an_addmm() -> None:
    """b[s, d] + sum_c x[n, t, c] W[c, s, d], the contraction named once (as the lowering
    names a sum inside an expression): one addmm, each group of axes flattened."""
    c = sp.Symbol("c", integer=True)
    n = sp.Symbol("n", integer=True)
    x_, w_ = ir.Ref("x", axes=(n, t, c)), ir.Ref("W", axes=(c, s, d))
    bias = ir.Broadcast(ir.Ref("b", axes=(s, d)), (), axes=(n, t, s, d))
    block = [
        ir.Assign(("m",), ir.Contract((x_, w_), (n, t, s, d, c), axes=(n, t, s, d))),
        ir.Assign(("o",), ir.Binary("+", bias, ir.Ref("m", axes=(n, t, s, d)), axes=(n, t, s, d))),
    ]
    printed = [TorchPrinter().doprint(st) for st in batched_matmuls(block)]
    assert printed == [
        "o = torch.addmm(b.flatten(0), x.flatten(0, 1), W.flatten(1))"
        ".unflatten(1, (W.shape[1], W.shape[2])).unflatten(0, (x.shape[0], x.shape[1]))"
    ]


def test_a_bias_beside_a_batched_product_stays_an_add() -> None:
    """addmm's operands are matrices: under a batch axis the bias is added after."""
    value = ir.Binary(
        "+",
        ir.Ref("u", axes=(b, t, s)),
        ir.Contract((q, kk), (b, t, s, d), axes=(b, t, s)),
        axes=(b, t, s),
    )
    assert _matmuls(value) == ["o0 = u + torch.bmm(q, k.permute(0, 2, 1))"]


def _maps(block: list[ir.Statement], keep=("q", "k", "v")) -> list[str]:
    names = (f"t{k}" for k in itertools.count())
    return [TorchPrinter().doprint(st) for st in merged_maps(block, lambda _: next(names), keep)]


def _sliced(name: str, k: int, axes: tuple, size: int = 3) -> ir.Slice:
    arg = ir.Ref(name, axes=(sp.Symbol("slice0", integer=True),) + axes)
    return ir.Slice(arg, (k,), (sp.Integer(size),), axes=axes)


def test_element_wise_siblings_over_every_slice_are_one_map() -> None:
    """q = b[0] + S[0], k = b[1] + S[1], v = b[2] + S[2] is (b + S)[k]: one kernel."""
    block = []
    for k, name in enumerate("qkv"):
        bias = ir.Broadcast(_sliced("b", k, (j,)), (), axes=(i, j))
        block.append(ir.Assign((name,), ir.Binary("+", bias, _sliced("S", k, (i, j)), axes=(i, j))))
    assert _maps(block) == ["t0 = b[:, None] + S", "q = t0[0]", "k = t0[1]", "v = t0[2]", "del t0"]


def test_siblings_updated_in_place_or_of_other_forms_stay_apart() -> None:
    """A slice is a view: a member written in place later would write its neighbours' entries
    too; and q = S[0] * 2 beside k = S[1] + 2 are no family."""
    scaled = [
        ir.Binary("*", _sliced("S", k, (i, j), size=2), ir.Number(2), axes=(i, j)) for k in (0, 1)
    ]
    update = ir.IndexPut("k", (ir.Ref("t", axes=(i,)),), ir.Ref("u", axes=(i,)))
    block = [ir.Assign(("q",), scaled[0]), ir.Assign(("k",), scaled[1]), update]
    assert _maps(block) == ["q = S[0] * 2", "k = S[1] * 2", "k = _index_put(k, (t,), u)"]
    other = ir.Binary("+", _sliced("S", 1, (i, j), size=2), ir.Number(2), axes=(i, j))
    assert _maps([ir.Assign(("q",), scaled[0]), ir.Assign(("k",), other)]) == [
        "q = S[0] * 2",
        "k = S[1] + 2",
    ]


def test_a_permuted_view_read_by_two_batched_matmuls_is_stored_contiguous() -> None:
    """p = (x @ W).permute(..): each batched matmul that reads p over (b, h) would copy it;
    stored contiguous once, neither does. Read by one, it stays a view (the copy moves)."""
    h = sp.Symbol("h", integer=True)
    mm = ir.Matmul(ir.Ref("x", axes=(b, t, d)), ir.Ref("W", axes=(d, h)), axes=(b, t, h))
    view = ir.Unflatten(mm, 2, (ir.Number(2), ir.Number(4)), axes=(b, t, h, s))
    p = ir.Permute(view, (0, 2, 1, 3), axes=(b, h, t, s))
    pr = ir.Ref("p", axes=(b, h, t, s))
    pt = ir.Permute(pr, (0, 1, 3, 2), axes=(b, h, s, t))
    two = [
        ir.Assign(("p",), p),
        ir.Assign(("a",), ir.Matmul(pr, pt, axes=(b, h, t, t))),
        ir.Assign(("c",), ir.Matmul(pt, pr, axes=(b, h, s, s))),
    ]
    printed = [TorchPrinter().doprint(st) for st in contiguous_layouts(two, ())]
    assert printed[0].endswith(".permute(0, 2, 1, 3).contiguous()")
    one = two[:1] + [
        ir.Assign(("a",), ir.Matmul(pr, ir.Ref("y", axes=(b, h, s, t)), axes=(b, h, t, t)))
    ]
    printed = [TorchPrinter().doprint(st) for st in contiguous_layouts(one, ())]
    assert printed[0].endswith(".permute(0, 2, 1, 3)")
    assert [TorchPrinter().doprint(st) for st in contiguous_layouts(one, ("p",))][0].endswith(
        ".contiguous()"
    )  # handed on: the next function's matmuls read it too


def test_slices_read_through_names_merge_only_while_their_tensor_holds() -> None:
    """a = S[0], b = S[1], then S bound anew: q = a + 1, k = b + 1 read the old S's slices,
    which (S + 1)[k] at q's place would not."""
    one = ir.Number(1)
    views = [ir.Assign((n,), _sliced("S", k, (i, j), size=2)) for k, n in enumerate("ab")]
    members = [
        ir.Assign((m,), ir.Binary("+", ir.Ref(n, axes=(i, j)), one, axes=(i, j)))
        for m, n in zip("qk", "ab", strict=True)
    ]
    rebound = ir.Assign(("S",), ir.Ref("T", axes=(sp.Symbol("slice0", integer=True), i, j)))
    assert _maps(views + members) == ["t0 = S + 1", "q = t0[0]", "k = t0[1]", "del t0"]
    assert _maps(views + [rebound] + members)[-2:] == ["q = a + 1", "k = b + 1"]


# -- fused kernels (derive/ir/fused.py) ---------------------------------------------------------
def _softmax_block(shift: ir.Node | None, quotient: str = "reciprocal") -> list[ir.Statement]:
    """``m = x.amax(1)``, ``e = exp(x - m)``, ``s = e.sum(1)``, ``p = e / s`` as lowered."""
    body = x if shift is None else ir.Binary("-", x, shift, axes=(i, j))
    e, s = ir.Ref("e", axes=(i, j)), ir.Ref("s", axes=(i,))
    wide = ir.Broadcast(s, (True, False), axes=(i, j))
    if quotient == "reciprocal":
        p = _mul(
            ir.Broadcast(
                ir.Apply("torch.reciprocal({0})", (s,), axes=(i,)), (True, False), axes=(i, j)
            ),
            e,
        )
    else:
        p = ir.Binary("/", e, wide, axes=(i, j))
    return [
        ir.Assign(("m",), ir.Reduce("amax", x, (1,), axes=(i,))),
        ir.Assign(("e",), ir.Apply("torch.exp({0})", (body,), axes=(i, j))),
        ir.Free(("m",)) if shift is not None else ir.Free(()),
        ir.Assign(("s",), ir.Reduce("sum", e, (1,), axes=(i,))),
        ir.Assign(("p",), p),
        ir.Free(("e", "s")),
    ]


def _fused(block: list[ir.Statement], keep=("p",)) -> list[str]:
    block = [s for s in block if not (isinstance(s, ir.Free) and not s.names)]
    return [TorchPrinter().doprint(s) for s in released(softmaxes(block, keep), keep)]


def test_a_softmax_written_out_is_one_kernel() -> None:
    """exp(x - max) over its row sum: torch.softmax, and the max, the exp and the sum go."""
    shift = ir.Broadcast(ir.Ref("m", axes=(i,)), (True, False), axes=(i, j))
    for quotient in ("reciprocal", "divide"):
        assert _fused(_softmax_block(shift, quotient)) == ["p = torch.softmax(x, 1)"]


def test_a_softmax_without_its_shift_is_one_kernel_too() -> None:
    """exp(x) / sum exp(x) is the same function (the kernel subtracts the max itself)."""
    block = [
        s for s in _softmax_block(None) if not (isinstance(s, ir.Assign) and s.targets == ("m",))
    ]
    assert _fused(block) == ["p = torch.softmax(x, 1)"]


def test_a_softmax_whose_sum_is_read_again_stays_written_out() -> None:
    """The row sum handed on (saved) or read by another statement: the kernel would compute
    it again. The exp read again stays beside the kernel."""
    shift = ir.Broadcast(ir.Ref("m", axes=(i,)), (True, False), axes=(i, j))
    block = _softmax_block(shift)
    written_out = "p = torch.reciprocal(s)[:, None] * e"
    assert written_out in _fused(block, keep=("p", "s"))
    wide_s = ir.Broadcast(ir.Ref("s", axes=(i,)), (True, False), axes=(i, j))
    again = [*block[:-1], ir.Assign(("q",), _mul(wide_s, g)), block[-1]]
    assert written_out in _fused(again, keep=("p", "q"))
    again = [*block[:-1], ir.Assign(("q",), _mul(ir.Ref("e", axes=(i, j)), g)), block[-1]]
    assert _fused(again, keep=("p", "q")) == [
        "m = x.amax(1)",
        "e = torch.exp(x - m[:, None])",
        "del m",
        "p = torch.softmax(x, 1)",
        "q = e * g",
        "del e",
    ]


def test_a_shift_that_varies_along_the_row_stays_in_the_kernels_argument() -> None:
    """exp(x - y) over its sum, y varying along the summed axis: softmax(x - y), not of x."""
    assert _fused(_softmax_block(y)) == ["m = x.amax(1)", "del m", "p = torch.softmax(x - y, 1)"]


def test_a_log_softmax_written_out_is_one_kernel() -> None:
    """x - m - log(sum exp(x - m)): torch.log_softmax; with another shift outside the log
    than inside it, it is no log-softmax and stays as written."""
    wide = ir.Broadcast(ir.Ref("m", axes=(i,)), (True, False), axes=(i, j))
    other = ir.Broadcast(ir.Ref("n", axes=(i,)), (True, False), axes=(i, j))
    exps = ir.Apply("torch.exp({0})", (ir.Binary("-", x, wide, axes=(i, j)),), axes=(i, j))
    log_s = ir.Broadcast(
        ir.Apply("torch.log({0})", (ir.Ref("s", axes=(i,)),), axes=(i,)), (True, False), axes=(i, j)
    )
    for shift, fused in ((wide, True), (other, False)):
        block = [
            ir.Assign(("m",), ir.Reduce("amax", x, (1,), axes=(i,))),
            ir.Assign(("n",), ir.Reduce("sum", x, (1,), axes=(i,))),
            ir.Assign(("s",), ir.Reduce("sum", exps, (1,), axes=(i,))),
            ir.Assign(
                ("o",),
                ir.Binary("-", ir.Binary("-", x, log_s, axes=(i, j)), shift, axes=(i, j)),
            ),
        ]
        out = _fused(block, keep=("o",))
        assert ("o = torch.log_softmax(x, 1)" in out) == fused, out
