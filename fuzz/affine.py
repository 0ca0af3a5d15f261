"""Affine subscripts and declared ranges (issue 25), drawn only in ``--affine`` mode.

Every draw here comes from the builder's ``affine`` stream, which is ``None`` without
``--affine``: each method then leaves the plain generator's draws exactly as they were, so every
seed draws the op it drew before affine subscripts existed (recorded regressions depend on it).

A subscript of a named axis may become an affine read of the indices in scope: a shift
(``x[n, t - 1]``, zero past the edge), a stride or dilation (``2*t``, ``stride*t``), a flip
(``-t + T - 1``), a sum of two indices (``x[i + j]``), an offset by a size or an int param, or
the read of a window being drawn (``fuzz.windows``); with ``--windows``, an index read as a
number (``0.5*(i - j)``, from a stream of its own). An index whose only reads are affine
gets its range declared (``ranges={"t": "T"}``), so in this mode each index name is used over
one size in the whole op.
"""

from __future__ import annotations

import dataclasses
import re

import sympy as sp

from derive.errors import DerivationError
from derive.language import Op, parse
from fuzz.leaves import Expr, Leaves

SHIFT = 0.12  # a subscript that has a plain index of its size drawn affine instead
ACROSS = 0.04  # an axis read at an affine of an index over another size (part past the end)
TWO_INDICES = 0.3  # an affine subscript over a second index: x[t + k]
WINDOW_READ = 0.8  # while a window is drawn, its axis is read at the window's subscript
DECLARED_ANYWAY = 0.3  # a range declared though a plain read gives it (they must agree)
AFFINE_PARAM_NAMES = "stride pad dil step off".split()
WIDER = 0.4  # --windows: a number the affine draw chose made wider (an offset 3, a stride 3)
INDEX_NUMBER = 0.06  # --windows: a leaf that is an index read as a number, 0.5 * (i - j)
INDEX_POWER = (
    0.3  # ...of those, a number raised to it, 0.9**(i - j) (refused as an engine bug once)
)


