"""Random ops in the op language, one per seed, valid by construction.

An op is built definition by definition, each of one kind (element-wise chain, contraction of
2-3 tensors with random index orders, Sum/Max reduction, division by a reduction, data-index
pick or gather, and in stepwise ops a view); every index on the left is used on the right,
every Sum/Max index in its body. Leaves prefer recent definitions, so tensors are used again.
An op file alone says how to draw its inputs (``fuzz.check.draw_inputs``).
"""

from __future__ import annotations

import dataclasses
import random
import textwrap

from derive.language import Graph, Op
from fuzz.functions import (
    available_functions,
    elementwise_extremes,
    fast_growing,
    positive_argument,
    positive_valued,
)
from fuzz.functions import constants as named_constants
from fuzz.leaves import FLOAT_NAMES, PARAM_NAMES, SIZE_NAMES, Expr, Tensor
from fuzz.windows import Windows

GUARDED = 0.35  # a pick under where(t[n] >= 0, ..., 0)
# a guard's spellings, the read t and the guarded x: any negative entry ignored, or exactly
# one (cross-entropy's ignore_index: makemore's -1, torch's default -100)
GUARDS = (
    "where({t} >= 0, {x}, 0)",
    "where({t} != -1, {x}, 0)",
    "where(-1 != {t}, {x}, 0)",
    "where({t} == -1, 0, {x})",
    "where({t} < 0, 0, {x})",
    "where({t} != -100, {x}, 0)",
)
DATA_EQUALITY = 0.3  # a pick under where(c != t[n], ..., 0) or ==
HEADS = 0.15  # an op that starts with a view of an input into heads (derived sizes)
WHOLE_INPUT = 0.15  # a 0-d float input
WHOLE_DEFINITION = 0.12  # a 0-d definition before the last
KINDS = {  # kind of definition -> weight
    "elementwise": 5,
    "contract": 5,
    "reduce": 4,
    "normalize": 2,
    "pick": 2,
    "gather": 1,
    "softmax": 1,
}


