"""The kernel IR printed as torch: one ``_print_<Node>`` method per node class, found along the
class hierarchy as SymPy's printers find theirs, strict (a node without a method raises here,
at generation time, never as wrong code).

:class:`Precedence` (``ATOM`` > ``POW`` > ``UNARY`` > ``MUL`` > ``ADD`` > ``COMPARE``) follows
SymPy's printer table and Python's grammar: a node is parenthesised only where it binds more
loosely than the place it goes (:meth:`TorchPrinter.wrap`). Each operator's row gives its own
precedence and the least its left and right operands must have to stand bare.
"""

from __future__ import annotations

import functools
import math
import re
from enum import IntEnum

import sympy as sp

from derive.functions import heaviside_code
from derive.ir import nodes as ir
from derive.ir.rewrite import flat_statements
from derive.ir.scalars import helpers_called


class Precedence(IntEnum):
    """How tightly a printed node binds, the higher the tighter; a namespace of its own, since
    ``UNARY`` and ``COMPARE`` elsewhere name function tables (:mod:`derive.verify`)."""

    ATOM = 100  # a name, a call, a subscript
    POW = 40
    UNARY = 30  # -x
    MUL = 20
    ADD = 10
    COMPARE = 5  # below every arithmetic operator, as in Python: a relation reads as an argument
    AND = 4  # a bitwise and of masks: python's & binds tighter than a comparison
    OR = 3  # a bitwise or of masks, looser than &, as in python


# op: (its precedence, the least its left operand needs bare, the least its right one needs);
# a - (b - c), a - (b + c) but a - b * c bare; a / (b * c); a relation below all arithmetic.
# Floats add in the order written, so a + (b + c) keeps its parentheses: printed bare, python
# ran (a + b) + c (a sum the text groups, (a - b) + (c - d), lost at a and c near 1e10; found
# by probing). A product's factors are ordered for range (lower.arithmetic.product) and
# printed flat, left to right, as that order was chosen and tested
_ADD, _MUL, _POW = Precedence.ADD, Precedence.MUL, Precedence.POW
OPERATORS: dict[str, tuple[int, int, int]] = {
    "+": (_ADD, _ADD, _ADD + 1),
    "-": (_ADD, _ADD, _MUL + 1),
    "*": (_MUL, _MUL, _MUL),
    "/": (_MUL, _MUL, _POW),
    "//": (_MUL, _MUL, _POW),  # an argmax's digits (int data): floor(a/W), Mod(a, W)
    "%": (_MUL, _MUL, _POW),
    "**": (_POW, _POW + 1, _POW + 1),
    **{op: (Precedence.COMPARE, _MUL, _MUL) for op in ("==", "!=", "<=", "<", ">=", ">")},
    "&": (Precedence.AND, _ADD, _ADD),  # (a >= 0) & (a < n): its comparisons parenthesized
    "|": (Precedence.OR, _ADD, _ADD),  # (a == m) | (a != a): a NaN matches its own maximum
}


def number(x: sp.Expr) -> str:
    """A python number: ``2``, ``1 / 3`` (python rounds the quotient once), else its float;
    ``float("inf")`` past float's range (``exp(1000)``, ``10**400``: a bare ``inf`` is no
    python name, and an int that large no tensor takes)."""
    if overflows(x):
        return f'float("{"-" if x < 0 else ""}inf")'
    if x.is_Integer and abs(x) < 2**53:
        return str(int(x))
    if x.is_Integer:  # 10**30 (1e30 as written) as a float: torch refuses an int past int64
        return repr(float(x))
    if x.is_Rational and max(abs(x.p), x.q) < 2**53:
        return f"{x.p} / {x.q}"
    if x.is_Rational:  # past int64 as a tensor's operand (a sum of 64 rationals): one rounding
        return repr(x.p / x.q)
    return repr(float(x))


def overflows(x: sp.Expr) -> bool:
    """Whether the number ``x`` is past float's range (infinite included)."""
    try:
        return math.isinf(float(x))
    except OverflowError:  # an int (or a quotient of ints) too large to convert
        return True


