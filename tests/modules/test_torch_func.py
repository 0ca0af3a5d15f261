"""Generated ops under torch.func and torch.compile, as PyTorch's own ops work there.

``Function.apply`` hands over to a new-style node (``setup_context``, a generated vmap rule)
while a torch.func transform is active; each result is held to the same transform through
the definitions' text (:mod:`derive.verify.oracle`). Forward mode (jvp, jacfwd, hessian) has
its own file, tests/modules/test_forward_mode.py.
"""

from __future__ import annotations

import glob
import importlib
import math
import runpy
import sys
from pathlib import Path

import pytest
import torch

from derive.language import parse
from derive.verify.check import defined_inputs
from tests.modules.emitted import as_functions, hessian_in, imported

CATALOGUE = sorted(glob.glob("ops/*.py"))
CASES = sorted(glob.glob("tests/cases/*.py"))
TOL = 1e-10


def _op(path: str):
    op = runpy.run_path(path)["OP"]
    module = importlib.import_module(f"generated.{op.name}")
    inputs, _ = defined_inputs(parse(op), 0)
    return op, module, inputs


def _close(mine, want, tol=TOL):
    mine, want = mine.detach(), want.detach()
    assert mine.shape == want.shape
    assert float((mine - want).abs().max()) <= tol * max(1.0, float(want.abs().max()))


@pytest.mark.parametrize("path", CATALOGUE)
def test_grad_vjp_and_jacrev_of_jacrev_equal_the_definitions(path):
    op, module, inputs = _op(path)
    mine, text, xs = as_functions(op, module, inputs)
    w = torch.randn(
        mine(*xs).shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1)
    )
    scalar = [lambda *a, f=f: (f(*a) * w).sum() for f in (mine, text)]
    argnums = tuple(range(len(xs)))
    for got, want in zip(*(torch.func.grad(f, argnums)(*xs) for f in scalar), strict=True):
        _close(got, want)
    # reverse over reverse through torch.func: the gradient of <v, grad> (a Hessian-vector
    # product) differentiates the generated backward over a forward run again from the inputs
    v = [
        torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(2)) for x in xs
    ]

    def hvp(f):
        def inner(*a):
            return sum((g * u).sum() for g, u in zip(torch.func.grad(f, argnums)(*a), v))

        return torch.func.grad(inner, argnums)(*xs)

    for got, want in zip(hvp(scalar[0]), hvp(scalar[1]), strict=True):
        _close(got, want, 1e-8)


@pytest.mark.parametrize("path", CATALOGUE)
def test_a_hessian_in_one_input_of_several_equals_the_definitions(path):
    """``hessian(f, argnums=k)``, forward over reverse with one input differentiated: vmap
    batches the tangent but not a buffer the backward makes, which took a batched update
    in place (tests/modules/test_cases_under_transforms.py has the cases)."""
    op, module, inputs = _op(path)
    mine, text, xs = as_functions(op, module, inputs)
    if len(xs) < 2:
        pytest.skip("one float input: its Hessian is the one over every input")
    w = torch.randn(
        mine(*xs).shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1)
    )
    for k in range(len(xs)):
        _close(hessian_in(mine, xs, w, k), hessian_in(text, xs, w, k), 1e-8)


@pytest.mark.parametrize("path", CATALOGUE)
def test_vmap_gives_per_sample_outputs_and_gradients(path):
    op, module, inputs = _op(path)
    mine, _, xs = as_functions(op, module, inputs)
    gen = torch.Generator().manual_seed(3)
    batch = [
        torch.stack([x, x + 0.1 * torch.randn(x.shape, dtype=x.dtype, generator=gen)]) for x in xs
    ]
    dims = (0,) * len(xs)
    stacked = torch.func.vmap(mine, in_dims=dims)(*batch)
    for s in range(2):
        _close(stacked[s], mine(*(b[s] for b in batch)))
    loss = lambda *a: mine(*a).pow(2).sum()  # noqa: E731
    per_sample = torch.func.vmap(torch.func.grad(loss), in_dims=dims)(*batch)
    for s in range(2):
        _close(per_sample[s], torch.func.grad(loss)(*(b[s] for b in batch)))


@pytest.mark.parametrize("name", ["tanh", "layernorm"])
def test_torch_compile_fullgraph(name):
    module = importlib.import_module(f"generated.{name}")
    op = runpy.run_path(f"ops/{name}.py")["OP"]
    inputs, _ = defined_inputs(parse(op), 0)
    leaves = [t.clone().requires_grad_() for t in inputs]
    # each op compiled afresh: dynamo 2.11 asserts recompiling this one lambda for another
    # autograd.Function (tanh's, then layernorm's), a torch bug that 2.13 does not have
    torch._dynamo.reset()
    compiled = torch.compile(
        lambda *a: module.Function.apply(*a), fullgraph=True, backend="aot_eager"
    )
    out = compiled(*leaves)
    _close(out, module.Function.apply(*inputs))
    grads = torch.autograd.grad(out.pow(2).sum(), leaves)
    want = torch.autograd.grad(module.Function.apply(*leaves).pow(2).sum(), leaves)
    for got, ref in zip(grads, want, strict=True):
        _close(got, ref)


