"""Definitions that slide over an axis (issue 25), drawn only in ``--affine`` mode, from the
builder's ``affine`` stream: convolutions with strides, dilations and zero padding (constants
or int params), causal ones, pools (a Sum, a mean or a Max over a window, the kernel size
sometimes an int param), transposed convolutions and cumulative sums. The output axis is a
derived size (``L = (T + 2*pad - K) // stride + 1``) whose index's range is declared. A body
may go on with any expression (``fuzz.expressions``) over the window's indices: its reads of the
axis then use the window's subscript (``fuzz.affine``), so windows combine with functions,
where() and the other draws.
"""

from __future__ import annotations

from fuzz.expressions import Expressions
from fuzz.leaves import FLOAT_NAMES, SIZE_NAMES, Expr, Tensor

WINDOWED = 0.35  # a definition that slides over an axis
KINDS = ["conv", "conv", "conv", "pool", "transposed", "cumulative", "cumulative"]
MORE = 0.4  # a window's body goes on with a random expression over its indices
GROUPED = 0.3  # --windows: a window that is a grouped convolution
KERNEL_PARAM = 0.4  # --windows: a weight's kernel size an int param's (w[o, K] with K = ksize)


class Windows(Expressions):
    """Window definitions, appended to the op being built."""

    def windowed(self) -> bool:
        """Maybe append one window definition (never without --affine); whether it did."""
        a = self.affine
        if a is None or a.random() >= WINDOWED:
            return False
        if self.wide is not None and self.wide.random() < GROUPED and self.grouped():
            return True
        sources = [
            (t, pos)
            for t in self.floats()
            for pos, d in enumerate(t.dims)
            if d.isidentifier() and (d not in self.derived or d in self.parents)
        ]
        if not sources:
            return False
        x, pos = a.choice(sources)
        others = {self.index({}): d for p, d in enumerate(x.dims) if p != pos}
        body, out = getattr(self, a.choice(KINDS))(x, pos, others)
        name = self.name(FLOAT_NAMES + ["conv", "pooled", "csum", "out"])
        self.lines.append(f"{name}[{', '.join(out)}] = {body}")
        self.defs.append(Tensor(name, tuple(out.values())))
        return True

    # --- kinds: each returns the body and the output's indices -> sizes -------------------------
    def conv(self, x: Tensor, pos: int, others: dict):
        """``Sum(x[n, c, S*t + D*k - P] * w[o, c, k], c, k)``, a pool when unweighted."""
        return self._slide(x, pos, others, weighted=self.affine.random() < 0.75)

    def pool(self, x: Tensor, pos: int, others: dict):
        return self._slide(x, pos, others, weighted=False)

    def transposed(self, x: Tensor, pos: int, others: dict):
        """``Sum(x[n, s] * w[t - S*s], s)`` over t in L = S*(T - 1) + K: the adjoint's form."""
        axis, stride = x.dims[pos], self._step(["1", "1", "2", "param"])
        t, s = self.index(others), self.index(others)
        kernel = self.size()
        times = "" if stride == "1" else f"{stride}*"
        size = self._slid_size(f"{times}({self._whole(axis)} - 1) + {kernel}", axis)
        inner = {**others, t: size, s: axis}
        w = self.new_input((kernel,))
        tap = f"{t} - {stride}*{s}" if stride != "1" else f"{t} - {s}"
        body = f"{self._read(x, pos, others, s)} * {w.name}[{tap}]"
        self.ranged[t] = size
        return f"Sum({self._more(body, inner, [s])}, {s})", self._out(others, pos, t, size)

    def cumulative(self, x: Tensor, pos: int, others: dict):
        """``Sum(where(s <= t, x[n, s], 0), s)``: t reads no tensor, its range is declared."""
        a, axis = self.affine, x.dims[pos]
        t, s = self.index(others), self.index(others)
        inner = {**others, t: axis, s: axis}
        body = self._more(self._read(x, pos, others, s), inner, [s])
        op = a.choice(["<=", "<", ">=", ">"])
        self.ranged[t] = axis
        return f"Sum(where({s} {op} {t}, {body}, 0), {s})", self._out(others, pos, t, axis)

    def grouped(self) -> bool:
        """--windows: a grouped convolution as ops/conv1d.py writes it. An input's channels C
        are viewed as G x CG (derived sizes ``G = groups``, ``CG = C / groups``, an int param),
        and each group slides its own weight over another axis,

            out[n, g, o, t] = Sum(xg[n, g, c, S*t + D*k - P] * w[g, o, c, k], c, k),

        the weight an input over the derived sizes (``w[G, O, CG, K]``) or one viewed per group
        (``w[O, CG, K]``, ``view(w, G, OG, CG, K)`` with ``OG = O / groups``). Whether it did."""
        sources = [
            (x, ci, ti)
            for x in self.inputs
            for ci, c in enumerate(x.dims)
            for ti, t in enumerate(x.dims)
            if not x.integer and c != t and self._own(c) and self._own(t)
        ]
        if not sources:
            return False
        x, ci, ti = self.wide.choice(sources)
        xg, g_size, c_size, groups = self._split_channels(x, ci)
        g, c, t = self.index({}), self.index({}), self.index({})
        o, k, kernel = self.index({}), self.index({}), self._kernel(weighted=True)
        read, size = self._window(x.dims[ti], t, k, kernel)
        self.ranged[k], self.ranged[t] = kernel, size
        weight, o_size = self._per_group(g_size, c_size, kernel, groups)
        subs, out = [], {}
        for pos, d in enumerate(x.dims):
            if pos == ci:
                subs += [g, c]
                out |= {g: g_size, o: o_size}
            else:
                i = t if pos == ti else self.index({})
                subs.append(read if pos == ti else i)
                out[i] = size if pos == ti else d
        body = f"{xg.name}[{', '.join(subs)}] * {weight}[{g}, {o}, {c}, {k}]"
        form = (x.dims[ti], Expr(read, frozenset({t, k}), False))
        body = self._more(body, {**out, c: c_size, k: kernel}, [c, k], form=form)
        name = self.name(FLOAT_NAMES + ["conv", "outg"])
        self.lines.append(f"{name}[{', '.join(out)}] = Sum({body}, {c}, {k})")
        self.defs.append(Tensor(name, tuple(out.values())))
        return True

    def _split_channels(self, x: Tensor, ci: int) -> tuple[Tensor, str, str, str]:
        """``xg = view(x, .., G, CG, ..)``: x's channel axis C split per group, with
        ``G = groups`` and ``CG = C / groups`` (a new int param, 1 to 3); the draw of the input's
        sizes makes C a multiple of groups (``derive.verify.check.with_derived``)."""
        groups = self.name(["groups", "ng", "grp"])
        self.params[groups] = self.wide.choice([1, 2, 3])
        g_size, c_size = self.name(SIZE_NAMES), self.name(SIZE_NAMES)
        self.derived |= {g_size: groups, c_size: f"{x.dims[ci]} / {groups}"}
        dims = list(x.dims)
        dims[ci : ci + 1] = [g_size, c_size]
        return self._view(x, tuple(dims), ["xg", "grouped"]), g_size, c_size, groups

    def _per_group(self, g_size: str, c_size: str, kernel: str, groups: str) -> tuple[str, str]:
        """The grouped convolution's weight and the size of its output channel: a new input
        over (G, O, CG, K), or one over (O, CG, K) viewed as (G, OG, CG, K) with
        ``OG = O / groups`` (ops/conv1d.py's)."""
        if self.wide.random() < 0.5:
            out_size = self.size()
            return self.new_input((g_size, out_size, c_size, kernel)).name, out_size
        full, out_size = self.size(), self.name(SIZE_NAMES)
        self.derived[out_size] = f"{full} / {groups}"
        w = self.new_input((full, c_size, kernel))
        return self._view(w, (g_size, out_size, c_size, kernel), ["wg"]).name, out_size

    def _view(self, x: Tensor, dims: tuple, names: list[str]) -> Tensor:
        """``name = view(x, dims)``, appended."""
        t = Tensor(self.name(FLOAT_NAMES + names), dims)
        self.lines.append(f"{t.name} = view({x.name}, {', '.join(dims)})")
        self.defs.append(t)
        return t

    def _own(self, size: str) -> bool:
        """A size an input gives, not a derived one: a channel to split or an axis to slide."""
        return size.isidentifier() and size not in self.derived

    # --- parts ----------------------------------------------------------------------------------
    def _slide(self, x: Tensor, pos: int, others: dict, weighted: bool):
        a, axis = self.affine, x.dims[pos]
        t = self.index(others)
        kernel = self._kernel(weighted)
        k = self.index({**others, t: axis})
        read, size = self._window(axis, t, k, kernel)
        self.ranged[k], self.ranged[t] = kernel, size
        out = self._out(others, pos, t, size)
        inner, bound = {**out, k: kernel}, [k]
        body = self._read(x, pos, others, read)
        if weighted:
            taps = [k]
            if others and a.random() < 0.4:  # a channel contracted with the window
                c = a.choice(list(others))
                bound.append(c)
                del out[c]
                taps.append(c)
            if a.random() < 0.4:  # an output channel: w[o, c, k]
                o = self.index(inner)
                inner[o] = out[o] = self.size()
                taps.append(o)
            a.shuffle(taps)
            body += f" * {self.factor(taps, inner).text}"
        body = self._more(body, inner, bound, form=(axis, Expr(read, frozenset({t, k}), False)))
        if not weighted and a.random() < 0.4:
            return f"Max({body}, {', '.join(bound)})", out
        mean = f" / {kernel}" if not weighted and a.random() < 0.5 else ""
        return f"Sum({body}, {', '.join(bound)}){mean}", out

    def _kernel(self, weighted: bool) -> str:
        """The window's size: a weight's (any size), an input's, or an int param's."""
        given = sorted({d for t in self.inputs for d in t.dims if d.isidentifier()})
        given = [d for d in given if d not in self.derived]  # no weight gives a pool's size
        if weighted and (self.wide is None or self.wide.random() >= KERNEL_PARAM):
            return self.size()  # the weight's input gives it
        if weighted:  # --windows: a derived size the weight's dimension names (K = ksize)
            kernel = self.name(SIZE_NAMES)
            self.derived[kernel] = self.int_param()
            return kernel
        if given and self.affine.random() < 0.6:
            return self.affine.choice(given)
        kernel = self.name(SIZE_NAMES)
        self.derived[kernel] = self.int_param()
        return kernel

    def _window(self, axis: str, t: str, k: str, kernel: str) -> tuple[str, str]:
        """The read of ``axis`` at output t and tap k, and the output's size: a stride, a
        dilation, zero padding on one side or both (numbers or int params), or causal."""
        a = self.affine
        stride, dil = self._step(["1", "1", "2", "param"]), self._step(
            ["1", "1", "1", "2", "param"]
        )
        tap = k if dil == "1" else f"{dil}*{k}"
        if a.random() < 0.15:  # causal: out[t] reads x at t - D*k, as long as x
            return f"{t} - {tap}", axis
        pad = self._step(["0", "0", "1", "param"])
        left, right = a.choice([(pad, pad), (pad, pad), (pad, "0"), ("0", pad)])
        read = (t if stride == "1" else f"{stride}*{t}") + f" + {tap}"
        read += f" - {left}" if left != "0" else ""
        pads = f" + 2*{left}" if left == right != "0" else ""
        pads = pads or "".join(f" + {p}" for p in (left, right) if p != "0")
        width = self._whole(kernel)
        span = f" - {width}" if dil == "1" else f" - {dil}*({width} - 1) - 1"
        num = f"{self._whole(axis)}{pads}{span}"
        text = f"({num}) // {stride} + 1" if stride != "1" else f"{num} + 1"
        return read, self._slid_size(text, axis)

    def _more(self, body: str, inner: dict, bound: list, form: tuple | None = None) -> str:
        """``body`` times a random expression over ``inner``, sometimes; while it is drawn, a
        read of the window's axis uses the window's subscript."""
        if self.affine.random() >= MORE:
            return body
        if form is not None:
            self.forms[form[0]] = form[1]
        # no index over a size no input may have and no axis slides to (a kernel param's)
        inner = {i: s for i, s in inner.items() if s not in self.derived or s in self.parents}
        more = self.expr(inner, self.affine.randint(1, 2), frozenset())
        self.forms.clear()
        return f"{body} * {more.wrap()}"

    def _read(self, x: Tensor, pos: int, others: dict, sub: str) -> str:
        subs = list(others)
        subs.insert(pos, sub)
        return f"{x.name}[{', '.join(subs)}]"

    def _out(self, others: dict, pos: int, t: str, size: str) -> dict:
        items = list(others.items())
        return dict(items[:pos] + [(t, size)] + items[pos:])

    def _whole(self, axis: str) -> str:
        """A size as text for a derived size's formula (a window's own derived size, written
        out: derived sizes are read in sorted order)."""
        return f"({self.derived[axis]})" if axis in self.derived else axis

    def _slid_size(self, text: str, axis: str) -> str:
        name = self.name(SIZE_NAMES)
        self.derived[name], self.parents[name] = text, axis
        return name

    def _step(self, choices: list[str]) -> str:
        pick = self.affine.choice(choices)
        if pick == "param":
            return self.int_param()
        unit = pick == "1" and "0" not in choices  # a unit stride or dilation stays plain
        return pick if unit else self.wider(pick, 3)
