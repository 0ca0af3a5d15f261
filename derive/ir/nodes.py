"""The kernel IR's nodes: what a lowered tensor is, as data, before any code is printed.

Every node carries the indices labelling its axes (``axes``, in order: the layout) and says
whether it is a python number (``scalar``: a size or a param) rather than a tensor. Shapes are
the sizes of those axes, known to the lowering that made the node. Nodes are immutable values:
two equal nodes are the same tensor, and a pass rewrites by building new ones.

The families, with the torch they print as (:mod:`derive.ir.printer`):

- leaves: :class:`Ref` (a variable: ``x``, ``N``), :class:`Number` (``2``, ``1 / 3``);
- element-wise (:class:`Map`): :class:`Binary` (``a * b``), :class:`Neg`, :class:`Apply` (a
  function of the registry: ``torch.tanh(x)``), :class:`Heaviside`, :class:`Where`,
  :class:`Select` (a python ``a if c else b``), :class:`Indicator` (``c.to(x.dtype) * s``),
  :class:`Cast`, :class:`Paren` (python numbers multiplied before they meet a tensor),
  :class:`SizeOf` (``x.shape[1]``);
- layout (:class:`View`): :class:`Permute`, :class:`Broadcast` (``x[:, None]``),
  :class:`Slice`, :class:`Reshape`, :class:`Flatten`, :class:`Unflatten`, :class:`Expand`,
  :class:`Unsqueeze`, :class:`Squeeze`, :class:`Clamp` (an index read clamped),
  :class:`ClampTo` (an affine index held inside its axis), :class:`Pad`, :class:`Narrow`,
  :class:`Unfold` (windows), :class:`Flip`, :class:`Clone`, :class:`Contiguous`;
- contractions and reductions: :class:`Contract` (which axes meet, which stay, in which
  order), :class:`Matmul`, :class:`Addmm`, :class:`Reduce` (sum, mean, amax, max),
  :class:`Softmax`, :class:`Cumsum`, :class:`Conv` (a window contraction: ``torch.conv2d``,
  ``torch.conv_transpose2d``),
  :class:`ConvWeight` (one read as a weight gradient: ``torch.nn.grad.conv2d_weight``),
  :class:`MaxPool` (a window maximum and its index: ``max_pool2d``);
- indexing and construction: :class:`Arange`, :class:`IndexSelect`, :class:`Gather`,
  :class:`Index`, :class:`IndexAdd`, :class:`Zeros`, :class:`Full`, :class:`Stack`,
  :class:`AsTensor`.

Statements (:class:`Statement`) say which variables they write and read, so that emission
follows them without reading code back: :class:`Assign`, :class:`ScatterAdd`
(``x.scatter_add_(...)``), :class:`IndexPut` (``x.index_put_(..., accumulate=True)``: a pick
``x[i, t] += v`` too), :class:`Free` (``del t``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from dataclasses import dataclass

import sympy as sp


@dataclass(frozen=True, kw_only=True)
class Node:
    """A value of the generated function: a tensor over ``axes``, or a python number."""

    axes: tuple[sp.Symbol, ...] = ()

    @property
    def scalar(self) -> bool:
        """A python number (sizes, params and arithmetic on them), not a tensor."""
        return False

    def children(self) -> Iterator[Node]:
        """The nodes this one reads, in field order."""
        return _fields(self)


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _fields(obj: object) -> Iterator[Node]:
    """The nodes in ``obj``'s fields (a field may hold one, or a tuple of them)."""
    for name in _field_names(type(obj)):
        value = getattr(obj, name)
        if isinstance(value, Node):
            yield value
        elif isinstance(value, tuple):
            yield from (v for v in value if isinstance(v, Node))


def walk(node: Node) -> Iterator[Node]:
    """``node`` and every node below it, depth first (children in field order)."""
    stack = [node]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(tuple(node.children())))


def refs(node: Node) -> frozenset[str]:
    """The variables ``node`` reads. Nodes are immutable, so the answer is kept on the node:
    the passes ask it of every statement many times (which names a block reads, and where)."""
    known = node.__dict__.get("_refs")
    if known is None:
        if isinstance(node, Ref):
            known = frozenset({node.name})
        elif isinstance(node, Given):  # the flags, a parameter of the function
            known = frozenset({PRESENT})
        else:
            known = frozenset().union(*map(refs, node.children()))
        object.__setattr__(node, "_refs", known)  # not a field: equality and hash ignore it
    return known