@pytest.mark.parametrize("path", CATALOGUE)
def test_a_compiled_torch_func_gradient_and_tangent_equal_the_definitions(path):
    """torch.compile of torch.func.grad and torch.func.jvp: under a transform dynamo
    differentiates a node's traced forward, and an output that a view made its own by
    ``.detach()`` cut every gradient to 0 (10 of the 14 catalogue ops: softmax, layernorm,
    conv2d, ..; found by probing). Compiled, the view is copied."""
    op, module, inputs = _op(path)
    mine, text, xs = as_functions(op, module, inputs)
    w = torch.randn(
        mine(*xs).shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1)
    )
    tangents = tuple(
        torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(2 + k))
        for k, x in enumerate(xs)
    )
    argnums = tuple(range(len(xs)))

    def grad(f):
        return lambda *a: torch.func.grad(lambda *b: (f(*b) * w).sum(), argnums)(*a)

    def jvp(f):
        return lambda *a: torch.func.jvp(f, a, tangents)[1]

    for transform in (grad, jvp):
        torch._dynamo.reset()
        compiled = torch.compile(transform(mine), fullgraph=True, backend="aot_eager")
        got, want = compiled(*xs), transform(text)(*xs)
        for g, r in zip(*((t,) if torch.is_tensor(t) else t for t in (got, want)), strict=True):
            _close(g, r, 1e-9)


def test_compiled_per_sample_gradients_of_a_table_read_twice_equal_the_subscript_s() -> None:
    """torch.compile(vmap(grad)) through embedding, whose rows repeat: Inductor's batched
    gradient of the traced forward's index_select added them wrongly (14.2 off, no error;
    torch 2.13, found by probing); compiled under a transform the module reads ``C[idx]``."""
    from generated import embedding

    idx = torch.tensor([[0, 2, 0], [1, 2, 2]])
    tables = torch.randn(3, 4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))

    def loss(pick):
        return lambda table: (pick(idx, table) ** 2).sum()

    want = torch.func.vmap(torch.func.grad(loss(lambda i, table: table[i])))(tables)
    torch._dynamo.reset()
    got = torch.compile(torch.func.vmap(torch.func.grad(loss(embedding.Function.apply))))(tables)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_a_compiled_tangent_through_a_product_of_constants_equals_the_eager_one(
    tmp_path, monkeypatch
):
    """torch.compile of torch.func.jvp along q alone through ALiBi attention, whose bias
    ``slope[h] * (i - j)`` was ``addcmul(s, slope, i - j, value=-1)``: torch's forward mode
    through a traced addcmul with a value and no tangent on its factors segfaulted (found by
    probing). Traced, the module writes the product out."""
    module, _ = imported(Path("tests/cases/alibi_named_slopes.py"), tmp_path)
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dynamo imports it by name
    gen = torch.Generator().manual_seed(0)
    q, k, v, t = (torch.randn(2, 4, 3, dtype=torch.float64, generator=gen) for _ in range(4))

    def tangent(q):
        return torch.func.jvp(lambda q: module.Function.apply(q, k, v), (q,), (t,))[1]

    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(tangent)(q), tangent(q), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("path", CATALOGUE + CASES)
def test_torch_export(path, tmp_path, monkeypatch):
    """torch.export keeps each op as one call of its custom op (``backgen::<op>_<digest>``),
    whose derivative is the derived backward: the program's numbers and gradients are the eager
    module's, and again after torch.export.save and load. Every case exports: an int entry
    read as an index (``x[n, t[1]]``, single_entries) was a python int to fake tensors, a
    data-dependent value they refuse."""
    if path in CASES:
        module, op = imported(path, tmp_path)
        monkeypatch.setitem(sys.modules, module.__name__, module)
        inputs, _ = defined_inputs(parse(op), 0)
    else:
        op, module, inputs = _op(path)

    class Wrapped(torch.nn.Module):
        def forward(self, *args):
            return module.Function.apply(*args)

    program = torch.export.export(Wrapped(), tuple(inputs))
    calls = [n.target for n in program.graph.nodes if n.op == "call_function"]
    ours = [str(c) for c in calls if str(c).startswith("backgen.")]
    assert len(ours) == 1 and ours[0].startswith(f"backgen.{op.name}_"), calls
    torch.export.save(program, tmp_path / "program.pt2")
    for run in (program.module(), torch.export.load(tmp_path / "program.pt2").module()):
        leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
        out = run(*leaves)
        _close(out, module.Function.apply(*inputs))
        floats = [t for t in leaves if t.requires_grad]
        grads = torch.autograd.grad(out.pow(2).sum(), floats)
        eager = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
        want = torch.autograd.grad(
            module.Function.apply(*eager).pow(2).sum(), [t for t in eager if t.requires_grad]
        )
        for got, ref in zip(grads, want, strict=True):
            _close(got, ref)