class _Builder(Windows):
    """Definitions of each kind, appended to the op being built."""

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
        if bound:
            factors = self.segment(factors, every)
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
        return self.read_new(indices, scope)

    def reduce(self, scope: dict) -> str:
        is_max = self.rng.random() < 0.35
        count = 1 if is_max and self.rng.random() < 0.9 else self.rng.choice([1, 1, 2])
        bound = {self.index(scope): self.reduction_size() for _ in range(count)}
        inner = self.expr({**scope, **bound}, self.rng.randint(1, 2), frozenset({**scope, **bound}))
        if is_max:
            return f"Max({inner.text}, {', '.join(bound)})"  # a reduce-max is the whole RHS
        body = f"Sum({self.segment(inner.text, {**scope, **bound})}, {', '.join(bound)})"
        return body + (
            f" / {self.rng.choice(list(bound.values()))}" if self.rng.random() < 0.3 else ""
        )

    def normalize(self, scope: dict) -> str:
        top = self.expr(scope, self.rng.randint(0, 2), frozenset(scope))
        return f"{top.wrap()} / {self.inline_sum(scope, 1, frozenset(), positive=True).text}"

    def pick(self, scope: dict, source: Tensor) -> str:
        """An entry of ``source`` picked through an int64 tensor (x[n, t[n]], C[X[n, t], e]),
        sometimes guarded, ``where(t[n] >= 0, x[n, t[n]], 0)`` or another spelling of
        :data:`GUARDS`: an int tensor read only under such guards may then hold -1, or the
        value its ``!=`` ignores (``fuzz.check.draw_inputs``)."""
        reads = len(self.data_reads)
        for _ in range(4):
            e = self.access(source, scope, set(scope), data=0.6)
            if e is not None and e.text.count("[") > 1:
                break
        else:
            e = self.access(source, scope, set(scope), data=1.0) or self.leaf(scope, frozenset())
        e = self.cover(e, scope, frozenset(scope), positive=False)
        text = e.text
        if self.rng.random() < GUARDED:  # makemore's padding: a -1 target is ignored
            for read in dict.fromkeys(self.data_reads[reads:]):
                text = self.guards.choice(GUARDS).format(t=read, x=text)
        if self.data_reads[reads:] and self.equality.random() < DATA_EQUALITY:
            # a margin loss's sum over the classes but the target: where(c != t[n], ...)
            i, op = self.equality.choice(sorted(scope)), self.equality.choice(["==", "!="])
            text = f"where({i} {op} {self.data_reads[reads]}, {text}, 0)"
        if self.rng.random() < 0.3:
            return f"{self.tame()}({text})"
        return text

    def softmax(self, scope: dict) -> str:
        """A masked softmax as attention writes it: ``s = where(j <= i, e, -inf)``, its Max over
        j, ``exp(s - max)`` over its Sum. j = 0 is never masked, so no row is all -inf. The
        lines before the returned body are appended here; the body is the normalised one."""
        j = self.rng.choice(sorted(scope))
        others = [i for i in scope if i != j]
        i = self.rng.choice(others)
        rest = [k for k in scope if k != j]
        body = self.expr(scope, self.rng.randint(1, 2), frozenset(scope)).text
        full, row = ", ".join(scope), ", ".join(rest)
        s, m, e = (self.name(FLOAT_NAMES + ["scores", "att", "wei"]) for _ in range(3))
        self.lines.append(f"{s}[{full}] = where({j} <= {i}, {body}, -inf)")
        self.lines.append(f"{m}[{row}] = Max({s}[{full}], {j})")
        self.lines.append(f"{e}[{full}] = exp({s}[{full}] - {m}[{row}])")
        self.defs += [Tensor(s, tuple(scope.values())), Tensor(m, tuple(scope[k] for k in rest))]
        self.defs.append(Tensor(e, tuple(scope.values())))
        j2 = self.index(scope)
        summed = ", ".join(j2 if k == j else k for k in scope)
        return f"{e}[{full}] / Sum({e}[{summed}], {j2})"

    def heads(self) -> None:
        """``y = view(x, ..., H, D)`` of a new input x[..., C], with derived sizes H = k and
        D = C / k (k an int param): attention's heads. An op that then needs an input over H
        or D (which no input may have) is drawn again (``case_op``)."""
        k = self.name(PARAM_NAMES)
        self.params[k] = self.rng.choice([2, 3])
        c, h, d = (self.name(SIZE_NAMES) for _ in range(3))
        self.sizes.append(c)
        self.derived |= {h: k, d: f"{c} / {k}"}
        lead = tuple(self.size() for _ in range(self.rng.randint(0, 1)))
        x = self.new_input((*lead, c))
        y = Tensor(self.name(FLOAT_NAMES + ["heads", "qh"]), (*lead, h, d))
        self.lines.append(f"{y.name} = view({x.name}, {', '.join(y.dims)})")
        self.defs.append(y)

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
        if self.windowed():  # --affine only: a convolution, pool or cumulative sum
            return
        rank = 0 if last and self.rng.random() < 0.3 else self.rng.randint(1, 3)
        if not last and self.later.random() < WHOLE_DEFINITION:
            rank = 0  # a 0-d definition the next ones may read whole
        kinds = {k: w for k, w in KINDS.items() if rank or k in ("reduce", "contract")}
        if rank < 2:
            kinds.pop("softmax", None)
        kind = self.rng.choices(list(kinds), weights=list(kinds.values()))[0]
        like = self.rng.choice(self.defs[-1:] + self.floats()) if self.rng.random() < 0.7 else None
        if kind == "gather":
            like = self.new_input((self.size(), self.size()))
        if kind in ("pick", "gather") and like is not None:
            rank = max(1, len(like.dims) - 1)  # one dimension picked through an int tensor
        scope = self.lhs(
            rank, like if kind in ("pick", "gather", "elementwise", "softmax") else None
        )
        if kind in ("pick", "gather"):
            body = self.pick(scope, like if like is not None else self.rng.choice(self.floats()))
        else:
            body = getattr(self, kind)(scope)
        name = self.name(FLOAT_NAMES + ["out", "loss", "tmp", "act2", "res"])
        lhs = f"{name}[{', '.join(scope)}]" if scope else name
        self.lines.append(f"{lhs} = {body}")
        self.defs.append(Tensor(name, tuple(scope.values())))