def relabel(node: Node, axes: tuple[sp.Symbol, ...]) -> Node:
    """The same tensor, its axes named by other indices (a memo entry read under new names)."""
    return node if node.axes == axes else dataclasses.replace(node, axes=axes)


# -- leaves ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ref(Node):
    """A variable of the generated function: an input, a saved tensor, a temporary, a size."""

    name: str
    scalar: bool = False


EXACT_TERMS = 1000  # a numeric Sum of up to this many terms is added exactly


def _evaluated(value: sp.Expr) -> sp.Expr:
    """A number that holds a Sum or Product over numeric bounds, as its value: a count over
    literal axes, ``Sum(1, (n, 0, 2))`` (fuzz 1501090: left a Sum, the printer's float() of
    it failed), exactly where it has few terms, else to 30 digits (SymPy adds 200,000
    rationals term by term for minutes, and their sum has thousands of digits)."""
    if not value.has(sp.Sum, sp.Product):
        return value
    terms = 1
    for node in value.atoms(sp.Sum, sp.Product):
        for _, lo, hi in node.limits:
            terms *= max(int(hi - lo + 1), 0)
    if terms <= EXACT_TERMS:
        return value.doit()
    approx = value.evalf(30)
    return value.doit() if approx.has(sp.Sum, sp.Product) else approx


@dataclass(frozen=True)
class Number(Node):
    """A python number (SymPy's value, printed once: ``2``, ``1 / 3``, ``0.7978845608028654``)."""

    value: sp.Expr

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", _evaluated(sp.sympify(self.value)))  # 1 is SymPy's 1

    @property
    def scalar(self) -> bool:
        return True


def is_number(node: Node, value: int) -> bool:
    """``node`` is the literal ``value`` (``0``: nothing to add; ``1``: nothing to scale)."""
    return isinstance(node, Number) and node.value.is_Integer and node.value == value


# -- element-wise ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Map(Node):
    """Element-wise work over aligned operands: a python number when every operand is one."""

    @property
    def scalar(self) -> bool:
        known = self.__dict__.get("_scalar")  # kept on the node, as refs(): asked many times
        if known is None:
            known = all(c.scalar for c in self.children())
            object.__setattr__(self, "_scalar", known)
        return known


@dataclass(frozen=True)
class Binary(Map):
    """``left op right``: arithmetic (``+ - * / **``) or a comparison (``== <= ...``)."""

    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Neg(Map):
    arg: Node


@dataclass(frozen=True)
class Paren(Map):
    """A group computed first: ``x * (-2 * N)`` scales once by one python number."""

    arg: Node


@dataclass(frozen=True)
class Apply(Map):
    """A function of the registry, in its torch or python form (``torch.tanh({0})``)."""

    form: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Heaviside(Map):
    """Heaviside(x, h): the derivative of a kink (:func:`derive.functions.heaviside_code`)."""

    arg: Node
    at_zero: sp.Expr
    like: Ref | None  # the tensor whose dtype the result takes; None: python numbers

    def children(self) -> Iterator[Node]:
        yield self.arg
        if self.like is not None and self.at_zero != sp.Rational(1, 2):
            yield self.like  # (sign(x) + 1) / 2 at a tie takes x's dtype by itself


@dataclass(frozen=True)
class Where(Map):
    """``torch.where(cond, a, b)``."""

    cond: Node
    a: Node
    b: Node

    @property
    def scalar(self) -> bool:
        return False


@dataclass(frozen=True)
class Select(Map):
    """``(a if cond else b)`` on python numbers: a condition on params, known per call."""

    cond: Node
    a: Node
    b: Node


@dataclass(frozen=True)
class Given(Node):
    """``present[0] or present[2]``: whether one of those cotangents was given to the double
    backward (a python bool per call; :mod:`derive.symbolic.seeds`)."""

    on: tuple[int, ...]

    @property
    def scalar(self) -> bool:
        return True


@dataclass(frozen=True)
class Indicator(Node):
    """where(c, a, b) with numbers a, b: ``c.to(dtype) * (a - b) + b``, the mask as floats."""

    cond: Node
    scale: Node | None  # a - b, None when it is 1
    offset: Node | None  # b, None when it is 0
    like: Ref