def precedence(node: ir.Node) -> int:
    """How tightly ``node`` binds as printed (see the module's table): a call, a subscript or
    a name (``ATOM``) unless it is one of the operators below."""
    if isinstance(node, ir.Binary):
        return OPERATORS[node.op][0]
    if isinstance(node, ir.Neg):
        return Precedence.UNARY
    if isinstance(node, ir.Number):
        v = node.value
        if overflows(v):
            return Precedence.ATOM  # float("inf")
        if v < 0:
            return Precedence.UNARY
        return Precedence.MUL if v.is_Rational and not v.is_Integer else Precedence.ATOM  # 1 / 3
    if isinstance(node, ir.Heaviside):  # (sign(x) + 1) / 2 at a tie, else a call
        return Precedence.MUL if node.at_zero == sp.Rational(1, 2) else Precedence.ATOM
    if isinstance(node, ir.Indicator):
        return Precedence.MUL if node.offset is None else Precedence.ADD
    if isinstance(node, ir.Matmul):
        return Precedence.ATOM if batched(node) else Precedence.MUL
    return Precedence.ATOM


def batched(node: ir.Matmul) -> bool:
    """Whether the product is printed ``torch.bmm(a, b)``: both sides 3-D, one batch axis,
    where ``@`` is torch.matmul's expands and reshapes around the same bmm (8 dispatched
    calls against 1)."""
    return len(node.left.axes) == len(node.right.axes) == 3


SUM_LEADING = "_sum_leading"  # the module's helper for a sum over leading axes
ADD_SCALED = "_add_scaled"  # the module's helper for r + c * t, torch.add's alpha when eager
# the module's in-place updates of a buffer of its own (scatter_add_, index_put_, index_add_):
# in place on plain tensors, out of place on a Tensor subclass (DTensor) or under a mode
IN_PLACE = {ir.ScatterAdd: "_scatter_add", ir.IndexPut: "_index_put", ir.IndexAdd: "_index_add"}
PLAIN = "_plain"  # whether tensors are plain and run now: what those and _add_scaled ask
ADDCMUL = "_addcmul"  # the module's r + c * a * b, torch.addcmul's value when eager
INTO = "_into"  # the module's kernel written into a spare operand (derive/ir/reuse.py)
INDEX_SELECT = "_index_select"  # the module's rows-by-index, a subscript under a compiled transform
DENSE = "_dense"  # a convolution's operand laid out row-major when compiled (its view may not be)
# the module's context that reroutes einsum, flatten and unflatten under autograd's legacy vmap
LEGACY_VMAP = "_legacy_vmap"
LEGACY_UNBATCHED = (ir.Contract, ir.Flatten, ir.Unflatten)


def leading_sum(node: ir.Reduce) -> int | None:
    """k where ``node`` sums (or averages) its argument over the first k of its axes and keeps
    the rest: the column sums of a (rows, columns) view, printed as the module's
    ``_sum_leading(x, k)``, which sums a large tensor's rows in blocks of 16 first. A column
    sum steps a whole row between reads; torch's CPU reduction and the loops torch.compile
    writes for it run at a fraction of the memory's speed, and a block's partial sums stay in
    cache (docs/benchmarks.md, "Column sums in blocks")."""
    k = len(node.dims)
    ndim = len(node.arg.axes)
    if node.keepdim or node.kind not in ("sum", "mean") or node.dims != tuple(range(k)):
        return None
    if not 0 < k < ndim:
        return None
    return k if ndim == k + len(node.axes) else None