def _batched(path: str) -> bool:
    graph = parse(runpy.run_path(path)["OP"])
    first = graph.tensors[graph.inputs[0]]
    return first.batched and not first.integer


@pytest.mark.parametrize("path", [p for p in CATALOGUE if _batched(p)])
def test_torch_export_with_a_dynamic_batch(path):
    """An ``x[..., C]`` op exports with its batch dimension dynamic, as F.layer_norm does, and
    the program serves another batch size with the eager module's numbers and gradients: the
    flattened batch's size was ``Size.numel()``, which export specialised to the example's."""
    op, module, inputs = _op(path)

    class Wrapped(torch.nn.Module):
        def forward(self, *args):
            return module.Function.apply(*args)

    batch = torch.export.Dim("batch", min=2, max=64)
    dims = tuple({0: batch} if k == 0 else None for k in range(len(inputs)))
    x = inputs[0]  # a batch of at least 2 (export specialises a dimension of size 1)
    example = (torch.cat([x, x * 0.5]), *inputs[1:])
    program = torch.export.export(Wrapped(), example, dynamic_shapes=(dims,))
    bigger = torch.cat([x, x * 0.5, x + 0.25])
    leaves = [bigger.clone().requires_grad_(), *inputs[1:]]
    out = program.module()(*leaves)
    eager = bigger.clone().requires_grad_()
    want = module.Function.apply(eager, *inputs[1:])
    _close(out, want)
    (got,) = torch.autograd.grad(out.pow(2).sum(), leaves[0])
    (ref,) = torch.autograd.grad(want.pow(2).sum(), eager)
    _close(got, ref)