@dataclass(frozen=True)
class Cast(Node):
    """``arg.to(like.dtype)``: a boolean mask as the float dtype."""

    arg: Node
    like: Ref


@dataclass(frozen=True)
class SizeOf(Node):
    """``arg.shape[dim]``: the length of an axis of a named tensor, read at run time."""

    arg: Ref
    dim: int

    @property
    def scalar(self) -> bool:
        return True


@dataclass(frozen=True)
class AsTensor(Node):
    """``torch.tensor(arg, device=like.device)``: a python bool where torch wants a tensor."""

    arg: Node
    like: Ref


# -- layout ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class View(Node):
    """A new layout of ``arg``'s entries: nothing computed."""

    arg: Node


@dataclass(frozen=True)
class Permute(View):
    """The axes of ``arg`` in the order ``perm`` lists them (``.T`` for two)."""

    perm: tuple[int, ...]


@dataclass(frozen=True)
class Broadcast(View):
    """``arg[:, None]``: size-1 axes where ``kept`` is False, so it broadcasts."""

    kept: tuple[bool, ...]


@dataclass(frozen=True)
class Slice(View):
    """``arg[:, 1]``: constant subscripts (None: the whole axis); ``sizes``, where known, the
    length of each of those axes of ``arg`` (what a pass needs to see that slices 0, 1, 2 of
    an axis of 3 read all of it)."""

    at: tuple[int | None, ...]
    sizes: tuple[sp.Expr, ...] = ()


@dataclass(frozen=True)
class Reshape(View):
    shape: tuple[Node, ...]


@dataclass(frozen=True)
class Flatten(View):
    """``arg.flatten(start, end)``: the axes ``start`` .. ``end`` as one (a view where their
    strides allow, else a copy): a group of axes a matmul reads as one."""

    start: int
    end: int


@dataclass(frozen=True)
class Unflatten(View):
    """``arg.unflatten(dim, sizes)``: axis ``dim`` split into axes of ``sizes`` (a view)."""

    dim: int
    sizes: tuple[Node, ...]


@dataclass(frozen=True)
class Expand(View):
    shape: tuple[Node, ...]


@dataclass(frozen=True)
class Unsqueeze(View):
    dim: int


@dataclass(frozen=True)
class Squeeze(View):
    dim: int


@dataclass(frozen=True)
class Clamp(View):
    """``arg.clamp(min=0)``: a guarded index whose negative entries a where() ignores."""


@dataclass(frozen=True)
class ClampTo(View):
    """``arg.clamp(lo, hi)``: an affine index held inside its axis (the read is masked there),
    or inside a sum's range (a body read where the sum has no term: a where discards it)."""

    hi: Node
    lo: Node = Number(0)


@dataclass(frozen=True)
class Pad(View):
    """``torch.nn.functional.pad(arg, pads)``: zeros added before and after the last axes
    (``pads`` as torch orders them: the last axis's two first)."""

    pads: tuple[Node, ...]


@dataclass(frozen=True)
class Narrow(View):
    """``arg.narrow(dim, start, length)``: ``length`` entries of axis ``dim`` from ``start``."""

    dim: int
    start: Node
    length: Node


@dataclass(frozen=True)
class Unfold(View):
    """``arg.unfold(dim, size, step)[..., ::dilation]``: the windows of axis ``dim``, ``step``
    apart, each a new last axis of ``size`` entries read ``dilation`` apart (a view)."""

    dim: int
    size: Node
    step: Node
    dilation: Node


@dataclass(frozen=True)
class Flip(View):
    """``arg.flip(dims)``: the axes ``dims`` read backwards (a convolution's kernel)."""

    dims: tuple[int, ...]


@dataclass(frozen=True)
class Unbind(View):
    """``arg.unbind(dim)``: every slice of the axis ``dim`` at once, a tuple of views, so only
    an assignment to as many names takes it; ``axes`` are each slice's."""

    dim: int


@dataclass(frozen=True)
class Clone(View):
    """A copy: the tensor will be updated in place and must not be a view of another."""


@dataclass(frozen=True)
class Contiguous(View):
    """``arg.contiguous()``: stored in its axes' order (a copy where it is a permuted view),
    so that the matmuls that read it need not copy it each (:mod:`derive.ir.layout`)."""


