"""The generator's vocabulary: names, sizes, inputs, and tensor accesses (the leaves).

Every subscript is an index whose range is the size of the dimension it indexes, or an entry of
an int64 input whose values lie in that range (``x[n, t[n]]``, ``C[X[n, k], d]``). Names of
tensors, sizes and indices are drawn at random from pools (issue 9: the lowering once depended
on them); an index never shares a name with a tensor, size or param of the same op.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

SIZE_NAMES = "N M K D H I J T V P R L G F U Y Z A B Q".split()
INDEX_NAMES = "a b c d f g h i j k l m n o p q r s t u v w x y z aa bb ij kk mm n1 t2".split()
FLOAT_NAMES = "x y z w h u v g s Wq Zz W1 b2 gain logits emb act prob W C Kx a1 hid".split()
INT_NAMES = "idx tgt X Y ids labels pos cls".split()
PARAM_NAMES = "eps alpha scale tau lam".split()
RESERVED = {"e", "E", "pi", "batch", "Batch", "view", "Sum", "Max", "Min", "S", "O"}

DATA = 0.02  # an index of an access replaced by an int tensor entry: x[n, t[n]]
ENTRIES = 0.03  # of subscripts over a size known at run time: one entry of the axis
SEGMENTS = 0.5  # of Sums (--segments): the body under where(k[n] == g, .., 0), k compared only
DIAGONAL = 0.03  # x[i, i]: a repeated index in one access
MULTI_DATA = 0.05  # a second data subscript in one access: x[t[n], u[n]]


# --constants: numbers past exp's comfortable range, written as users write masks and shifts
# (SymPy takes a Float term out of its exp as a factor: exp(x - 10000.0) is 1e-4343 exp(x))
LARGE_NUMBERS = ["-10000.0", "1000.5", "-1e9", "700.0", "-800.0", "64.5", "1e4"]
LARGE_SHARE = 0.08  # of the leaves drawn


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
class Leaves:
    """The state of one op being built, and its leaves."""

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
    # what the registry says of the functions (fuzz.functions): argument must be > 0, value is
    # > 0 for every real argument (in the registry's order: drawn by index), grows exponentially
    positive_only: set = field(default_factory=set)
    positive_valued: tuple = ()
    fast_growing: frozenset = frozenset()
    constants: list = field(default_factory=list)  # pi, e when the language has them
    growing: int = 0  # inside exp/cosh/...: no second growing function (float64 overflow)
    index_names: set = field(default_factory=set)  # every index used: tensors avoid them
    derived: dict = field(default_factory=dict)  # derived sizes: {"D": "C / k"}
    data_reads: list = field(default_factory=list)  # every int access made (t[n]), in order
    # draws for constructs added later (0-d tensors, float conditions), a stream of their own:
    # an op that has none of them is the op its seed drew before they were added
    later: random.Random = field(default_factory=random.Random)
    # == and != in conditions (index against index, index against int data), a third stream
    equality: random.Random = field(default_factory=random.Random)
    # how a guarded pick's guard is spelt (t[n] >= 0, t[n] != -1, ...), a stream of its own:
    # a seed's op is the one it drew before the spellings were added, up to its guards' text
    guards: random.Random = field(default_factory=random.Random)
    # affine subscripts, windows and declared ranges (fuzz.affine, fuzz.windows), a fourth
    # stream: None unless --affine, so that no seed's op changes without it
    affine: random.Random | None = None
    # wider windows, grouped convolutions and derived sizes as input dims (--windows), a fifth
    # stream: None unless --windows, so that no --affine seed's op changes without it
    wide: random.Random | None = None
    # indices read as numbers (slope * (i - j)), a sixth stream: None unless --windows
    numbers: random.Random | None = None
    # decimal constants far from 1 (a BERT mask's -10000.0, a shift of 1000.5), a stream of
    # its own: None unless --constants (a leaf of its drawing: another op for each seed)
    large: random.Random | None = None
    # one entry of an axis whose size is known only at run time (h[b, 0, c], h[b, T - 1, c]),
    # a stream of its own: None unless --entries (where it fires, the seed draws another op)
    entries: random.Random | None = None
    # an equality of compared-only int data and an index, where(k[n] == g, .., 0), under a
    # Sum (a segment sum, a GNN's messages), a stream of its own: None unless --segments
    segments: random.Random | None = None
    parents: dict = field(default_factory=dict)  # a window's derived size -> its axis: L -> T
    forms: dict = field(default_factory=dict)  # size -> the subscript of a window being drawn
    ranged: dict = field(default_factory=dict)  # index -> size, each index an affine read uses

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
        chosen = self.rng.choice(self.index_pool(scope))
        self.index_names.add(chosen)
        return chosen

    def index_pool(self, scope: dict) -> list[str]:
        return [n for n in INDEX_NAMES if n not in self.taken and n not in scope]

    def new_input(self, dims: tuple[str, ...]) -> Tensor:
        t = Tensor(self.name(FLOAT_NAMES), dims)
        self.inputs.append(t)
        return t

    def new_int(self, dims: tuple[str, ...], bound: str) -> Tensor:
        t = Tensor(self.name(INT_NAMES), dims, integer=True, bound=bound)
        self.inputs.append(t)
        return t

    def segment(self, body: str, every: dict) -> str:
        """``body`` under ``where(k[..] == g, body, 0)`` (or ``where(k[..] != g, 0, body)``)
        with g one of the indices ``every`` holds (a Sum's and the scope's) and k a new int
        input over one or two of the others, compared only: no subscript, so its entries may
        lie outside g's axis (``fuzz.check.draw_inputs``), which match no g. Where the Sum
        runs over k's indices and g is free, a segment sum; where it runs over g, a pick.
        With ``--segments`` only, from a stream of its own."""
        if self.segments is None or len(every) < 2 or self.segments.random() >= SEGMENTS:
            return body
        names = sorted(every)
        g = self.segments.choice(names)
        others = [i for i in names if i != g]
        chosen = self.segments.sample(others, self.segments.randint(1, min(2, len(others))))
        t = Tensor(self.name(INT_NAMES), tuple(every[i] for i in chosen), integer=True)
        self.inputs.append(t)
        read = f"{t.name}[{', '.join(chosen)}]"
        if self.segments.random() < 0.7:
            return f"where({read} == {g}, {body}, 0)"
        return f"where({read} != {g}, 0, {body})"

    def floats(self) -> list[Tensor]:
        return [t for t in self.inputs if not t.integer] + self.defs

    # --- leaves ----------------------------------------------------------------------------------
    def subscript(
        self, size: str, scope: dict, need: set, data: float, avoid: set
    ) -> tuple[Expr, bool] | None:
        """An index of this size not yet in the access, or an int tensor entry indexing it.

        Returns the subscript and whether it is a data subscript.
        """
        if size.isdigit():  # a numeric dim (W[C, 3]) is read at a constant: W[c, 2]
            return Expr(str(self.rng.randrange(int(size)))), False
        plain = [i for i, s in scope.items() if s == size and i not in avoid]
        if (
            self.entries is not None
            and size not in self.derived
            and not [i for i in plain if i in need]
            and self.entries.random() < ENTRIES
        ):  # one entry of an axis known at run time: h[b, 0, c], h[b, T - 1, c]
            return Expr(self.entries.choice(["0", "1", f"{size} - 1"])), False
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
        e = self.access(t, scope, need, data=0.0)
        if e is not None:
            self.data_reads.append(e.text)
        return e

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
        if self.large is not None and self.large.random() < LARGE_SHARE:
            return Expr(self.large.choice(LARGE_NUMBERS))
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
        if r < 0.17 and scope:
            return self.constant_subscript(scope)
        have = Counter(scope.values())
        plain = [t for t in self.floats() if not Counter(t.dims) - have]  # no data index needed
        recent = [t for t in self.defs[-2:] if t in plain] if self.rng.random() < 0.5 else []
        others = [t for t in self.floats() if t not in plain] if self.rng.random() < 0.05 else []
        for t in self.rng.sample(recent, len(recent)) + self.rng.sample(plain, len(plain)) + others:
            e = self.access(t, scope, need, data=DATA)
            if e is not None:
                return e
        return self.leaf_using(set(scope), scope)

    def constant_subscript(self, scope: dict) -> Expr:
        """A new input with a numeric dim read at a constant (``Wqkv``'s ``Wh[c, 1, h, d]``):
        its gradient is stacked from the slices read, zeros where none is."""
        order = self.rng.sample(sorted(scope), self.rng.randint(1, min(2, len(scope))))
        dims = [scope[i] for i in order]
        at = self.rng.randint(0, len(dims))
        dims.insert(at, self.rng.choice(["2", "3"]))
        t = self.new_input(tuple(dims))
        e = self.access(t, scope, set(order), data=0.0)
        return e if e is not None else self.leaf_using(set(order), scope)

    def leaf_using(self, indices: set, scope: dict) -> Expr:
        """A tensor access that uses every index in ``indices`` (a new input if none fits)."""
        if not indices:
            return Expr("2")
        for t in self.rng.sample(self.floats(), len(self.floats())):
            if len(t.dims) >= len(indices):
                e = self.access(t, scope, indices, data=0.0)
                if e is not None and indices <= e.used:
                    return e
        order = sorted(indices)  # a set: sorted first, so PYTHONHASHSEED cannot change the op
        self.rng.shuffle(order)
        return self.read_new(order, scope)

    def read_new(self, order: list[str], scope: dict) -> Expr:
        """A new input over the sizes of ``order``, read at those indices: ``x[i, j]``."""
        t = self.new_input(tuple(scope[i] for i in order))
        return Expr(f"{t.name}[{', '.join(order)}]" if order else t.name, frozenset(order))