def test_a_second_copy_of_a_module_leaves_the_first_ones_export_working(tmp_path):
    """Two copies of one module's text (the file under two names, a reload) share one custom
    op. The second asked torch's custom_op for it again, which replaced the registration, and
    the op the first copy held read a destroyed schema: "has no overload name 'Y'" (an
    argument's name) in one run of three, seen twice as a flaky make test. Each copy now looks
    the op up by name."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, op = imported("ops/exercise.py", tmp_path / "a")
    inputs, _ = defined_inputs(parse(op), 0)

    class Wrapped(torch.nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, *args):
            return self.module.Function.apply(*args)

    want = first.Function.apply(*inputs)
    torch.export.export(Wrapped(first), tuple(inputs))
    second, _ = imported("ops/exercise.py", tmp_path / "b")
    torch.export.export(Wrapped(second), tuple(inputs))
    assert first._exported() is second._exported()  # the registration, live, for both
    for _ in range(3):
        program = torch.export.export(Wrapped(first), tuple(inputs))
        _close(program.module()(*inputs), want)


def test_an_exported_program_differentiates_by_the_derived_backward(tmp_path, monkeypatch):
    """Export inlined Function into the forward's aten ops, and the program's autograd then
    differentiated those: ELU written with where() had the gradient NaN at x = 1e4 (0 * exp(1e4)
    in where's backward) where eager and compiled give 1, silently. A custom op keeps the
    derived backward, and the double backward through the program is the derived one too."""

    module = imported(Path("tests/cases/elu_by_hand.py"), tmp_path)[0]
    monkeypatch.setitem(sys.modules, module.__name__, module)  # strict export imports it

    class Wrapped(torch.nn.Module):
        def forward(self, x):
            return module.Function.apply(x)

    x = torch.tensor([1e4, -1.0, 0.5], dtype=torch.float64)
    for strict in (False, True):
        run = torch.export.export(Wrapped(), (x,), strict=strict).module()
        leaf = x.clone().requires_grad_()
        (g,) = torch.autograd.grad(run(leaf).sum(), leaf, create_graph=True)
        assert g.tolist() == [1.0, math.exp(-1.0), 1.0]
        (h,) = torch.autograd.grad(g.sum(), leaf)
        assert h.tolist() == [0.0, math.exp(-1.0), 0.0]


@pytest.mark.parametrize("path", ["ops/layernorm.py", "tests/cases/scaled_residual.py"])
def test_an_exported_program_compiles_with_inductor(path, tmp_path, monkeypatch):
    """Export, then torch.compile of the program (as a deployment compiles it): the program
    held an ``aten.promote_types`` node beside the custom op, from the dtype policy's call,
    which dynamo refused ("torch.* op returned non-Tensor"). Compiled, Inductor traces the
    custom op's backward outside dynamo, where a scale riding in torch.add's alpha is dropped
    by its addmm pattern: numbers and gradients are the eager module's."""
    if path.startswith("ops/"):
        op, module, inputs = _op(path)
    else:
        module, op = imported(path, tmp_path)
        monkeypatch.setitem(sys.modules, module.__name__, module)
        inputs, _ = defined_inputs(parse(op), 0)

    class Wrapped(torch.nn.Module):
        def forward(self, *args):
            return module.Function.apply(*args)

    program = torch.export.export(Wrapped(), tuple(inputs))
    calls = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
    assert len(calls) == 1 and calls[0].startswith(f"backgen.{op.name}_"), calls
    torch._dynamo.reset()
    compiled = torch.compile(program.module(), fullgraph=True)
    leaves = [t.clone().requires_grad_() for t in inputs]
    eager = [t.clone().requires_grad_() for t in inputs]
    _same_output_and_gradients(compiled(*leaves), leaves, module.Function.apply(*eager), eager)


def test_export_is_read_from_the_flag_torch_export_sets(monkeypatch):
    """Dynamo before torch 2.13 answers ``torch.compiler.is_exporting()`` True under plain
    torch.compile too; the module then called its export custom op there, and on torch 2.11
    (an H100's) Inductor dropped the backward's scale: dx of ``x + 0.5 x W`` was 0.8 off,
    silently. Export is now also read from the flag torch.export sets. (torch 2.13 answers
    it right; this holds the rule, and tests/modules/test_cuda.py the compiled numbers.)"""
    from generated import layernorm

    assert isinstance(torch.compiler._is_exporting_flag, bool)  # a torch without it: look again
    monkeypatch.setattr(torch.compiler, "is_exporting", lambda: True)  # as dynamo < 2.13 says
    monkeypatch.setattr(torch.compiler, "_is_exporting_flag", False)
    assert not layernorm._exporting()
    monkeypatch.setattr(torch.compiler, "_is_exporting_flag", True)
    assert layernorm._exporting()


def test_a_scaled_add_traced_by_make_fx_writes_the_scale_out(tmp_path):
    """AOTAutograd traces a custom op's backward with make_fx, outside dynamo, where
    ``is_compiling()`` may be False (torch 2.11): ``_add_scaled`` must still write ``r + t * c``
    and not torch.add's alpha, which Inductor's addmm pattern drops."""
    from torch.fx.experimental.proxy_tensor import make_fx

    module, _ = imported("tests/cases/scaled_residual.py", tmp_path)
    r, t = torch.randn(3, 4), torch.randn(3, 4)
    for mode in ("real", "fake"):
        graph = make_fx(lambda a, b: module._add_scaled(a, b, 0.5), tracing_mode=mode)(r, t)
        assert not [n for n in graph.graph.nodes if "alpha" in n.kwargs], graph.code
    assert torch.equal(graph(r, t), r + t * 0.5)
    assert torch.equal(module._add_scaled(r, t, 0.5), torch.add(r, t, alpha=0.5))  # eager
    assert module._plain(r, t)


def test_a_torch_without_the_private_mode_stack_gets_the_written_out_scaled_add(
    tmp_path, monkeypatch
):
    """``_plain`` asks torch's private ``_len_torch_dispatch_stack`` whether a mode traces; a
    torch without it must not fail every scaled add, only lose the one-kernel form."""
    module, _ = imported("tests/cases/scaled_residual.py", tmp_path)
    monkeypatch.delattr(torch._C, "_len_torch_dispatch_stack")
    r, t = torch.randn(3, 4), torch.randn(3, 4)
    assert not module._plain(r, t)
    assert torch.equal(module._add_scaled(r, t, 0.5), r + t * 0.5)


def test_torch_compile_dynamic_shapes():
    """One dynamic-shape graph serves batches of several sizes, its numbers and gradients the
    eager module's: the generated checks and reshapes read sizes off tensors (symbolic under
    ``dynamic=True``), never python ints baked in at trace time."""
    layernorm = importlib.import_module("generated.layernorm")
    cross_entropy = importlib.import_module("generated.cross_entropy")

    def loss(x, gain, bias, targets):
        return cross_entropy.Function.apply(layernorm.Function.apply(x, gain, bias), targets)

    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(loss, dynamic=True, fullgraph=True, backend=counter)
    gen = torch.Generator().manual_seed(5)
    for n in (5, 7, 11):
        inputs = [
            torch.randn(n, 6, dtype=torch.float64, generator=gen),
            1 + 0.1 * torch.randn(6, dtype=torch.float64, generator=gen),
            0.1 * torch.randn(6, dtype=torch.float64, generator=gen),
        ]
        targets = torch.randint(0, 6, (n,), generator=gen)
        leaves = [t.clone().requires_grad_() for t in inputs]
        got = compiled(*leaves, targets)
        grads = torch.autograd.grad(got, leaves)
        eager = [t.clone().requires_grad_() for t in inputs]
        want = loss(*eager, targets)
        _close(got, want)
        for g, w in zip(grads, torch.autograd.grad(want, eager), strict=True):
            _close(g, w)
    assert counter.frame_count == 1, f"{counter.frame_count} graphs for three batch sizes"


def test_torch_compile_with_inductor_matches_eager(tmp_path, monkeypatch):
    """torch.compile's default backend, not aot_eager: Inductor's own rewrites run. A scaled
    add of a matrix product (``x + 0.5 * (x @ W)``, forward and backward) is where one of them
    drops torch.add's alpha (tests/cases/scaled_residual.py): compiled, the numbers and the
    gradients are the eager module's."""

    module, op = imported("tests/cases/scaled_residual.py", tmp_path)
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dynamo imports it by name
    inputs, _ = defined_inputs(parse(op), 0)
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: module.Function.apply(*a), fullgraph=True)
    leaves = [t.clone().requires_grad_() for t in inputs]
    out = compiled(*leaves)
    eager = [t.clone().requires_grad_() for t in inputs]
    want = module.Function.apply(*eager)
    _same_output_and_gradients(out, leaves, want, eager)


