"""Every slice of an axis taken in one call: ``q, k, v = whole.unbind(0)``.

A family of sibling contractions is computed whole and each sibling read as its slice
(:func:`~derive.ir.passes.merged_siblings`): q, k and v of attention are ``whole[0]``,
``whole[1]`` and ``whole[2]``, three ``select`` calls. Where consecutive statements name the
slices 0 .. n - 1 of one axis of one tensor, in order, and n is that axis's length, one
``unbind`` gives the same views (the same storage, strides and offsets) in one aten call. Run
last, on the printed form's statements: the other passes read each slice as a Slice.
"""

from __future__ import annotations

from derive.ir import nodes as ir


def unbound(block: list[ir.Statement]) -> list[ir.Statement]:
    """``block`` with each run of statements ``n_k = t[.., k]`` (k = 0 .. n - 1, the whole axis
    of length n) as one ``n_0, .., n_{n-1} = t.unbind(dim)``."""
    out: list[ir.Statement] = []
    k = 0
    while k < len(block):
        run = _run(block, k)
        if run is None:
            out.append(block[k])
            k += 1
            continue
        first: ir.Slice = block[k].value  # type: ignore[attr-defined]
        dim = next(p for p, at in enumerate(first.at) if at is not None)
        targets = tuple(s.targets[0] for s in block[k : k + run])  # type: ignore[attr-defined]
        out.append(ir.Assign(targets, ir.Unbind(first.arg, dim, axes=first.axes)))
        k += run
    return out


def _slice(s: ir.Statement) -> tuple[ir.Slice, int, int] | None:
    """(the slice, its axis, its constant) where ``s`` names one slice of a whole axis."""
    if not (isinstance(s, ir.Assign) and len(s.targets) == 1 and isinstance(s.value, ir.Slice)):
        return None
    v = s.value
    at = [(p, c) for p, c in enumerate(v.at) if c is not None]
    if len(at) != 1 or len(v.sizes) != len(v.at) or not isinstance(v.arg, ir.Ref):
        return None
    p, c = at[0]
    return v, p, c


def _run(block: list[ir.Statement], k: int) -> int | None:
    """The length of the run of slices 0 .. n - 1 starting at statement ``k``, where it is
    the whole axis (n its length) and no slice's name is read or written inside the run; None
    where there is none."""
    head = _slice(block[k])
    if head is None or head[2] != 0:
        return None
    v, p, _ = head
    n = v.sizes[p]
    if not (n.is_Integer and int(n) > 1) or k + int(n) > len(block):
        return None
    names: list[str] = []
    for j, s in enumerate(block[k : k + int(n)]):
        part = _slice(s)
        if part is None or part[1:] != (p, j) or part[0].arg != v.arg:
            return None
        if len(part[0].at) != len(v.at) or part[0].axes != v.axes:
            return None
        if s.reads & set(names) or v.arg.name in s.writes:  # type: ignore[union-attr]
            return None
        names.append(s.targets[0])  # type: ignore[attr-defined]
    return int(n)
