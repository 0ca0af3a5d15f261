"""A second reading of an op: its definition *strings* evaluated straight to torch ops.

The reference interpreter (:mod:`derive.verify.reference`) evaluates the parsed
:class:`~derive.language.Graph`, so it agrees with the engine about whatever the parse says. A
misreading of the text itself (SymPy deciding ``c != t[n]`` structurally, as True, once) then
agrees with itself and every check passes. This module shares nothing with the parse: no
SymPy, no :mod:`derive.language`. It reads the strings with Python's :mod:`ast` and evaluates
them by brute force on a grid with one tensor axis per index of a definition:

    x[i, t[i], 0]       advanced indexing, one broadcast index tensor per subscript
    a + b, a ** p       torch arithmetic, broadcast over the grid
    a == b, a < b       torch comparisons of values (index aranges, int data or floats)
    Sum(f, i), Max(f, i)  f expanded over i's axis, then sum / amax over it
    where(c, a, b)      torch.where
    view(x, A, B)       reshape

An index's range is the dimension it subscripts; ``...`` is one flattened batch axis. Torch
autograd through it gives gradients (and, with ``create_graph``, second derivatives and
forward-mode tangents) independent of the engine's reading of the op.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from fractions import Fraction

import torch

_INPUT = re.compile(r"^\s*(\w+)\s*(?:\[([^\]]*)\])?\s*(?::\s*(\w+))?\s*$")
_DEFINITION = re.compile(r"^\s*(\w+)\s*(?:\[([^\]]*)\])?\s*=(?!=)(.*)$", re.S)
_BATCH = "..."

FUNCTIONS = {  # the language's functions, read independently of derive.functions
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "tanh": torch.tanh,
    "sin": torch.sin,
    "cos": torch.cos,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "abs": torch.abs,
    "Abs": torch.abs,
    "sign": torch.sign,
    "erf": torch.erf,
    "log1p": torch.log1p,
    "expm1": torch.expm1,
    "sigmoid": torch.sigmoid,
    "softplus": lambda x: torch.logaddexp(x, torch.zeros_like(x)),
    "relu": torch.relu,
    "maximum": lambda a, b: _select(a >= b, a, b),
    "minimum": lambda a, b: _select(a <= b, a, b),
}


def _select(pick_a: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """maximum/minimum as a selection, so that every mode of torch's autograd through the text
    is exact away from a tie (draws keep |a - b| from 0). torch's own jvp of ``minimum`` is
    ``other_t + mask * (self_t - other_t)``: against an unselected tangent far larger than the
    selected one, the selected tangent's last digits round away (fuzz 1029546 and 1080291,
    1e-10 off where the generated jvp is exact); where()'s tangent copies the selected one."""
    return torch.where(pick_a, a, b)


COMPARISONS = {
    ast.Eq: torch.eq,
    ast.NotEq: torch.ne,
    ast.Lt: torch.lt,
    ast.LtE: torch.le,
    ast.Gt: torch.gt,
    ast.GtE: torch.ge,
}
ARITHMETIC = {
    ast.FloorDiv: lambda a, b: a // b,
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}
CONSTANTS = {"pi": math.pi, "e": math.e, "inf": math.inf}


class OracleError(Exception):
    """The text could not be read as the language says; the caller reports it."""


@dataclass
class _Tensor:
    value: torch.Tensor  # batched tensors flattened to one leading axis
    batched: bool = False


class _Grid:
    """One definition's evaluation: its indices, each an axis of the grid."""

    def __init__(self, tensors: dict, sizes: dict, params: dict, indices: list[str]) -> None:
        self.tensors, self.sizes, self.params = tensors, sizes, params
        self.axes = indices
        self.ranges: dict[str, int] = {}
        self.declared: dict[str, str] = {}  # the op's ranges={"t": "L"}

    def arange(self, name: str) -> torch.Tensor:
        shape = [1] * len(self.axes)
        shape[self.axes.index(name)] = self.ranges[name]
        return torch.arange(self.ranges[name]).reshape(shape)

    def full(self, v) -> torch.Tensor:
        """A value as a tensor with one dim per axis (a number or 0-d tensor: all ones)."""
        if not isinstance(v, torch.Tensor):  # ints stay ints (indices, data); floats as the data
            v = torch.tensor(v) if isinstance(v, (int, bool)) else torch.tensor(v, dtype=self.dtype)
        t = v
        return t.reshape([1] * len(self.axes)) if t.dim() == 0 else t

    def real(self, v):
        """An int (a number, an index's arange, int data) as the data's float type."""
        if isinstance(v, torch.Tensor):
            return v if v.is_floating_point() else v.to(self.dtype)
        return float(v)

    @property
    def dtype(self) -> torch.dtype:
        floats = [t.value for t in self.tensors.values() if t.value.is_floating_point()]
        return floats[0].dtype if floats else torch.float64