def test_an_index_checked_before_a_wrapping_read_compiles_whole(tmp_path, monkeypatch):
    """An int input read by advanced indexing, which wraps a negative index where the kernels
    would reject it, is checked before the read: eagerly by its range on the host, compiled by
    an assert in the graph (a host sync there was a graph break). Compiled with fullgraph, a
    bad index still stops the call in one line naming the op."""

    module, op = imported("tests/cases/constant_sum_from_a_fold.py", tmp_path)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    inputs, _ = defined_inputs(parse(op), 0)
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: module.Function.apply(*a), fullgraph=True)
    _close(compiled(*inputs), module.Function.apply(*inputs))
    idx = inputs[2].clone()
    idx[0, 0] = -1
    with pytest.raises(RuntimeError, match="constant_sum_from_a_fold: idx has values outside"):
        compiled(*inputs[:2], idx)


def test_a_negative_index_is_refused_compiled_too():
    """embedding's rows are read by index_select, which rejects a negative index eagerly; under
    Inductor it wraps (C[-1] read, its gradient added into dC[-1]): asserted in the graph."""
    from generated import embedding

    torch._dynamo.reset()
    C = torch.randn(5, 3)
    compiled = torch.compile(embedding.Function.apply, fullgraph=True)
    _close(compiled(torch.tensor([1, 0]), C), C[[1, 0]])
    with pytest.raises(RuntimeError, match="embedding: idx has values outside"):
        compiled(torch.tensor([-1, 0]), C)


def _same_output_and_gradients(out, leaves, want, eager) -> None:
    """``out`` of ``leaves`` as ``want`` of ``eager``, and the gradients of sum(out**2)."""
    _close(out, want)
    for got, ref in zip(
        torch.autograd.grad(out.pow(2).sum(), leaves),
        torch.autograd.grad(want.pow(2).sum(), eager),
        strict=True,
    ):
        _close(got, ref)


def _compiled_as_eager(path: str, folder: Path, monkeypatch, dynamic: bool = False) -> None:
    """The op file's module compiled with Inductor in one graph: its output and the gradients
    of sum(out**2) are the eager module's (int inputs as they are)."""
    module, op = imported(path, folder)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    inputs, _ = defined_inputs(parse(op), 0)
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: module.Function.apply(*a), fullgraph=True, dynamic=dynamic)
    leaves, eager = (
        [t.clone().requires_grad_(t.is_floating_point()) for t in inputs] for _ in range(2)
    )
    out = compiled(*leaves)
    floats, floats_eager = ([t for t in ts if t.requires_grad] for ts in (leaves, eager))
    _same_output_and_gradients(out, floats, module.Function.apply(*eager), floats_eager)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize(
    "path",
    [
        "tests/regressions/exception_attributeerror_s12400516.py",
        "tests/regressions/exception_attributeerror_s12400516_last.py",
    ],
)
def test_a_gradient_added_into_a_constant_row_compiles_with_inductor(
    path, dynamic, tmp_path, monkeypatch
) -> None:
    """``hid[R - 1, aa - T + 1]`` summed over n: its gradient is added into row R - 1. Added
    as one ``index_put_(accumulate=True)`` over (a, n), the row index the same for every n,
    Inductor's C++ kernel asserted (its vectorised atomic add wants an index that varies along
    the inner loop; torch 2.13, found by probing the fuzz find 12400516). The value is summed
    over n first, which no index reads, and added at (R - 1, a)."""
    _compiled_as_eager(path, tmp_path, monkeypatch, dynamic)