def random_op(
    seed: int,
    attempt: int = 0,
    max_definitions: int = 4,
    affine: bool = False,
    windows: bool = False,
    powers: bool = False,
    constants: bool = False,
    entries: bool = False,
    segments: bool = False,
) -> Op:
    """The op of one fuzz case: 1 to ``max_definitions`` definitions, names and shapes at random.

    ``attempt`` > 0 draws another op for the same seed (when the first is ill-conditioned).
    ``affine`` adds affine subscripts and windows (``fuzz.affine``, ``fuzz.windows``), drawn from
    a stream of their own: without it, every seed's op is the one it always was. ``windows``
    (affine too) widens them: offsets to 4, strides, dilations, paddings and int params to 3,
    kernels given by int params, grouped convolutions; from a fifth stream, so that no
    ``--affine`` seed changes. ``powers`` draws some powers with an exponent that is not a
    number (``relu(a)**alpha``, ``alpha**(a)``): a mode of its own, as each seed's op changes.
    ``constants`` draws some leaves as decimals far from 1 (``-10000.0``, ``1000.5``), from a
    stream of its own: a mode of its own, as each seed's op changes. ``entries`` reads some
    axes of run-time length at one entry (``x[n, 0]``, ``x[n, M - 1]``), from a stream of its
    own: a mode of its own too, as the seeds it fires in draw another op. ``segments`` puts
    some Sums' bodies under an equality of compared-only int data and an index
    (``where(k[n] == g, .., 0)``: a segment sum, a pick), from a stream of its own: a mode
    of its own.
    """
    affine = affine or windows
    rng = random.Random(f"{seed}/{attempt}")
    b = _Builder(rng, stepwise=rng.random() < 0.25, functions=available_functions())
    b.extremes = elementwise_extremes()
    b.positive_only, b.constants = positive_argument(), named_constants()
    b.positive_valued, b.fast_growing = positive_valued(), fast_growing()
    for _ in range(rng.randint(1, 2)):
        b.new_input(tuple(b.size() for _ in range(rng.randint(1, 3))))
    b.later = random.Random(f"{seed}/{attempt}/0-d")  # 0-d tensors, float conditions
    b.equality = random.Random(f"{seed}/{attempt}/==")
    b.guards = random.Random(f"{seed}/{attempt}/guards")
    b.affine = random.Random(f"{seed}/{attempt}/affine") if affine else None
    b.wide = random.Random(f"{seed}/{attempt}/windows") if windows else None
    b.numbers = random.Random(f"{seed}/{attempt}/numbers") if windows else None
    # --powers: a power of a param exponent, or a param raised to a tensor (its own stream)
    b.exponents = random.Random(f"{seed}/{attempt}/exponents") if powers else None
    b.large = random.Random(f"{seed}/{attempt}/constants") if constants else None
    b.entries = random.Random(f"{seed}/{attempt}/entries") if entries else None
    b.segments = random.Random(f"{seed}/{attempt}/segments") if segments else None
    if b.later.random() < WHOLE_INPUT:
        b.new_input(())
    if rng.random() < HEADS:
        b.heads()
    count = rng.randint(1, max_definitions)
    for k in range(count):
        if b.stepwise and 0 < k < count - 1 and rng.random() < 0.5 and b.view():
            continue
        b.definition(last=k == count - 1)
    inputs = [_input_text(t) for t in b.inputs]
    op = Op(
        name=f"fuzz{seed}",
        inputs=inputs,
        definitions=b.lines,
        params=dict(sorted(b.params.items())),
        sizes=dict(b.derived),
        doc=f"fuzz case, seed {seed}"
        + _mode(affine, windows, powers, constants, entries, segments),
        stepwise=b.stepwise,
    )
    return dataclasses.replace(op, ranges=b.declared_ranges(op)) if affine else op


def _mode(
    affine: bool,
    windows: bool,
    powers: bool,
    constants: bool = False,
    entries: bool = False,
    segments: bool = False,
) -> str:
    flags = ["--windows"] if windows else ["--affine"] if affine else []
    flags += ["--powers"] if powers else []
    flags += ["--constants"] if constants else []
    flags += ["--entries"] if entries else []
    flags += ["--segments"] if segments else []
    return f" ({' '.join(flags)})" if flags else ""


def _input_text(t: Tensor) -> str:
    text = f"{t.name}[{', '.join(t.dims)}]" if t.dims else t.name
    return text + (": int64" if t.integer else "")


def op_source(op: Op, comment: str = "") -> str:
    """The op as an op file (what ``tests/regressions/`` holds)."""
    lines = [f'"""{op.doc}"""' if op.doc else '"""A fuzz case."""', ""]
    for line in comment.splitlines():  # black leaves comments alone: wrap them to 100 columns
        lines += [f"# {part}" for part in textwrap.wrap(line, 96, break_on_hyphens=False)]
    lines += ["from derive import Op", "", "OP = Op(", f"    name={op.name!r},"]
    lines += [f"    doc={op.doc!r},", "    inputs=["] + [f"        {i!r}," for i in op.inputs]
    lines += ["    ],", "    definitions=["] + [f"        {d!r}," for d in op.definitions]
    lines += ["    ],"]
    if op.params:
        lines.append(f"    params={dict(op.params)!r},")
    if op.sizes:
        lines.append(f"    sizes={dict(op.sizes)!r},")
    if op.ranges:
        lines.append(f"    ranges={dict(op.ranges)!r},")
    if op.stepwise:
        lines.append("    stepwise=True,")
    return "\n".join(lines + [")", ""])


def case_op(
    seed: int,
    max_definitions: int = 4,
    affine: bool = False,
    windows: bool = False,
    powers: bool = False,
    constants: bool = False,
    entries: bool = False,
    segments: bool = False,
) -> Op:
    """``random_op`` for this seed, drawn again while SymPy's own simplification leaves it invalid
    (``x[i] - x[i]`` is 0: index i then subscripts nothing). With ``windows``, a derived size
    that names an input's dimension is kept (grouped convolutions need it)."""
    from derive.errors import DerivationError
    from derive.language import parse

    for attempt in range(20):
        op = random_op(
            seed, attempt, max_definitions, affine, windows, powers, constants, entries, segments
        )
        try:  # as the language read text when the seeds were recorded: each keeps its op
            g = parse(op, text_ranges=False)
        except DerivationError:
            continue
        if windows or not _names_a_dimension(g):
            return op
    return op


def _names_a_dimension(g: Graph) -> bool:
    """A derived size named like an input's dimension (``Z = A / scale`` beside ``idx[Z]``):
    the language refused it until grouped convolutions (a check of the input then), so the
    generator still draws again there (but with --windows) and every recorded seed keeps the op
    it drew."""
    dims = {s for name in g.inputs for d in g.tensors[name].dims for s in d.free_symbols}
    return bool(set(g.derived) & dims)