class Affine(Leaves):
    """The leaves, with affine subscripts and slid sizes when ``self.affine`` is set."""

    # --- overrides of the plain leaves: the same draws when self.affine is None ---------------
    def leaf(self, scope: dict, need: set) -> Expr:
        """A leaf; with --windows now and then an index in scope read as a number."""
        if self.numbers is not None and scope and self.numbers.random() < INDEX_NUMBER:
            return self.index_number(scope)
        return super().leaf(scope, need)

    def index_number(self, scope: dict) -> Expr:
        """An index read as a number, ALiBi's ``slope * (i - j)``: one index, or the difference
        of two over one size, times a number; their ranges declared where no read gives them."""
        names = sorted(scope)
        i = self.numbers.choice(names)
        alike = [j for j in names if j != i and scope[j] == scope[i]]
        used = [i]
        if alike and self.numbers.random() < 0.5:
            used.append(self.numbers.choice(alike))
        for k in used:
            self.ranged[k] = scope[k]
        # 0.3 is no binary fraction: an int tensor times it in float32 is not the float64
        # product (a position a delta solved, cast late, was 1e-8 off only inside a function)
        scale = self.numbers.choice(["0.5", "0.25", "1.5", "0.3"])
        if self.numbers.random() < INDEX_POWER:  # a decay, gamma**(s - t); its base a number
            base = self.numbers.choice(["0.9", "0.5", "1.5"])
            return Expr(f"{base}**({' - '.join(used)})", frozenset(used), atom=False)
        return Expr(f"{scale}*({' - '.join(used)})", frozenset(used), atom=False)

    def index(self, scope: dict) -> str:
        """A fresh index; with --affine never one used before in the op (ranges are per op)."""
        if self.affine is None:
            return super().index(scope)
        free = [n for n in super().index_pool(scope) if n not in self.index_names]
        chosen = self.rng.choice(free) if free else f"i{len(self.index_names)}"
        self.index_names.add(chosen)
        return chosen

    def new_input(self, dims: tuple[str, ...]):
        """An input over ``dims``, a window's derived size replaced by the size it slides over
        (no input may have a derived size)."""
        return super().new_input(tuple(self.unslid(d) for d in dims))

    def read_new(self, order: list[str], scope: dict) -> Expr:
        """A new input read at ``order``; an index over a derived window size reads the size
        it slides over at an affine subscript (``x[n, 2*t + 1]``)."""
        if not any(self.unslid(scope[i]) != scope[i] for i in order):
            return super().read_new(order, scope)
        t = self.new_input(tuple(scope[i] for i in order))
        subs = [
            Expr(i) if scope[i] == d else self.affine_read(i, scope, frozenset())
            for i, d in zip(order, t.dims)
        ]
        return Expr(f"{t.name}[{', '.join(s.text for s in subs)}]", frozenset(order))

    def subscript(self, size: str, scope: dict, need: set, data: float, avoid: set):
        if self.affine is not None:
            found = self.affine_subscript(size, scope, need)
            if found is not None:
                return found, False
        return super().subscript(size, scope, need, data, avoid)

    # --- affine draws ---------------------------------------------------------------------------
    def unslid(self, size: str) -> str:
        """The input size under a window's derived size (L -> T, through chained windows)."""
        while size in self.parents:
            size = self.parents[size]
        return size

    def affine_subscript(self, size: str, scope: dict, need: set) -> Expr | None:
        """An affine read of an axis of ``size``, or None for the plain draw."""
        a = self.affine
        if not size.isidentifier():  # a numeric or product dim (W[c, 2], T*E)
            return None
        if size in self.forms and a.random() < WINDOW_READ:
            return self.forms[size]
        same = [i for i, s in scope.items() if s == size]
        slid = [i for i, s in scope.items() if s != size and self.unslid(s) == size]
        named = self.backed(scope)
        if slid and not same:  # the only way to read T from an index over L
            pool = slid
        elif same and a.random() < SHIFT:
            pool = same
        elif named and a.random() < ACROSS:
            pool = named
        else:
            return None
        main = a.choice([i for i in pool if i in need] or pool)
        return self.affine_read(main, scope, frozenset(need))

    def affine_read(self, main: str, scope: dict, need: frozenset) -> Expr:
        """``c*main [+- c2*j] + offset``, never ``main`` alone: a shift, stride, flip, sum."""
        a, size = self.affine, scope[main]
        coef = a.choice(["", "", "", "", "2*", "-", "param"])
        coef = f"{self.int_param()}*" if coef == "param" else coef
        coef = f"{self.wider('2', 3)}*" if coef == "2*" else coef
        text, used = f"{coef}{main}", {main}
        others = [i for i in self.backed(scope) if i != main]
        if others and a.random() < TWO_INDICES:
            j = a.choice([i for i in others if i in need] or others)
            j_coef = a.choice(["", "", "2*", "param"])
            j_coef = f"{self.int_param()}*" if j_coef == "param" else j_coef
            text, used = text + f" {a.choice(['+', '-'])} {j_coef}{j}", used | {j}
        if coef == "-":  # a flip: -t + T - 1 reads the axis backwards
            offset = a.choice([f" + {size} - 1", f" + {size} - 1", f" + {size}", " + 1"])
        else:
            offset = a.choice(["", "", " - 1", " + 1", " + 2", " - 2", " - param", " + param"])
            offset = offset.replace("param", self.int_param()) if "param" in offset else offset
            offset = offset[:-1] + self.wider(offset[-1], 4) if offset[-1:].isdigit() else offset
            if text == main and not offset:
                offset = a.choice([" - 1", " + 1", f" - {size} + 1"])
        for i in used:
            self.ranged[i] = scope[i]
        return Expr(text + offset, frozenset(used), atom=False)

    def backed(self, scope: dict) -> list[str]:
        """The indices in scope whose size an input or a derived size gives: a range declared
        for one that only affine reads use must name a size of the op."""
        given = {d for t in self.inputs for d in t.dims} | set(self.derived)
        return [i for i, s in scope.items() if s in given and s.isidentifier()]

    def int_param(self) -> str:
        """An int param (a stride, dilation or padding): one there already, or a new one."""
        ints = sorted(p for p, v in self.params.items() if type(v) is int)
        if ints and self.affine.random() < 0.6:
            return self.affine.choice(ints)
        p = self.name(AFFINE_PARAM_NAMES)
        self.params[p] = int(self.wider(str(self.affine.choice([1, 2])), 3))
        return p

    def wider(self, number: str, most: int) -> str:
        """``number`` as the affine stream drew it, or with --windows now and then a larger
        one up to ``most``: offsets past 2, strides, dilations and paddings of 3, int params
        of 3. Drawn from the ``wide`` stream, so --affine's ops stay as they were."""
        if self.wide is None or not number.isdigit() or not 0 < int(number) < most:
            return number
        if self.wide.random() >= WIDER:
            return number
        return str(self.wide.randint(int(number) + 1, most))

    def declared_ranges(self, op: Op) -> dict[str, str]:
        """``ranges=`` for ``op``: every index an affine read or a window uses that a definition
        reads with no plain subscript there, and some that one does (the two must agree)."""
        if not self.ranged:
            return {}
        ranged = dict(sorted(self.ranged.items()))
        try:  # an index drawn in no definition is no range to declare: parse refuses it
            graph = parse(in_text(dataclasses.replace(op, ranges=ranged)))
        except DerivationError:
            return ranged  # case_op draws again
        needed = set()  # an index some definition uses with no plain read there
        for step in graph.steps:
            body = getattr(step, "body", sp.S.Zero)
            plain = {i for ind in body.atoms(sp.Indexed) for i in ind.indices}
            needed |= {str(i) for i in body.atoms(sp.Symbol) - plain}
        declared = {
            i: s for i, s in ranged.items() if i in needed or self.affine.random() < DECLARED_ANYWAY
        }  # a draw for each index, used or not: each seed's op is the one it drew before
        return {i: s for i, s in declared.items() if sp.Symbol(i, integer=True) in graph.ranges}


def in_text(op: Op) -> Op:
    """``op`` without the declared ranges of indices no definition names (a word in none of
    them): parse refuses such a range as a misspelt index."""
    words = set(re.findall(r"\w+", " ".join(op.definitions)))
    return dataclasses.replace(op, ranges={i: s for i, s in op.ranges.items() if i in words})