# -- contractions and reductions ---------------------------------------------------------------
@dataclass(frozen=True)
class Contract(Node):
    """The operands multiplied and summed over every axis not in ``axes``: an einsum.

    ``letters`` is the order in which axes take their letters (the lowering's order)."""

    operands: tuple[Node, ...]
    letters: tuple[sp.Symbol, ...]


@dataclass(frozen=True)
class Matmul(Node):
    """``left @ right``: matrices meeting over left's last and right's first axis, under
    leading batch axes both have, in one order (torch.matmul: a bmm)."""

    left: Node
    right: Node


@dataclass(frozen=True)
class Cheaper(Node):
    """``(a if cost_a <= cost_b else b)``: one value by two orders of contraction, the one
    with fewer multiplies at the sizes of the call (python numbers: known per call). Only the
    chosen order runs."""

    cost_a: Node
    a: Node
    cost_b: Node
    b: Node


@dataclass(frozen=True)
class Addmm(Node):
    """``torch.addmm(bias, left, right)``: a matmul with the bias added in its kernel."""

    bias: Node
    left: Node
    right: Node


@dataclass(frozen=True)
class Reduce(Node):
    """``arg.sum(dims)`` (or ``mean``, ``amax``, ``max``) over the positions ``dims``; with
    ``keepdim``, those axes stay, of length 1 (labelled as in ``arg``)."""

    kind: str
    arg: Node
    dims: tuple[int, ...]
    keepdim: bool = False


@dataclass(frozen=True)
class Softmax(Node):
    """``torch.softmax(arg, dim)``: exp(arg) over its sum along ``dim``, one kernel; its log
    (``torch.log_softmax``) where ``log``. :mod:`derive.ir.fused` finds them written out."""

    arg: Node
    dim: int
    log: bool = False


@dataclass(frozen=True)
class Cumsum(Node):
    """``arg.cumsum(dim)``: running sums along ``dim``; from its end where ``reverse``
    (``arg.flip(dim).cumsum(dim).flip(dim)``)."""

    arg: Node
    dim: int
    reverse: bool = False


@dataclass(frozen=True)
class Conv(Node):
    """``torch.conv<n>d(input, weight, bias, ...)`` or ``torch.conv_transpose<n>d``
    (``transposed``): a window contraction over ``len(stride)`` spatial axes, with torch's own
    zero ``padding`` of each axis at both ends (empty: none; other padding is a :class:`Pad`),
    a transposed one's ``output_padding`` and an optional ``bias`` added per output channel."""

    transposed: bool
    input: Node
    weight: Node
    stride: tuple[Node, ...]
    dilation: tuple[Node, ...]
    groups: Node
    padding: tuple[Node, ...] = ()
    output_padding: tuple[Node, ...] = ()
    bias: Node | None = None


@dataclass(frozen=True)
class MaxPool(Node):
    """``torch.nn.functional.max_pool<n>d(input, kernel, stride, return_indices=True)``: the
    largest entry of each window over the last ``len(kernel)`` axes, no padding, and the index
    of each in its input's plane (``h*W + w``), assigned to two names."""

    input: Node
    kernel: tuple[Node, ...]
    stride: tuple[Node, ...]


@dataclass(frozen=True)
class ConvWeight(Node):
    """``torch.nn.grad.conv<n>d_weight(input, size, grad, ...)``: the correlation of ``input``
    with ``grad`` that is a convolution's weight gradient, read in both tensors' stored layout
    (batch first), ``size`` the weight's shape; ``padding`` zeros at both ends of ``input``."""

    input: Node
    size: tuple[Node, ...]
    grad: Node
    stride: tuple[Node, ...]
    padding: tuple[Node, ...]
    dilation: tuple[Node, ...]
    groups: Node


# -- indexing and construction -----------------------------------------------------------------
@dataclass(frozen=True)
class Arange(Node):
    size: Node
    like: Ref


@dataclass(frozen=True)
class Triangle(Node):
    """``torch.ones(rows, cols, dtype=torch.bool, device=like.device).tril(k)`` (``triu``
    where ``upper``): a comparison of two index ranges (:mod:`derive.ir.triangles`)."""

    rows: Node
    cols: Node
    like: Ref
    k: int
    upper: bool


@dataclass(frozen=True)
class MaskedFill(Node):
    """``arg.masked_fill(mask, value)``: a where() with a number on one side."""

    arg: Node
    mask: Node
    value: Node


@dataclass(frozen=True)
class IndexSelect(Node):
    """``arg.index_select(0, index)``: rows of ``arg`` picked by data."""

    arg: Node
    index: Node


