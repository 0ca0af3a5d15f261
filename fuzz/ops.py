"""Random ops in the op language, one per seed, valid by construction.

An op is built definition by definition. Every subscript is an index whose range is the size of
the dimension it indexes, or an entry of an int64 input whose values lie in that range; every
index on the left is used on the right; every Sum/Max index is used in its body. Names of
tensors, sizes and indices are drawn at random (issue 9: the lowering depended on them).

Domains are kept by construction, not by the inputs: log, sqrt, log1p, negative and fractional
powers and denominators only ever see an expression that is positive for any real input
(``exp(g)``, ``g**2 + 1/2``, ``cosh(g)``, a Sum of positives, ...), so an op file alone says how
to draw its inputs (``fuzz.check.draw_inputs``) and a shrunk op stays in its domain.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from derive.language import Op
from fuzz.functions import (
    GROWING,
    available_functions,
    constants,
    elementwise_extremes,
    positive_argument,
)

SIZE_NAMES = "N M K D H I J T V P R L G F U Y Z A B Q".split()
INDEX_NAMES = "a b c d f g h i j k l m n o p q r s t u v w x y z aa bb ij kk mm n1 t2".split()
FLOAT_NAMES = "x y z w h u v g s Wq Zz W1 b2 gain logits emb act prob W C Kx a1 hid".split()
INT_NAMES = "idx tgt X Y ids labels pos cls".split()
PARAM_NAMES = "eps alpha scale tau lam".split()
RESERVED = {"e", "E", "pi", "batch", "Batch", "view", "Sum", "Max", "Min", "S", "O"}

DATA = 0.04  # an index of an access replaced by an int tensor entry: x[n, t[n]]
DIAGONAL = 0.03  # x[i, i]: a repeated index in one access
MULTI_DATA = 0.05  # a second data subscript in one access: x[t[n], u[n]]
KINDS = {  # kind of definition -> weight
    "elementwise": 5,
    "contract": 5,
    "reduce": 4,
    "normalize": 2,
    "pick": 2,
    "gather": 1,
}


@dataclass
class Tensor:
    """A tensor the generator may read: its dims as size text (``N``, ``T*E``)."""

    name: str
    dims: tuple[str, ...]
    integer: bool = False
    bound: str = ""  # int tensors: the size their values index


@dataclass
class Expr:
    text: str
    used: frozenset = frozenset()  # index names it depends on
    atom: bool = True  # needs no parentheses as an operand

    def wrap(self) -> str:
        return self.text if self.atom else f"({self.text})"


@dataclass
class _Builder:
    rng: random.Random
    stepwise: bool
    functions: list[str]
    taken: set = field(default_factory=lambda: set(RESERVED))
    sizes: list[str] = field(default_factory=list)
    inputs: list[Tensor] = field(default_factory=list)
    defs: list[Tensor] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    params: dict = field(default_factory=dict)
    extremes: tuple = ()  # the language's spelling of element-wise max/min, if any
    positive_only: set = field(default_factory=set)  # functions whose argument must be > 0
    constants: list = field(default_factory=list)  # pi, e when the language has them
    growing: int = 0  # inside exp/cosh/...: no second growing function (float64 overflow)
    index_names: set = field(default_factory=set)  # every index used: tensors avoid them

    # --- names -----------------------------------------------------------------------------------
    def name(self, pool: list[str]) -> str:
        free = [n for n in pool if n not in self.taken and n not in self.index_names]
        chosen = self.rng.choice(free) if free else f"{pool[0]}{len(self.taken)}"
        self.taken.add(chosen)
        return chosen

    def size(self) -> str:
        if self.sizes and (len(self.sizes) >= 4 or self.rng.random() < 0.6):
            return self.rng.choice(self.sizes)
        self.sizes.append(self.name(SIZE_NAMES))
        return self.sizes[-1]

    def index(self, scope: dict) -> str:
        """A fresh index name: not a tensor, size or param, nor any index in scope."""
        free = [n for n in INDEX_NAMES if n not in self.taken and n not in scope]
        chosen = self.rng.choice(free)
        self.index_names.add(chosen)
        return chosen

    def new_input(self, dims: tuple[str, ...]) -> Tensor:
        t = Tensor(self.name(FLOAT_NAMES), dims)
        self.inputs.append(t)
        return t

    def new_int(self, dims: tuple[str, ...], bound: str) -> Tensor:
        t = Tensor(self.name(INT_NAMES), dims, integer=True, bound=bound)
        self.inputs.append(t)
        return t

    def floats(self) -> list[Tensor]:
        return [t for t in self.inputs if not t.integer] + self.defs

    # --- leaves ----------------------------------------------------------------------------------
    def subscript(
        self, size: str, scope: dict, need: set, data: float, avoid: set
    ) -> tuple[Expr, bool] | None:
        """An index of this size not yet in the access, or an int tensor entry indexing it.

        Returns the subscript and whether it is a data subscript.
        """
        plain = [i for i, s in scope.items() if s == size and i not in avoid]
        if plain and self.rng.random() >= data:
            i = self.rng.choice([i for i in plain if i in need] or plain)
            return Expr(i, frozenset({i})), False
        e = self.data_subscript(size, scope, need)
        if e is not None:
            return e, True
        if plain:
            i = self.rng.choice(plain)
            return Expr(i, frozenset({i})), False
        repeat = [i for i, s in scope.items() if s == size]
        if repeat and self.rng.random() < DIAGONAL:
            i = self.rng.choice(repeat)
            return Expr(i, frozenset({i})), False
        return None

    def data_subscript(self, size: str, scope: dict, need: set) -> Expr | None:
        ints = [t for t in self.inputs if t.integer and t.bound == size]
        ints = [t for t in ints if not Counter(t.dims) - Counter(scope.values())]
        if ints and self.rng.random() < 0.6:
            t = self.rng.choice(ints)
        elif scope and len([t for t in self.inputs if t.integer]) < 3:
            keys = list(scope)
            chosen = self.rng.sample(keys, self.rng.randint(1, min(2, len(keys))))
            t = self.new_int(tuple(scope[k] for k in chosen), size)
        else:
            return None
        return self.access(t, scope, need, data=0.0)

    def access(self, t: Tensor, scope: dict, need: set, data: float = 0.15) -> Expr | None:
        """``t[...]``: distinct indices, at most one data subscript (rarely a diagonal or two)."""
        subs: list[Expr | None] = [None] * len(t.dims)
        avoid: set = set()
        datas = 0
        order = list(range(len(t.dims)))
        self.rng.shuffle(order)
        for pos in order:
            allowed = data if datas == 0 or self.rng.random() < MULTI_DATA else 0.0
            found = self.subscript(t.dims[pos], scope, need, allowed, avoid)
            if found is None:
                return None
            subs[pos], is_data = found
            datas += is_data
            avoid |= set() if is_data else subs[pos].used
        if not subs:
            return Expr(t.name)
        used = frozenset().union(*(s.used for s in subs))
        return Expr(f"{t.name}[{', '.join(s.text for s in subs)}]", used)

    def leaf(self, scope: dict, need: set) -> Expr:
        r = self.rng.random()
        if r < 0.06:
            return Expr(self.rng.choice(["2", "3", "0.5", "1.5"] + self.constants))
        if r < 0.10 and len(self.params) < 2:
            p = self.name(PARAM_NAMES)
            self.params[p] = self.rng.choice([0.5, 0.75, 1.25, 2.0])
            return Expr(p)
        if r < 0.12 and self.params:
            return Expr(self.rng.choice(sorted(self.params)))
        if r < 0.14 and self.sizes:
            return Expr(self.rng.choice(self.sizes))
        have = Counter(scope.values())
        plain = [t for t in self.floats() if not Counter(t.dims) - have]  # no data index needed
        recent = [t for t in self.defs[-2:] if t in plain] if self.rng.random() < 0.5 else []
        others = [t for t in self.floats() if t not in plain] if self.rng.random() < 0.1 else []
        for t in self.rng.sample(recent, len(recent)) + self.rng.sample(plain, len(plain)) + others:
            e = self.access(t, scope, need, data=DATA)
            if e is not None:
                return e
        return self.leaf_using(set(scope), scope)

    def leaf_using(self, indices: set, scope: dict) -> Expr:
        """A tensor access that uses every index in ``indices`` (a new input if none fits)."""
        if not indices:
            return Expr("2")
        for t in self.rng.sample(self.floats(), len(self.floats())):
            if len(t.dims) >= len(indices):
                e = self.access(t, scope, indices, data=0.0)
                if e is not None and indices <= e.used:
                    return e
        order = list(indices)
        self.rng.shuffle(order)
        t = self.new_input(tuple(scope[i] for i in order))
        return Expr(f"{t.name}[{', '.join(order)}]" if order else t.name, frozenset(order))

    # --- expressions -----------------------------------------------------------------------------
    def expr(self, scope: dict, depth: int, need: frozenset = frozenset()) -> Expr:
        """A real expression over the indices in scope that uses every index in ``need``."""
        return self.cover(self._expr(scope, depth, need), scope, need, positive=False)

    def _expr(self, scope: dict, depth: int, need: frozenset) -> Expr:
        if depth <= 0 or self.rng.random() < 0.2:
            return self.leaf(scope, need)
        r, d = self.rng.random(), depth - 1
        if r < 0.3:
            return self.unary(scope, d, need)
        if r < 0.6:
            a, b = self._expr(scope, d, need), self._expr(scope, d, need)
            op = self.rng.choice(["+", "-", "*", "*"])
            return Expr(f"{a.wrap()} {op} {b.wrap()}", a.used | b.used, False)
        if r < 0.7:
            a, p = self._expr(scope, d, need), self.positive(scope, d, need)
            return Expr(f"{a.wrap()} / {p.wrap()}", a.used | p.used, False)
        if r < 0.78:
            if self.rng.random() < 0.5:
                a = self._expr(scope, d, need)
                return Expr(f"{a.wrap()}**{self.rng.choice([2, 3])}", a.used, False)
            p = self.positive(scope, d, need)
            power = self.rng.choice(["(-1)", "(-1/2)", "(1/2)", "(3/2)", "(-2)"])
            return Expr(f"{p.wrap()}**{power}", p.used, False)
        if r < 0.9 or not self.extremes:
            return self.inline_sum(scope, d, need, positive=False)
        a, b = self._expr(scope, d, need), self._expr(scope, d, need)
        f = self.rng.choice(self.extremes)
        return Expr(f"{f}({a.text}, {b.text})", a.used | b.used)

    def tame(self) -> str:
        """A function defined for any real argument that does not grow fast."""
        names = [f for f in self.functions if f not in self.positive_only | GROWING]
        return self.rng.choice(names)

    def unary(self, scope: dict, depth: int, need: frozenset) -> Expr:
        names = [f for f in self.functions if not (self.growing and f in GROWING)]
        f = self.rng.choice(names)
        self.growing += f in GROWING
        if f in self.positive_only:
            a = self.positive(scope, depth, need)
        else:
            a = self._expr(scope, depth, need)
        self.growing -= f in GROWING
        return Expr(f"{f}({a.text})", a.used)

    def positive(self, scope: dict, depth: int, need: frozenset) -> Expr:
        """An expression that is positive (and away from 0) for every real input."""
        return self.cover(self._positive(scope, depth, need), scope, need, positive=True)

    def _positive(self, scope: dict, depth: int, need: frozenset) -> Expr:
        r, d = self.rng.random(), depth - 1
        if depth <= 0 or r < 0.1:
            if self.rng.random() < 0.5 or not self.sizes:
                return Expr(self.rng.choice(["2", "1/2", "3"]), atom=False)
            return Expr(self.rng.choice(self.sizes))
        if r < 0.45:
            options = [f for f in ("exp", "cosh", "sigmoid", "softplus") if f in self.functions]
            f = self.rng.choice(
                [o for o in options if not (self.growing and o in GROWING)] or ["exp"]
            )
            if f in GROWING and self.growing:
                a = self.leaf(scope, need)
                return Expr(f"{a.wrap()}**2 + 1", a.used, False)
            self.growing += f in GROWING
            a = self._expr(scope, d, need)
            self.growing -= f in GROWING
            return Expr(f"{f}({a.text})", a.used)
        if r < 0.6:
            a = self._expr(scope, d, need)
            c = self.rng.choice(["1", "1/2", "2"])
            return Expr(f"{a.wrap()}**2 + {c}", a.used, False)
        if r < 0.75:
            return self.inline_sum(scope, d, need, positive=True)
        if r < 0.9:
            a, b = self._positive(scope, d, need), self._positive(scope, d, need)
            op = self.rng.choice(["+", "*", "/"])
            return Expr(f"{a.wrap()} {op} {b.wrap()}", a.used | b.used, False)
        if "sqrt" in self.functions:
            a = self._positive(scope, d, need)
            return Expr(f"sqrt({a.text})", a.used)
        a = self._expr(scope, d, need)
        return Expr(f"Abs({a.text}) + 1", a.used, False)

    def inline_sum(self, scope: dict, depth: int, need: frozenset, positive: bool) -> Expr:
        bound = {
            self.index(scope): self.reduction_size() for _ in range(self.rng.choice([1, 1, 2]))
        }
        inner_scope = {**scope, **bound}
        if positive:
            body = self.positive(inner_scope, depth, need | frozenset(bound))
        else:
            body = self.expr(inner_scope, depth, need | frozenset(bound))
        return Expr(f"Sum({body.text}, {', '.join(bound)})", body.used - frozenset(bound))

    def reduction_size(self) -> str:
        dims = [d for t in self.floats() for d in t.dims]
        return self.rng.choice(dims) if dims and self.rng.random() < 0.8 else self.size()

    def cover(self, e: Expr, scope: dict, need: frozenset, positive: bool) -> Expr:
        """Make ``e`` use every index in ``need``: times exp(leaf) if positive, else + or *."""
        missing = set(need) - e.used
        if not missing:
            return e
        leaf = self.leaf_using(missing, scope)
        if positive:
            return Expr(f"{e.wrap()} * exp({leaf.text})", e.used | leaf.used, False)
        op = self.rng.choice(["+", "*", "-"])
        return Expr(f"{e.wrap()} {op} {leaf.wrap()}", e.used | leaf.used, False)

    # --- definitions -----------------------------------------------------------------------------
    def lhs(self, rank: int, like: Tensor | None = None) -> dict:
        """Output indices: fresh names over the dims of ``like`` (shuffled) or random sizes."""
        dims = list(like.dims) if like is not None else []
        self.rng.shuffle(dims)
        while len(dims) < rank:
            dims.append(self.size())
        scope: dict = {}
        for size in dims[:rank]:
            scope[self.index(scope)] = size
        return scope

    def elementwise(self, scope: dict) -> str:
        return self.expr(scope, self.rng.randint(1, 3), frozenset(scope)).text

    def contract(self, scope: dict) -> str:
        """Sum of a product of 2-3 factors over 0-2 bound indices, index orders at random."""
        count = self.rng.choice([0, 1, 1, 2]) if scope else self.rng.choice([1, 2])
        bound = {self.index(scope): self.reduction_size() for _ in range(count)}
        every = {**scope, **bound}
        groups: list[list[str]] = [[] for _ in range(self.rng.choice([2, 2, 3]))]
        for i in every:  # each index in at least one factor
            self.rng.choice(groups).append(i)
        for g in groups:
            extra = [i for i in every if i not in g]
            g += self.rng.sample(extra, self.rng.randint(0 if g else 1, min(1, len(extra))))
            self.rng.shuffle(g)
        factors = " * ".join(self.factor(g, every).text for g in groups)
        body = f"Sum({factors}, {', '.join(bound)})" if bound else factors
        if self.rng.random() < 0.3 and scope:
            keep = self.rng.sample(list(scope), self.rng.randint(1, len(scope)))
            body += f" + {self.factor(keep, scope).text}"  # a broadcast lower-rank term
        if self.rng.random() < 0.2:
            body = f"{self.tame()}({body})"
        return body

    def factor(self, indices: list[str], scope: dict) -> Expr:
        """``T[indices]``: an existing tensor of those sizes (any order) or a new input."""
        want = sorted(scope[i] for i in indices)
        fits = [t for t in self.floats() if sorted(t.dims) == want]
        if fits and self.rng.random() < 0.5:
            t, left, subs = self.rng.choice(fits), list(indices), []
            for d in t.dims:
                i = next(i for i in left if scope[i] == d)
                left.remove(i)
                subs.append(i)
            return Expr(f"{t.name}[{', '.join(subs)}]" if subs else t.name, frozenset(subs))
        t = self.new_input(tuple(scope[i] for i in indices))
        return Expr(f"{t.name}[{', '.join(indices)}]" if indices else t.name, frozenset(indices))

    def reduce(self, scope: dict) -> str:
        is_max = self.rng.random() < 0.35
        count = 1 if is_max and self.rng.random() < 0.9 else self.rng.choice([1, 1, 2])
        bound = {self.index(scope): self.reduction_size() for _ in range(count)}
        inner = self.expr({**scope, **bound}, self.rng.randint(1, 2), frozenset({**scope, **bound}))
        if is_max:
            return f"Max({inner.text}, {', '.join(bound)})"  # a reduce-max is the whole RHS
        body = f"Sum({inner.text}, {', '.join(bound)})"
        return body + (
            f" / {self.rng.choice(list(bound.values()))}" if self.rng.random() < 0.3 else ""
        )

    def normalize(self, scope: dict) -> str:
        top = self.expr(scope, self.rng.randint(0, 2), frozenset(scope))
        return f"{top.wrap()} / {self.inline_sum(scope, 1, frozenset(), positive=True).text}"

    def pick(self, scope: dict, source: Tensor) -> str:
        """An entry of ``source`` picked through an int64 tensor (x[n, t[n]], C[X[n, t], e])."""
        for _ in range(4):
            e = self.access(source, scope, set(scope), data=0.6)
            if e is not None and e.text.count("[") > 1:
                break
        else:
            e = self.access(source, scope, set(scope), data=1.0) or self.leaf(scope, frozenset())
        e = self.cover(e, scope, frozenset(scope), positive=False)
        if self.rng.random() < 0.3:
            return f"{self.tame()}({e.text})"
        return e.text

    def view(self) -> bool:
        """``name = view(src, ...)`` of a definition with 2-3 plain dims (stepwise ops only)."""
        sources = [t for t in self.defs if len(t.dims) >= 2 and all("*" not in d for d in t.dims)]
        if not sources:
            return False
        src = self.rng.choice(sources)
        cut = self.rng.randint(1, len(src.dims) - 1)
        dims = tuple(src.dims[:cut]) if self.rng.random() < 0.5 else ("*".join(src.dims[:cut]),)
        dims += ("*".join(src.dims[cut:]),)
        t = Tensor(self.name(FLOAT_NAMES + ["flat", "cat", "rows"]), dims)
        self.lines.append(f"{t.name} = view({src.name}, {', '.join(dims)})")
        self.defs.append(t)
        return True

    def definition(self, last: bool) -> None:
        rank = 0 if last and self.rng.random() < 0.3 else self.rng.randint(1, 3)
        kinds = {k: w for k, w in KINDS.items() if rank or k in ("reduce", "contract")}
        kind = self.rng.choices(list(kinds), weights=list(kinds.values()))[0]
        like = self.rng.choice(self.defs[-1:] + self.floats()) if self.rng.random() < 0.7 else None
        if kind == "gather":
            like = self.new_input((self.size(), self.size()))
        if kind in ("pick", "gather") and like is not None:
            rank = max(1, len(like.dims) - 1)  # one dimension picked through an int tensor
        scope = self.lhs(rank, like if kind in ("pick", "gather", "elementwise") else None)
        if kind in ("pick", "gather"):
            body = self.pick(scope, like if like is not None else self.rng.choice(self.floats()))
        else:
            body = getattr(self, kind)(scope)
        name = self.name(FLOAT_NAMES + ["out", "loss", "tmp", "act2", "res"])
        lhs = f"{name}[{', '.join(scope)}]" if scope else name
        self.lines.append(f"{lhs} = {body}")
        self.defs.append(Tensor(name, tuple(scope.values())))


def random_op(seed: int, attempt: int = 0, max_definitions: int = 4) -> Op:
    """The op of one fuzz case: 1 to ``max_definitions`` definitions, names and shapes at random.

    ``attempt`` > 0 draws another op for the same seed (when the first is ill-conditioned).
    """
    rng = random.Random(f"{seed}/{attempt}")
    b = _Builder(rng, stepwise=rng.random() < 0.25, functions=available_functions())
    b.extremes = elementwise_extremes()
    b.positive_only, b.constants = positive_argument(), constants()
    for _ in range(rng.randint(1, 2)):
        b.new_input(tuple(b.size() for _ in range(rng.randint(1, 3))))
    count = rng.randint(1, max_definitions)
    for k in range(count):
        if b.stepwise and 0 < k < count - 1 and rng.random() < 0.5 and b.view():
            continue
        b.definition(last=k == count - 1)
    inputs = [_input_text(t) for t in b.inputs]
    return Op(
        name=f"fuzz{seed}",
        inputs=inputs,
        definitions=b.lines,
        params=dict(sorted(b.params.items())),
        doc=f"fuzz case, seed {seed}",
        stepwise=b.stepwise,
    )


def _input_text(t: Tensor) -> str:
    text = f"{t.name}[{', '.join(t.dims)}]" if t.dims else t.name
    return text + (": int64" if t.integer else "")


def op_source(op: Op, comment: str = "") -> str:
    """The op as an op file (what ``tests/regressions/`` holds)."""
    lines = [f'"""{op.doc}"""' if op.doc else '"""A fuzz case."""', ""]
    lines += [f"# {c}" for c in comment.splitlines()] if comment else []
    lines += ["from derive import Op", "", "OP = Op(", f"    name={op.name!r},"]
    lines += [f"    doc={op.doc!r},", "    inputs=["] + [f"        {i!r}," for i in op.inputs]
    lines += ["    ],", "    definitions=["] + [f"        {d!r}," for d in op.definitions]
    lines += ["    ],"]
    if op.params:
        lines.append(f"    params={dict(op.params)!r},")
    if op.stepwise:
        lines.append("    stepwise=True,")
    return "\n".join(lines + [")", ""])


def case_op(seed: int, max_definitions: int = 4) -> Op:
    """``random_op`` for this seed, drawn again while SymPy's own simplification leaves it invalid
    (``x[i] - x[i]`` is 0: index i then subscripts nothing)."""
    from derive.errors import DerivationError
    from derive.language import parse

    for attempt in range(20):
        op = random_op(seed, attempt, max_definitions)
        try:
            parse(op)
            return op
        except DerivationError:
            continue
    return op