@pytest.mark.parametrize(
    "path",
    [
        "tests/regressions/exception_axiserror_s226.py",
        "tests/regressions/exception_indexerror_s174.py",
        "tests/regressions/exception_valueerror_s105.py",
    ],
)
def test_an_entry_read_at_an_argmax_compiles_in_one_graph(path, tmp_path, monkeypatch) -> None:
    """``cls[argmax]`` with argmax a 0-d int tensor (the adjoint of ``Max(v[cls[f]], f)``):
    python indexing reads a 0-d index as a python int, a data-dependent value that
    torch.compile(fullgraph=True) refuses ("Could not extract specialized integer"; found
    compiling every regression module). The entry is read as one element and squeezed."""
    _compiled_as_eager(path, tmp_path, monkeypatch)


def test_an_index_add_along_a_later_axis_compiles_to_the_same_sum(tmp_path, monkeypatch) -> None:
    """fuzz 1029546's backward adds ``minimum``'s selected branch into (R, U, J) along its
    last axis (``index_add(2, idx, ..)``). Inductor (torch 2.13) fuses that with the kernel
    making the source and stores at a wrong stride of its tiled loop: a wrong sum, or a write
    past the buffer that aborts the process (found compiling every regression module).
    Compiled, the module adds it as a scatter_add of the index laid along the axis."""
    _compiled_as_eager("tests/regressions/tangent_value_s1029546.py", tmp_path, monkeypatch)


def test_a_grouped_convolution_compiles_with_dynamic_shapes() -> None:
    """torch.compile(dynamic=True) with Inductor, as F.conv2d compiles: the grouped reading
    ``xg = x.reshape(N, groups, CG, H, W)`` handed to the kernel as ``xg.reshape(N, groups *
    CG, H, W)`` (a view of a view of an input) stopped Inductor ("cannot determine truth value
    of Relational"); the kernel reads ``x.reshape(..)`` now (derive/ir/reshapes.py). Two batch
    and image sizes, forward and gradients against the eager module's."""
    import torch.nn.functional as F

    conv = importlib.import_module("generated.conv2d")
    torch._dynamo.reset()
    compiled = torch.compile(
        lambda x, w, b: conv.Function.apply(x, w, b, 1, 1, 1, 2), dynamic=True, fullgraph=True
    )
    gen = torch.Generator().manual_seed(0)
    for n, h in ((2, 6), (3, 9)):
        x, w, b = (
            torch.randn(s, generator=gen, dtype=torch.float64)
            for s in ((n, 4, h, h), (6, 2, 3, 3), (6,))
        )
        leaves = [t.clone().requires_grad_() for t in (x, w, b)]
        out = compiled(*leaves)
        eager = [t.clone().requires_grad_() for t in (x, w, b)]
        want = F.conv2d(*eager, stride=1, padding=1, dilation=1, groups=2)
        _same_output_and_gradients(out, leaves, want, eager)


def test_a_narrowed_output_compiles_with_dynamic_shapes_at_a_length_of_1() -> None:
    """torch.compile(dynamic=True) traces the node's backward with grad_out strided as the
    forward's output. causal_conv1d's output is ``.narrow`` of a K + T - 1 long convolution;
    at T = 1 its stride along C is K itself, dynamo read K from grad_out.stride(1), and
    autograd's grad_out is contiguous (stride 1): "shape '[C, 1, 1]' is invalid". The node
    returns an output of its own under compile as in eager. T of 5, then 1 (a new graph: 0/1
    are specialised), forward and gradients against torch's convolution."""
    import torch.nn.functional as F

    conv = importlib.import_module("generated.causal_conv1d")
    torch._dynamo.reset()
    compiled = torch.compile(conv.Function.apply, dynamic=True, backend="aot_eager")
    gen = torch.Generator().manual_seed(0)
    for t in (5, 1):
        x, w, b = (
            torch.randn(s, generator=gen, dtype=torch.float64) for s in ((2, 3, t), (3, 4), (3,))
        )
        leaves = [v.clone().requires_grad_() for v in (x, w, b)]
        out = compiled(*leaves)
        eager = [v.clone().requires_grad_() for v in (x, w, b)]
        want = F.conv1d(eager[0], eager[1][:, None], eager[2], padding=3, groups=3)[..., :t]
        _same_output_and_gradients(out, leaves, want, eager)