def called_helpers(lines: list) -> set[str]:
    """The module helpers the printed ``lines`` call (a :class:`Line` keeps its statement)."""
    called = set()
    for line in lines:
        statement = getattr(line, "statement", None)
        if statement is None:
            continue
        for inner in flat_statements([statement]):
            if type(inner) in IN_PLACE:
                called |= {IN_PLACE[type(inner)], PLAIN}
        for root in statement.nodes():
            for n in ir.walk(root):
                if isinstance(n, LEGACY_UNBATCHED):
                    called.add(LEGACY_VMAP)
                if isinstance(n, ir.Reduce) and leading_sum(n):
                    called |= {SUM_LEADING, LEGACY_VMAP}  # it flattens and unflattens
                elif isinstance(n, ir.Apply) and n.form.startswith(INTO + "("):
                    called |= {INTO, PLAIN} | _kernel_helpers(n.form[len(INTO) + 1 :])
                elif isinstance(n, ir.Apply):
                    called |= _kernel_helpers(n.form) | helpers_called(n)
                elif isinstance(n, ir.IndexAdd):
                    called |= {IN_PLACE[ir.IndexAdd], PLAIN}
                elif isinstance(n, ir.IndexSelect):
                    called.add(INDEX_SELECT)
                elif isinstance(n, (ir.Conv, ir.ConvWeight)) and any(map(_strided, _operands(n))):
                    called.add(DENSE)
                else:
                    called |= helpers_called(n)
    return called


def _operands(node: ir.Conv | ir.ConvWeight) -> tuple[ir.Node, ir.Node]:
    """A convolution's tensors, whose layout (row-major or channels-last) decides its output's."""
    return (node.input, node.weight) if isinstance(node, ir.Conv) else (node.input, node.grad)


def _strided(node: ir.Node) -> bool:
    """Whether a convolution's operand may be a view in strides that are not row-major: a
    permuted, sliced, narrowed, expanded or unfolded tensor, reshaped or not (a reshape of a
    row-major tensor is row-major; a pad, flip or clamp makes a new one).

    A permuted tensor reshaped to (1, C, P) is a view where P = 1, its channel stride 1: eager
    convolutions then write a channels-last output, while Inductor (torch 2.13), the length
    symbolic under dynamic shapes, plans a row-major one and asserts on the strides it gets
    (fuzz --compiled 13200229, a windowed sum's conv_transpose1d at grad_out; reproduced in
    plain torch). Compiled, such an operand is copied row-major first (``_dense``); eager, it
    is passed as it is."""
    while isinstance(node, ir.View):
        if isinstance(node, STRIDED):
            return True
        if not isinstance(node, ROW_MAJOR):  # a pad, flip, clamp or copy: a new tensor
            return False
        node = node.arg
    return False


STRIDED = (ir.Permute, ir.Slice, ir.Narrow, ir.Expand, ir.Unfold, ir.Unbind)
ROW_MAJOR = (ir.Reshape, ir.Flatten, ir.Unflatten, ir.Unsqueeze, ir.Squeeze, ir.Broadcast)


def _kernel_helpers(form: str) -> set[str]:
    """The module's kernel helpers a call ``form`` starts with (and what they call)."""
    if form.startswith(ADD_SCALED):
        return {ADD_SCALED, PLAIN}
    return {ADDCMUL} if form.startswith(ADDCMUL) else set()


@functools.cache
def _bare_slots(form: str) -> frozenset[int]:
    """The slots ``{k}`` of a code form that stand alone, as a call's argument or a branch of a
    conditional (``torch.exp({0})``, ``clamp({0}, min={1})``, ``({1} if {0} else {2})``): what
    fills them needs no parentheses. Any other slot is an operand (``0.5 * {0}`` in sigmoid's
    python form, ``-{0}``): filled with ``a + b`` it must read ``0.5 * (a + b)``, or the form
    computes ``0.5 * a + b`` (a sigmoid of a sum of params was silently wrong; found by the
    fuzzer through softplus's ``-{0}``). A slot met twice is bare only where bare each time."""
    slots: dict[int, bool] = {}
    for m in re.finditer(r"\{(\d+)\}", form):
        before, after = form[: m.start()].rstrip(), form[m.end() :].lstrip()
        opened = not before or before.endswith(_OPENERS)
        closed = not after or after.startswith(_CLOSERS)
        k = int(m.group(1))
        slots[k] = slots.get(k, True) and opened and closed
    return frozenset(k for k, alone in slots.items() if alone)