def _floating(v) -> bool:
    """A python float or a float tensor (not an int, an index's arange or int data)."""
    return isinstance(v, float) or (isinstance(v, torch.Tensor) and v.is_floating_point())


def _names(node: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]


def _whole(v) -> bool:
    """An int, or a tensor of ints."""
    return isinstance(v, int) or (isinstance(v, torch.Tensor) and not _floating(v))


def _integral(v, node: ast.Subscript):
    """A subscript's value as ints: ``t + 1.0`` is ``t + 1``, as SymPy reads the text; a
    fractional one is no subscript (the language refuses it too)."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, torch.Tensor) and _floating(v):
        if not torch.equal(v, v.round()):
            raise OracleError(f"subscript '{ast.unparse(node)}' is no whole number")
        return v.round().long()
    return v


def _subscript_parts(node: ast.Subscript) -> list[ast.AST]:
    return list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]


class _Evaluator:
    def __init__(self, grid: _Grid) -> None:
        self.g = grid

    def __call__(self, node: ast.AST):
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            raise OracleError(f"cannot read '{ast.unparse(node)}'")
        return method(node)

    def _Expression(self, node):
        return self(node.body)

    def _Constant(self, node):
        if node.value is Ellipsis:
            return self.g.arange("batch")
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise OracleError(f"cannot read the constant {node.value!r}")
        return node.value

    def _Name(self, node):
        name = node.id
        if name in self.g.ranges:
            return self.g.arange(name)
        if name in self.g.tensors and self.g.tensors[name].value.dim() == 0:
            return self.g.full(self.g.tensors[name].value)  # a 0-d tensor, read whole
        if name in self.g.params:
            return self.g.params[name]
        if name in self.g.sizes:
            return self.g.sizes[name]
        if name in CONSTANTS:
            return CONSTANTS[name]
        raise OracleError(f"unknown name '{name}'")

    def _Subscript(self, node):
        if not isinstance(node.value, ast.Name) or node.value.id not in self.g.tensors:
            raise OracleError(f"'{ast.unparse(node)}' subscripts no tensor")
        tensor = self.g.tensors[node.value.id].value
        parts = _subscript_parts(node)
        subs = [_integral(self(p), node) for p in parts]
        # an affine subscript (t + k - P) outside the axis reads 0: zero padding
        inside = torch.ones((), dtype=torch.bool)
        for k, (p, n) in enumerate(zip(parts, tensor.shape)):
            if isinstance(p, (ast.BinOp, ast.UnaryOp)) and isinstance(subs[k], torch.Tensor):
                if not any(isinstance(x, ast.Subscript) for x in ast.walk(p)):
                    inside = inside & (subs[k] >= 0) & (subs[k] < n)
                    subs[k] = subs[k].clamp(0, n - 1)
        # int data out of range can stand only in a branch a where() discards (SymPy may have
        # decided the condition: cosh(z) < 0), which reads it as any entry: clamped
        subs = [
            s.clamp(-n, n - 1) if isinstance(s, torch.Tensor) else int(s)
            for s, n in zip(subs, tensor.shape)
        ]
        picked = self.g.full(tensor[tuple(subs)])
        if inside.dim():
            picked = torch.where(self.g.full(inside), picked, torch.zeros((), dtype=picked.dtype))
        return picked

    def _BinOp(self, node):
        op = ARITHMETIC.get(type(node.op))
        if op is None:
            raise OracleError(f"operator in '{ast.unparse(node)}'")
        a, b = self(node.left), self(node.right)
        if isinstance(node.op, ast.Pow) and _whole(a) and isinstance(b, int) and b >= 0:
            return a**b  # pad**2 in a subscript: an int, as the language reads it
        if isinstance(node.op, (ast.Div, ast.Pow)):  # 1/2 is a half, as in SymPy; c/C a float
            a = self.g.real(a)
        if _floating(a) or _floating(b):  # 0.25*t: the index in the data's dtype, as torch's
            a, b = self.g.real(a), self.g.real(b)  # int64 * 0.25 would be float32's
        return op(a, b)

    def _UnaryOp(self, node):
        v = self(node.operand)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return v
        raise OracleError(f"operator in '{ast.unparse(node)}'")

    def _Compare(self, node):
        if len(node.ops) != 1 or type(node.ops[0]) not in COMPARISONS:
            raise OracleError(f"comparison '{ast.unparse(node)}'")
        a, b = (self.g.full(self(x)) for x in (node.left, node.comparators[0]))
        return COMPARISONS[type(node.ops[0])](a, b)

    def _Call(self, node):
        name = node.func.id if isinstance(node.func, ast.Name) else ""
        if name in ("Sum", "Max"):
            body = self.g.full(self(node.args[0]))
            dims = [self.g.axes.index(_index_name(a)) for a in node.args[1:]]
            shape = list(body.shape)
            for d in dims:
                shape[d] = self.g.ranges[self.g.axes[d]]
            body = body.expand(shape)
            return body.sum(dims, keepdim=True) if name == "Sum" else body.amax(dims, True)
        args = [self(a) for a in node.args]
        if name == "where":
            c, a, b = (self.g.full(v) for v in args)
            return torch.where(c, a, b)
        if name in FUNCTIONS:
            return FUNCTIONS[name](*(self.g.full(self.g.real(a)) for a in args))
        raise OracleError(f"unknown function '{name}'")


class _Bound(ast.NodeTransformer):
    """Each Sum's and Max's bound indices renamed apart (``i#1``, ``i#2``): one name may be
    bound by two sums over different ranges (``Sum(a[i], i) / Sum(b[i], i)``)."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, str]] = []
        self.count = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        name = node.func.id if isinstance(node.func, ast.Name) else ""
        if name not in ("Sum", "Max") or len(node.args) < 2:
            return self.generic_visit(node)
        scope = {}
        for a in node.args[1:]:
            self.count += 1
            scope[_index_name(a)] = f"{a.id}#{self.count}"
        self.scopes.append(scope)
        args = [self.visit(a) for a in node.args]
        self.scopes.pop()
        return ast.Call(node.func, args, [])

    def visit_Name(self, node: ast.Name) -> ast.AST:
        for scope in reversed(self.scopes):
            if node.id in scope:
                return ast.Name(scope[node.id], ast.Load())
        return node


def _index_name(node: ast.AST) -> str:
    if not isinstance(node, ast.Name):
        raise OracleError(f"'{ast.unparse(node)}' is not an index to sum over")
    return node.id


def _ranges(tree: ast.AST, grid: _Grid) -> None:
    """Each index's range: the dimension of the first tensor it subscripts."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
            continue
        tensor = grid.tensors.get(node.value.id)
        if tensor is None:
            continue
        for pos, part in enumerate(_subscript_parts(node)):
            if isinstance(part, ast.Name) and part.id in grid.axes and pos < tensor.value.dim():
                grid.ranges.setdefault(part.id, tensor.value.shape[pos])
    if "batch" in grid.axes:
        grid.ranges.setdefault("batch", grid.sizes["Batch"])
    for axis in grid.axes:  # ranges={"t": "L"}: no tensor gives t's (k#1: a bound k)
        size = grid.declared.get(axis.split("#")[0])
        if size is not None:
            grid.ranges[axis] = grid.sizes[size.strip()]


def _whole_size(text: str, sizes: dict, params: dict) -> int:
    """A size expression (``C / n_head``, ``3*C``) of known sizes and int params, exactly."""

    def value(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return Fraction(node.value)
        if isinstance(node, ast.Name) and node.id in sizes:
            return Fraction(sizes[node.id])
        if isinstance(node, ast.Name) and isinstance(params.get(node.id), int):
            return Fraction(params[node.id])
        if isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:
            a, b = value(node.left), value(node.right)
            return a / b if isinstance(node.op, ast.Div) else ARITHMETIC[type(node.op)](a, b)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -value(node.operand) if isinstance(node.op, ast.USub) else value(node.operand)
        raise OracleError(f"cannot evaluate the size '{text}'")

    v = value(ast.parse(text.strip(), mode="eval"))
    if v.denominator != 1:
        raise OracleError(f"size '{text}' is {v}, not a whole number")
    return int(v)


def _bind_inputs(op, inputs: dict[str, torch.Tensor], params: dict) -> tuple[dict, dict, tuple]:
    tensors, sizes, lead, products = {}, {}, (), []
    pending = dict(op.sizes)
    while pending:  # H = n_head (and G = 2*H): they give D of x[N, G*D]
        for name, text in list(pending.items()):
            try:
                sizes[name] = _whole_size(str(text), sizes, params)
            except (OracleError, ZeroDivisionError):
                continue
            del pending[name]
            break
        else:
            break
    for text in op.inputs:
        m = _INPUT.match(text)
        if m is None:
            raise OracleError(f"cannot read input '{text}'")
        name, dims = m.group(1), [d.strip() for d in (m.group(2) or "").split(",") if d.strip()]
        t = inputs[name]
        batched = bool(dims) and dims[0] == _BATCH
        if batched:
            lead = tuple(t.shape[: t.dim() - (len(dims) - 1)])
            sizes.setdefault("Batch", math.prod(lead))
            t = t.reshape((-1, *t.shape[len(lead) :]))
        products.extend((d, t.shape[pos + batched]) for pos, d in enumerate(dims[batched:]))
        tensors[name] = _Tensor(t, batched)
    for _ in products:  # a product (3*M) gives its one unknown size once the others are known
        for dim, extent in products:
            factors = [f.strip() for f in dim.split("*")]
            unknown = [f for f in factors if not f.isdigit() and f not in sizes]
            if len(unknown) == 1:
                known = math.prod(
                    int(f) if f.isdigit() else sizes[f] for f in factors if f != unknown[0]
                )
                sizes[unknown[0]] = extent // known
    return tensors, sizes, lead


def evaluate_text(op, inputs: dict[str, torch.Tensor], params: dict | None = None) -> dict:
    """Every definition of ``op`` (an :class:`~derive.language.Op`, read as strings only) on
    ``inputs``; batched definitions keep the flattened batch axis except the output's."""
    params = dict(op.param_values(), **(params or {}))
    tensors, sizes, lead = _bind_inputs(op, inputs, params)
    pending = {k: v for k, v in op.sizes.items() if k not in sizes}
    while pending:  # derived sizes, in whatever order they become computable
        for name, text in list(pending.items()):
            try:
                sizes[name] = _whole_size(text, sizes, params)
            except OracleError:
                continue
            del pending[name]
            break
        else:
            raise OracleError(f"cannot evaluate the sizes {sorted(pending)}")
    last = None
    for text in op.definitions:
        last = _definition(text, tensors, sizes, params, dict(getattr(op, "ranges", {})))
    values = {k: v.value for k, v in tensors.items()}
    if tensors[last].batched:  # the leading dims the batched inputs share, restored
        values[last] = values[last].reshape(*lead, *values[last].shape[1:])
    return values


def _definition(text: str, tensors: dict, sizes: dict, params: dict, declared: dict) -> str:
    m = _DEFINITION.match(text)
    if m is None:
        raise OracleError(f"cannot read definition '{text}'")
    name, lhs_text, rhs = m.group(1), m.group(2) or "", m.group(3).strip()
    view = re.fullmatch(r"view\(\s*(\w+)\s*,(.*)\)", rhs, re.S)
    if view:
        dims = [_whole_size(d, sizes, params) for d in view.group(2).split(",")]
        tensors[name] = _Tensor(tensors[view.group(1)].value.reshape(dims))
        return name
    lhs = [s.strip() for s in lhs_text.split(",") if s.strip()]
    lhs = ["batch" if s == _BATCH else s for s in lhs]
    tree = _Bound().visit(ast.parse(rhs.replace(_BATCH, "batch"), mode="eval"))
    known = set(tensors) | set(sizes) | set(params) | set(FUNCTIONS) | {"Sum", "Max", "where"}
    subscripted = {  # any name in a subscript, nested ones too (``C[a[n], e]``: e an index)
        n.id
        for node in ast.walk(ast.parse(rhs.replace(_BATCH, "batch"), mode="eval"))
        if isinstance(node, ast.Subscript)
        for n in ast.walk(node.slice)
        if isinstance(n, ast.Name)
    }
    subscripted |= set(lhs)
    indices = [n for n in dict.fromkeys(lhs + _names(tree)) if n not in known]
    indices = [n for n in indices if n not in CONSTANTS or n in subscripted]
    grid = _Grid(tensors, sizes, params, indices)
    grid.declared = declared
    _ranges(tree, grid)
    missing = [i for i in indices if i not in grid.ranges]
    if missing:
        raise OracleError(f"no range for index '{missing[0]}' in '{text}'")
    value = grid.full(_Evaluator(grid)(tree))
    if any(value.shape[k] != 1 for k, i in enumerate(indices) if i not in lhs):
        raise OracleError(f"'{text}': an index on the right is neither on the left nor summed")
    value = value.expand([grid.ranges[i] if i in lhs else 1 for i in indices])
    order = [indices.index(i) for i in lhs] + [k for k, i in enumerate(indices) if i not in lhs]
    value = value.permute(order).reshape([grid.ranges[i] for i in lhs])
    tensors[name] = _Tensor(value, bool(lhs) and lhs[0] == "batch")
    return name


def oracle_output(op, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The op's output as the text defines it."""
    values = evaluate_text(op, inputs)
    return values[_DEFINITION.match(op.definitions[-1]).group(1)]


def oracle_gradients(
    op, inputs: dict[str, torch.Tensor], grad_out: torch.Tensor
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The output as the text defines it and, by torch autograd through it, the gradient of
    ``<grad_out, output>`` for every float input (zeros where the output does not read it)."""
    leaves = {
        n: t.detach().clone().requires_grad_(t.is_floating_point()) for n, t in inputs.items()
    }
    out = oracle_output(op, leaves)
    floats = [n for n, t in leaves.items() if t.is_floating_point()]
    grads: tuple = (None,) * len(floats)
    if out.requires_grad:
        grads = torch.autograd.grad(out, [leaves[n] for n in floats], grad_out, allow_unused=True)
    return out.detach(), {
        n: torch.zeros_like(leaves[n]) if g is None else g for n, g in zip(floats, grads)
    }


def second_order(
    apply, inputs: dict[str, torch.Tensor], grad_out: torch.Tensor, cotangents: dict
) -> dict[str, torch.Tensor]:
    """Reverse over reverse through ``apply`` (a function of the inputs, in order): the
    gradient of ``<v, d<grad_out, out>/dx>`` with respect to every float input and grad_out
    (key ``"grad_out"``), zeros where it does not depend on one. ``cotangents`` maps float
    inputs to their v; an input left out has no part in the pair, and autograd gives its
    first-order gradient's node no cotangent (None, as for a gradient penalty on x alone). The
    same for the generated ``Function.apply`` and the text oracle."""
    leaves = {
        n: t.detach().clone().requires_grad_(t.is_floating_point()) for n, t in inputs.items()
    }
    g = grad_out.detach().clone().requires_grad_(True)
    floats = [n for n, t in leaves.items() if t.is_floating_point()]
    out = apply(*leaves.values())
    targets = [leaves[n] for n in floats]
    zeros = {n: torch.zeros_like(leaves[n]) for n in floats} | {"grad_out": torch.zeros_like(g)}
    if not out.requires_grad:
        return zeros
    firsts = torch.autograd.grad(out, targets, g, create_graph=True, allow_unused=True)
    pair = sum(
        (f * cotangents[n]).sum()
        for n, f in zip(floats, firsts)
        if f is not None and n in cotangents
    )
    if not isinstance(pair, torch.Tensor) or not pair.requires_grad:
        return zeros
    seconds = torch.autograd.grad(pair, targets + [g], allow_unused=True)
    return {
        n: zeros[n] if s is None else s.detach() for n, s in zip(floats + ["grad_out"], seconds)
    }


def oracle_second_order(op, inputs: dict, grad_out: torch.Tensor, cotangents: dict) -> dict:
    """:func:`second_order` through the definitions' text (:func:`oracle_output`)."""
    names = list(inputs)
    return second_order(
        lambda *ts: oracle_output(op, dict(zip(names, ts))), inputs, grad_out, cotangents
    )


def tangent(apply, inputs: dict[str, torch.Tensor], tangents: dict) -> torch.Tensor:
    """Forward mode through ``apply`` (a function of the inputs, in order): the output's
    tangent along ``tangents`` (one per float input), by torch's dual numbers
    (``torch.autograd.forward_ad``); zeros where the output reads no float input. The same
    for the generated ``Function.apply`` (its derived ``jvp``) and the text oracle (torch's
    own forward-mode formulas through the definitions)."""
    import torch.autograd.forward_ad as fwad

    with fwad.dual_level():
        duals = [
            fwad.make_dual(t.detach(), tangents[n]) if n in tangents else t
            for n, t in inputs.items()
        ]
        out = apply(*duals)
        found = fwad.unpack_dual(out).tangent
        return torch.zeros_like(out.detach()) if found is None else found.detach().clone()


def oracle_tangent(op, inputs: dict, tangents: dict) -> torch.Tensor:
    """:func:`tangent` through the definitions' text (:func:`oracle_output`)."""
    names = list(inputs)
    return tangent(lambda *ts: oracle_output(op, dict(zip(names, ts))), inputs, tangents)