def test_a_transposed_output_compiles_with_dynamic_shapes_and_no_duck_shaping(
    tmp_path, monkeypatch
):
    """The class of the narrowed output above, silent: saturated_tanh_of_a_product computes
    ``hid[t, i]`` as a product's ``.T``, an output strided (1, Z). With duck shaping off (equal
    sizes get symbols of their own) torch.compile(dynamic=True) traced the node's backward
    with grad_out strided so, and dW1 was 1.14 off. Compiled, the node hands autograd a dense
    output (channels_last kept); the numbers and gradients are the eager module's."""
    import torch.fx.experimental._config as fx_config

    module, op = imported("tests/cases/saturated_tanh_of_a_product.py", tmp_path)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    inputs, _ = defined_inputs(parse(op), 0)
    assert module.Function.apply(*inputs).stride()[0] == 1  # eagerly the transposed view
    torch._dynamo.reset()
    compiled = torch.compile(module.Function.apply, dynamic=True, backend="aot_eager")
    leaves = [t.clone().requires_grad_() for t in inputs]
    with fx_config.patch(use_duck_shape=False):  # torch's own patch: monkeypatch's undo broke it
        out = compiled(*leaves)
    torch._dynamo.reset()  # nothing compiled without duck shaping is reused after
    eager = [t.clone().requires_grad_() for t in inputs]
    _same_output_and_gradients(out, leaves, module.Function.apply(*eager), eager)
    assert out.is_contiguous()
    x = torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last)
    traced = torch.compile(module._traced_layout, backend="eager", fullgraph=True)
    assert traced(x).stride() == x.stride() and traced(x.mT).is_contiguous()


def test_softplus_has_its_derivative_at_0_when_the_backward_is_differentiated(tmp_path):
    """torch.func's hessian differentiates the generated backward as torch code, so the code's
    own derivatives count: softplus written relu(x) + log1p(exp(-|x|)) has derivative 0 at 0
    under autograd (two kinks), half torch's x * softplus(x) hessian there."""
    from derive import Op
    from derive.emit.generate import module_source
    from derive.verify.check import load_module

    op = Op(name="x_softplus", inputs=["x[N]"], definitions=["y[n] = x[n] * softplus(x[n])"])
    path = tmp_path / "x_softplus.py"
    path.write_text(module_source(op, "out"))
    module = load_module(path)
    x = torch.tensor([0.0, 1.0, -800.0, 30.0], dtype=torch.float64)
    mine = torch.func.hessian(lambda v: module.Function.apply(v).sum())(x)
    want = torch.func.hessian(lambda v: (v * torch.nn.functional.softplus(v, threshold=50)).sum())(
        x
    )
    _close(mine, want)


def _transforms_reference(x, y, g):
    return (
        torch.relu(x) ** 1.5
        + torch.relu(x) ** 2 * y
        + x * torch.minimum(x, torch.ones_like(x))
        + x**g
    )


@pytest.mark.parametrize("g", [0.0, 3.0])
def test_second_orders_under_torch_func_are_the_derived_ones(g, tmp_path):
    """hessian (jacfwd of jacrev), jacrev of jacrev and jvp of grad at kinks, a tie and a zero
    base, against torch's own ops under the same transforms; and forward mode through a
    create_graph backward (a dual number), which raised torch's NotImplementedError."""
    import torch.autograd.forward_ad as fwAD

    case = Path(__file__).resolve().parents[1] / "cases" / "second_orders_under_transforms.py"
    module = imported(case, tmp_path)[0]
    x = torch.tensor([-1.0, 0.0, 0.5, 1.0, 2.0], dtype=torch.float64)
    y = torch.tensor([0.5, 0.3, -0.2, 0.7, 1.1], dtype=torch.float64)

    def mine(a, b):
        return module.Function.apply(a, b, g=g).sum()

    def ref(a, b):
        return _transforms_reference(a, b, g).sum()

    for transform in (
        torch.func.hessian,
        lambda f, **k: torch.func.jacrev(torch.func.jacrev(f, **k), **k),
    ):
        got = transform(mine, argnums=(0, 1))(x, y)
        want = transform(ref, argnums=(0, 1))(x, y)
        for row, want_row in zip(got, want, strict=True):
            for block, want_block in zip(row, want_row, strict=True):
                assert torch.isfinite(block).all(), block
                _close(block, want_block)
    t = (torch.ones_like(x), torch.full_like(y, 0.5))
    got = torch.func.jvp(torch.func.grad(mine, argnums=(0, 1)), (x, y), t)[1]
    want = torch.func.jvp(torch.func.grad(ref, argnums=(0, 1)), (x, y), t)[1]
    for a, b in zip(got, want, strict=True):
        _close(a, b)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x.clone().requires_grad_(), t[0])
        (grad_x,) = torch.autograd.grad(mine(dual, y), dual, create_graph=True)
        tangent = fwAD.unpack_dual(grad_x).tangent
    along_x = torch.func.jvp(lambda a: torch.func.grad(ref)(a, y), (x,), (t[0],))[1]
    _close(tangent, along_x)