@dataclass(frozen=True)
class Gather(Node):
    """``arg.gather(dim, index)``."""

    arg: Node
    dim: int
    index: Node


@dataclass(frozen=True)
class Index(Node):
    """``arg[p0, p1, ...]``: advanced indexing, one broadcast index per axis."""

    arg: Node
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Zeros(Node):
    shape: tuple[Node, ...]
    like: Ref


@dataclass(frozen=True)
class Full(Node):
    shape: tuple[Node, ...]
    value: Node
    like: Ref


@dataclass(frozen=True)
class IndexAdd(Node):
    """``target.index_add_(dim, index, source)`` on a fresh ``target``: a scatter by rows."""

    target: Node
    dim: int
    index: Node
    source: Node


@dataclass(frozen=True)
class ScatterReduce(Node):
    """``target.scatter_reduce(dim, index, source, reduce)``, out of place: each entry of
    ``source`` met with ``target``'s entry at its ``index`` along ``dim`` (``"amax"``,
    ``"amin"``), the target's own entries included."""

    target: Node
    dim: int
    index: Node
    source: Node
    reduce: str


@dataclass(frozen=True)
class Stack(Node):
    parts: tuple[Node, ...]
    dim: int


# -- statements --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Statement:
    """One statement of the generated function: what it writes, what it reads."""

    @property
    def writes(self) -> frozenset[str]:
        raise NotImplementedError

    @property
    def reads(self) -> frozenset[str]:
        """The variables its nodes read (an in-place update reads its target too)."""
        return frozenset().union(*map(refs, self.nodes()))

    def nodes(self) -> Iterator[Node]:
        """The nodes the statement computes with, each the root of its own tree."""
        return _fields(self)


@dataclass(frozen=True)
class Assign(Statement):
    """``a = value`` (``a, b = value``: a max and its argmax)."""

    targets: tuple[str, ...]
    value: Node

    @property
    def writes(self) -> frozenset[str]:
        return frozenset(self.targets)


@dataclass(frozen=True)
class ScatterAdd(Statement):
    """``target.scatter_add_(dim, index, source)``: one kernel for a one-hot update."""

    target: str
    dim: int
    index: Node
    source: Node

    @property
    def writes(self) -> frozenset[str]:
        return frozenset({self.target})

    @property
    def reads(self) -> frozenset[str]:
        return super().reads | {self.target}


@dataclass(frozen=True)
class IndexPut(Statement):
    """``target.index_put_(index, value, accumulate=True)``: each entry of ``value`` added at
    its index (broadcast index tensors, one per axis); repeated indices add up."""

    target: str
    index: tuple[Node, ...]
    value: Node

    @property
    def writes(self) -> frozenset[str]:
        return frozenset({self.target})

    @property
    def reads(self) -> frozenset[str]:
        return super().reads | {self.target}


@dataclass(frozen=True)
class Free(Statement):
    """``del a, b``: temporaries past their last use, their memory given back before the
    function returns. Writes nothing a later statement reads; reads the names it frees."""

    names: tuple[str, ...]

    @property
    def writes(self) -> frozenset[str]:
        return frozenset()

    @property
    def reads(self) -> frozenset[str]:
        return frozenset(self.names)


NEEDS = "needs"  # the backward's flags, one per input: which gradients the caller asks for
PRESENT = "present"  # the double backward's flags, one per cotangent: which were given


@dataclass(frozen=True)
class Guarded(Statement):
    """``if needs[0] or needs[2]: body``: statements that feed only the gradients at those
    positions, run where the caller needs one of them (:mod:`derive.ir.needs`); with
    ``given``, also only where one of those cotangents was given to a double backward
    (``present``, :mod:`derive.ir.given`): ``if needs[0] and present[1]: body``."""

    on: tuple[int, ...]
    body: tuple[Statement, ...]
    given: tuple[int, ...] = ()

    @property
    def writes(self) -> frozenset[str]:
        return frozenset().union(*(s.writes for s in self.body))

    @property
    def reads(self) -> frozenset[str]:
        flags = ({NEEDS} if self.on else set()) | ({PRESENT} if self.given else set())
        return frozenset(flags).union(*(s.reads for s in self.body))

    def nodes(self) -> Iterator[Node]:
        for s in self.body:
            yield from s.nodes()