_OPENERS = ("(", ",", "=", "[", " if", " else")
_CLOSERS = (")", ",", "]", "if ", "else ")


class Line(str):
    """A printed statement that keeps the IR statement it was printed from, so that emission
    reads what it writes and reads off the statement, never off the text."""

    statement: ir.Statement

    def __new__(cls, code: str, statement: ir.Statement) -> Line:
        line = super().__new__(cls, code)
        line.statement = statement
        return line


class TorchPrinter:
    """Prints nodes and statements as torch (python on numbers)."""

    def doprint(self, node: ir.Node | ir.Statement) -> str:
        for cls in type(node).__mro__:
            method = getattr(self, f"_print_{cls.__name__}", None)
            if method is not None:
                return method(node)
        raise TypeError(f"no torch printing for {type(node).__name__}")

    def line(self, statement: ir.Statement) -> Line:
        return Line(self.doprint(statement), statement)

    def wrap(self, node: ir.Node, level: int) -> str:
        """``node`` printed, parenthesised when it binds more loosely than ``level``."""
        code = self.doprint(node)
        return f"({code})" if precedence(node) < level else code

    def _args(self, nodes: tuple[ir.Node, ...]) -> str:
        return ", ".join(self.doprint(n) for n in nodes)

    def _method(self, node: ir.Node, call: str) -> str:
        return f"{self.wrap(node, Precedence.ATOM)}.{call}"

    # -- leaves ----------------------------------------------------------------------------
    def _print_Ref(self, node: ir.Ref) -> str:
        return node.name

    def _print_Number(self, node: ir.Number) -> str:
        return number(node.value)

    # -- element-wise ----------------------------------------------------------------------
    def _print_Binary(self, node: ir.Binary) -> str:
        _, left, right = OPERATORS[node.op]
        if isinstance(node.right, ir.Matmul):  # python's @ is * 's peer, read left to right:
            right = max(right, Precedence.MUL + 1)  # a * (b @ c) is not (a * b) @ c
        # python numbers as SymPy writes them (N ** 2); tensors as black hugs them (x**2)
        op = "**" if node.op == "**" and not node.scalar else f" {node.op} "
        return f"{self.wrap(node.left, left)}{op}{self.wrap(node.right, right)}"

    def _print_Neg(self, node: ir.Neg) -> str:
        return f"-{self.wrap(node.arg, Precedence.MUL)}"

    def _print_Paren(self, node: ir.Paren) -> str:
        return f"({self.doprint(node.arg)})"

    def _print_Apply(self, node: ir.Apply) -> str:
        bare = _bare_slots(node.form)
        return node.form.format(
            *(
                self.doprint(a) if k in bare else self.wrap(a, Precedence.ATOM)
                for k, a in enumerate(node.args)
            )
        )

    def _print_Heaviside(self, node: ir.Heaviside) -> str:
        like = node.like.name if node.like is not None else None
        return heaviside_code(self.wrap(node.arg, Precedence.ATOM), node.at_zero, like)

    def _print_Where(self, node: ir.Where) -> str:
        return f"torch.where({self._args((node.cond, node.a, node.b))})"

    def _print_Select(self, node: ir.Select) -> str:
        a, cond, b = (self.doprint(n) for n in (node.a, node.cond, node.b))
        return f"({a} if {cond} else {b})"

    def _print_Cheaper(self, node: ir.Cheaper) -> str:
        a, ca, b, cb = (self.doprint(n) for n in (node.a, node.cost_a, node.b, node.cost_b))
        return f"({a} if {ca} <= {cb} else {b})"

    def _print_Given(self, node: ir.Given) -> str:
        return " or ".join(f"{ir.PRESENT}[{k}]" for k in node.on)

    def _print_Indicator(self, node: ir.Indicator) -> str:
        code = self._method(node.cond, f"to({self.doprint(node.like)}.dtype)")
        if node.scale is not None:
            code += f" * {self.wrap(node.scale, Precedence.MUL + 1)}"
        if node.offset is not None:
            code += f" + {self.wrap(node.offset, Precedence.ADD + 1)}"
        return code

    def _print_Cast(self, node: ir.Cast) -> str:
        return self._method(node.arg, f"to({self.doprint(node.like)}.dtype)")

    def _print_SizeOf(self, node: ir.SizeOf) -> str:
        return f"{node.arg.name}.shape[{node.dim}]"

    def _print_AsTensor(self, node: ir.AsTensor) -> str:
        return f"torch.tensor({self.doprint(node.arg)}, device={self.doprint(node.like)}.device)"

    # -- layout ----------------------------------------------------------------------------
    def _print_Permute(self, node: ir.Permute) -> str:
        if len(node.perm) == 2:
            return self._method(node.arg, "T")
        return self._method(node.arg, f"permute({', '.join(map(str, node.perm))})")

    def _print_Broadcast(self, node: ir.Broadcast) -> str:
        parts = ", ".join(":" if k else "None" for k in node.kept)
        return f"{self.wrap(node.arg, Precedence.ATOM)}[{parts}]"

    def _print_Slice(self, node: ir.Slice) -> str:
        parts = ", ".join(":" if k is None else str(k) for k in node.at)
        return f"{self.wrap(node.arg, Precedence.ATOM)}[{parts}]"

    def _print_Unbind(self, node: ir.Unbind) -> str:
        return self._method(node.arg, f"unbind({node.dim})")

    def _print_Reshape(self, node: ir.Reshape) -> str:
        return self._method(node.arg, f"reshape({self._args(node.shape)})")

    def _print_Flatten(self, node: ir.Flatten) -> str:
        args = str(node.start) if node.end == -1 else f"{node.start}, {node.end}"
        return self._method(node.arg, f"flatten({args})")

    def _print_Unflatten(self, node: ir.Unflatten) -> str:
        return self._method(node.arg, f"unflatten({node.dim}, ({self._args(node.sizes)}))")

    def _print_Expand(self, node: ir.Expand) -> str:
        return self._method(node.arg, f"expand({self._args(node.shape)})")

    def _print_Unsqueeze(self, node: ir.Unsqueeze) -> str:
        return self._method(node.arg, f"unsqueeze({node.dim})")

    def _print_Squeeze(self, node: ir.Squeeze) -> str:
        return self._method(node.arg, f"squeeze({node.dim})")

    def _print_Clamp(self, node: ir.Clamp) -> str:
        return self._method(node.arg, "clamp(min=0)")

    def _print_ClampTo(self, node: ir.ClampTo) -> str:
        return self._method(node.arg, f"clamp({self.doprint(node.lo)}, {self.doprint(node.hi)})")

    def _print_Pad(self, node: ir.Pad) -> str:
        return f"torch.nn.functional.pad({self.doprint(node.arg)}, ({self._args(node.pads)}))"

    def _print_Narrow(self, node: ir.Narrow) -> str:
        args = self._args((node.start, node.length))
        return self._method(node.arg, f"narrow({node.dim}, {args})")

    def _print_Unfold(self, node: ir.Unfold) -> str:
        args = self._args((node.size, node.step))
        code = self._method(node.arg, f"unfold({node.dim}, {args})")
        if ir.is_number(node.dilation, 1):
            return code
        return f"{code}[..., ::{self.wrap(node.dilation, Precedence.ATOM)}]"

    def _print_Flip(self, node: ir.Flip) -> str:
        return self._method(node.arg, f"flip({', '.join(map(str, node.dims))})")

    def _print_Clone(self, node: ir.Clone) -> str:
        return self._method(node.arg, "clone()")

    def _print_Contiguous(self, node: ir.Contiguous) -> str:
        return self._method(node.arg, "contiguous()")

    # -- contractions and reductions -------------------------------------------------------
    def _print_Contract(self, node: ir.Contract) -> str:
        every = dict.fromkeys(list(node.letters) + [a for v in node.operands for a in v.axes])
        letters = dict(zip(every, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
        spec = ",".join("".join(letters[x] for x in v.axes) for v in node.operands)
        spec += "->" + "".join(letters[x] for x in node.axes)
        return f'torch.einsum("{spec}", {self._args(node.operands)})'

    def _print_Matmul(self, node: ir.Matmul) -> str:
        if batched(node):
            return f"torch.bmm({self._args((node.left, node.right))})"
        # left to right, as python reads it: a @ (b @ c) keeps its parentheses (with b a vector
        # between two matrices, a @ b @ c does not even conform), and so does a @ (b * c)
        right = self.wrap(node.right, Precedence.MUL + 1)
        return f"{self.wrap(node.left, Precedence.MUL)} @ {right}"

    def _print_Addmm(self, node: ir.Addmm) -> str:
        return f"torch.addmm({self._args((node.bias, node.left, node.right))})"

    def _print_Reduce(self, node: ir.Reduce) -> str:
        k = leading_sum(node)
        if k is not None:
            mean = ", mean=True" if node.kind == "mean" else ""
            return f"{SUM_LEADING}({self.doprint(node.arg)}, {k}{mean})"
        dims = ", ".join(map(str, node.dims))
        dims = f"({dims})" if len(node.dims) > 1 else dims
        keepdim = ", keepdim=True" if node.keepdim else ""
        return self._method(node.arg, f"{node.kind}({dims}{keepdim})")

    def _print_Softmax(self, node: ir.Softmax) -> str:
        kernel = "log_softmax" if node.log else "softmax"
        return f"torch.{kernel}({self.doprint(node.arg)}, {node.dim})"

    def _print_Cumsum(self, node: ir.Cumsum) -> str:
        if not node.reverse:
            return self._method(node.arg, f"cumsum({node.dim})")
        flipped = self._method(node.arg, f"flip({node.dim})")
        return f"{flipped}.cumsum({node.dim}).flip({node.dim})"

    def _print_Conv(self, node: ir.Conv) -> str:
        kind = "conv_transpose" if node.transposed else "conv"
        args = [self._dense(node.input), self._dense(node.weight)]
        if node.bias is not None:
            args.append(self.doprint(node.bias))
        args += self._window_args(
            ("stride", node.stride, 1),
            ("padding", node.padding, 0),
            ("output_padding", node.output_padding, 0),
            ("dilation", node.dilation, 1),
        )
        if not ir.is_number(node.groups, 1):
            args.append(f"groups={self.doprint(node.groups)}")
        return f"torch.{kind}{len(node.stride)}d({', '.join(args)})"

    def _print_MaxPool(self, node: ir.MaxPool) -> str:
        n = len(node.kernel)
        args = [self.doprint(node.input)]
        for values in (node.kernel, node.stride):  # one number for every axis, as torch takes
            same = all(v == values[0] for v in values)
            args.append(self.doprint(values[0]) if same else f"({self._args(values)})")
        return f"torch.nn.functional.max_pool{n}d({', '.join(args)}, return_indices=True)"

    def _print_ConvWeight(self, node: ir.ConvWeight) -> str:
        size = self._args(node.size)
        args = [self._dense(node.input), f"({size})", self._dense(node.grad)]
        args += self._window_args(
            ("stride", node.stride, 1), ("padding", node.padding, 0), ("dilation", node.dilation, 1)
        )
        if not ir.is_number(node.groups, 1):
            args.append(f"groups={self.doprint(node.groups)}")
        return f"torch.nn.grad.conv{len(node.stride)}d_weight({', '.join(args)})"

    def _dense(self, node: ir.Node) -> str:
        """A convolution's operand, through ``_dense`` where it is a view (:func:`_strided`)."""
        return f"{DENSE}({self.doprint(node)})" if _strided(node) else self.doprint(node)

    def _window_args(self, *keys: tuple[str, tuple[ir.Node, ...], int]) -> list[str]:
        """``key=(a, b)`` for each per-axis argument not at torch's default (1 or 0 on every
        axis); one axis's as a bare value."""
        args = []
        for key, values, default in keys:
            if values and not all(ir.is_number(v, default) for v in values):
                code = self._args(values)
                args.append(f"{key}={code if len(values) == 1 else f'({code})'}")
        return args

    # -- indexing and construction ---------------------------------------------------------
    def _print_Arange(self, node: ir.Arange) -> str:
        return f"torch.arange({self.doprint(node.size)}, device={self.doprint(node.like)}.device)"

    def _print_Triangle(self, node: ir.Triangle) -> str:
        sizes, like = self._args((node.rows, node.cols)), self.doprint(node.like)
        kind, k = ("triu" if node.upper else "tril"), (str(node.k) if node.k else "")
        return f"torch.ones({sizes}, dtype=torch.bool, device={like}.device).{kind}({k})"

    def _print_MaskedFill(self, node: ir.MaskedFill) -> str:
        return self._method(node.arg, f"masked_fill({self._args((node.mask, node.value))})")

    def _print_IndexSelect(self, node: ir.IndexSelect) -> str:
        return f"{INDEX_SELECT}({self._args((node.arg, node.index))})"

    def _print_Gather(self, node: ir.Gather) -> str:
        return self._method(node.arg, f"gather({node.dim}, {self.doprint(node.index)})")

    def _print_Index(self, node: ir.Index) -> str:
        return f"{self.wrap(node.arg, Precedence.ATOM)}[{self._args(node.parts)}]"

    def _like(self, like: ir.Ref) -> str:
        return f"dtype={like.name}.dtype, device={like.name}.device"

    def _print_Zeros(self, node: ir.Zeros) -> str:
        # new_zeros, not torch.zeros(dtype=, device=): under vmap a buffer made like a batched
        # tensor is batched too, so an index_add_ of batched rows into it is allowed
        shape = self._args(node.shape)
        shape = f"({shape},)" if len(node.shape) == 1 else f"({shape})"
        return f"{node.like.name}.new_zeros({shape})"

    def _print_Full(self, node: ir.Full) -> str:
        shape = self._args(node.shape)
        shape = f"({shape},)" if len(node.shape) == 1 else f"({shape})"
        return f"torch.full({shape}, {self.doprint(node.value)}, {self._like(node.like)})"

    def _print_IndexAdd(self, node: ir.IndexAdd) -> str:
        target, rest = self.doprint(node.target), self._args((node.index, node.source))
        return f"{IN_PLACE[ir.IndexAdd]}({target}, {node.dim}, {rest})"

    def _print_ScatterReduce(self, node: ir.ScatterReduce) -> str:
        args = self._args((node.index, node.source))
        return self._method(node.target, f'scatter_reduce({node.dim}, {args}, "{node.reduce}")')

    def _print_Stack(self, node: ir.Stack) -> str:
        return f"torch.stack([{self._args(node.parts)}], {node.dim})"

    # -- statements ------------------------------------------------------------------------
    def _print_Assign(self, s: ir.Assign) -> str:
        return f"{', '.join(s.targets)} = {self.doprint(s.value)}"

    def _print_ScatterAdd(self, s: ir.ScatterAdd) -> str:
        args = f"{s.target}, {s.dim}, {self._args((s.index, s.source))}"
        return f"{s.target} = {IN_PLACE[ir.ScatterAdd]}({args})"

    def _print_IndexPut(self, s: ir.IndexPut) -> str:
        index = f"({self._args(s.index)},)" if len(s.index) == 1 else f"({self._args(s.index)})"
        value = self.doprint(s.value)
        return f"{s.target} = {IN_PLACE[ir.IndexPut]}({s.target}, {index}, {value})"

    def _print_Free(self, s: ir.Free) -> str:
        return f"del {', '.join(s.names)}"

    def _print_Guarded(self, s: ir.Guarded) -> str:
        # one line: black puts each statement of the body on its own line under the if
        parts = [
            " or ".join(f"{flag}[{k}]" for k in on)
            for flag, on in ((ir.NEEDS, s.on), (ir.PRESENT, s.given))
            if on
        ]
        if len(parts) > 1:
            parts = [f"({p})" if " or " in p else p for p in parts]
        return f"if {' and '.join(parts)}: {'; '.join(self.doprint(b) for b in s.body)}"