def test_forward_over_forward_is_refused_not_zero():
    """jacfwd of jacfwd through an autograd.Function with a custom jvp returns zeros in torch
    (pytorch issue 197867): the module refuses it in one line, and hessian still works."""
    from generated import tanh

    x = torch.tensor([0.3, -1.2], dtype=torch.float64)

    def f(v):
        return tanh.Function.apply(v).sum()

    want = torch.func.hessian(lambda v: torch.tanh(v).sum())(x)
    _close(torch.func.hessian(f)(x), want)
    with pytest.raises(RuntimeError, match="tanh: forward mode over forward mode"):
        torch.func.jacfwd(torch.func.jacfwd(f))(x)


def test_an_output_or_gradient_that_is_an_input_works_under_torch_func(tmp_path):
    """out[n, m] = x[n, m] returns its input, and a residual sum's backward returns grad_out:
    under torch.func's new-style nodes torch refuses an output that is a saved input ("returned
    as-is as output is being saved"), so both are returned as copies (found by probing)."""
    from derive import Op
    from derive.emit.generate import module_source
    from derive.verify.check import load_module

    op = Op(name="same", inputs=["x[N, M]"], definitions=["out[n, m] = x[n, m]"])
    path = tmp_path / "same.py"
    path.write_text(module_source(op, "out"))
    same = load_module(path)
    x = torch.randn(2, 3, dtype=torch.float64)
    _close(torch.func.grad(lambda v: same.Function.apply(v).pow(2).sum())(x), 2 * x)
    case = Path(__file__).resolve().parents[1] / "cases" / "residual_and_transpose.py"
    residual = imported(case, tmp_path)[0]

    def mine(a):
        return residual.Function.apply(a, a.T.contiguous(), a).pow(2).sum()

    def ref(a):
        return (3 * a).pow(2).sum()

    _close(torch.func.hessian(mine)(x), torch.func.hessian(ref)(x))
    _close(torch.func.jacrev(torch.func.jacrev(mine))(x), torch.func.hessian(ref)(x))
    batch = torch.randn(4, 2, 3, dtype=torch.float64)
    _close(torch.func.vmap(torch.func.grad(mine))(batch), 18 * batch)


def test_hessians_through_scatters_and_a_narrowed_gradient():
    """hessian of ops whose backward scatters (embedding's index_add_, max_pool2d's
    scatter_add_): the double forward filled a buffer made like an input, which vmap does not
    batch where grad_y is batched (it is made like grad_y now); and a dual number through the
    create_graph backward of causal_conv1d, whose gradient is a narrowed view (a torch
    internal assert on the tangent's layout, now a copy)."""
    import torch.autograd.forward_ad as fwAD

    from generated import causal_conv1d, embedding, max_pool2d

    F = torch.nn.functional
    gen = torch.Generator().manual_seed(5)
    C = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    idx = torch.tensor([1, 1, 4])
    _close(
        torch.func.hessian(lambda c: embedding.Function.apply(idx, c).pow(2).sum())(C),
        torch.func.hessian(lambda c: c[idx].pow(2).sum())(C),
    )
    x = torch.randn(1, 2, 4, 4, generator=gen, dtype=torch.float64)
    _close(
        torch.func.hessian(lambda v: max_pool2d.Function.apply(v).pow(2).sum())(x),
        torch.func.hessian(lambda v: F.max_pool2d(v, 2, 2).pow(2).sum())(x),
    )
    x = torch.randn(2, 3, 5, generator=gen, dtype=torch.float64)
    w, b = torch.randn(3, 2, generator=gen, dtype=torch.float64), torch.randn(
        3, dtype=torch.float64
    )
    t = torch.randn(x.shape, generator=gen, dtype=torch.float64)

    def ref(v):
        return F.conv1d(F.pad(v, (1, 0)), w[:, None, :], b, groups=3).pow(2).sum()

    want = torch.func.jvp(torch.func.grad(ref), (x,), (t,))[1]
    with fwAD.dual_level():
        dual = fwAD.make_dual(x.clone().requires_grad_(), t)
        out = causal_conv1d.Function.apply(dual, w, b).pow(2).sum()
        (g,) = torch.autograd.grad(out, dual, create_graph=True)
        _close(fwAD.unpack_dual(g).tangent, want)
