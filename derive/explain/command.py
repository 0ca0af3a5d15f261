"""The ``show`` command's loop: each op's rendering from the cache, or derived on a miss.

Standard library only until an op misses: a run whose every op is cached imports neither SymPy
nor the engine (:mod:`~derive.explain.cache`). A miss derives the op once
(:func:`~derive.explain.show.explain_file`) and stores what it printed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from derive.errors import DerivationError
from derive.explain.cache import ShowCache
from derive.explain.catalogue import resolve


def _rendered(op: str, mode: str, width: int, cache: ShowCache | None, what: str = "") -> str:
    """One op as ``mode`` prints it; for JSON, its record (compact), which the caller lays out
    alone or in a list. ``what``: "" for the derivation of the backward, "jvp" for the tangent
    map, "order2" for the second order (:mod:`~derive.explain.orders`)."""
    path = resolve(op)
    key = cache.key(path, mode, width, what) if cache is not None else None
    found = cache.get(key) if key is not None else None
    if found is not None:
        return found
    from derive.explain import show  # SymPy and the engine: only now

    if what:
        from derive.emit.generate import emit, load_op
        from derive.explain.orders import render_order

        out = render_order(emit(load_op(path), "generated"), what == "jvp", mode, width)
        out = json.dumps(json.loads(out)) if mode == "json" else out
    else:
        ex = show.explain_file(path)
        out = json.dumps(show.record(ex)) if mode == "json" else show.render(ex, mode, width)
    if key is not None:
        cache.put(key, out)
    return out


def show_many(
    ops: list[str],
    mode: str = "text",
    width: int = 100,
    cache: ShowCache | None = None,
    what: str = "",
) -> Iterator[str | DerivationError]:
    """Each op's rendering as it is ready, a blank line between ops, or the error that stopped
    that op (the others go on). JSON of several ops is one list of records, yielded once all
    are done."""
    records, first = [], True
    for op in ops:
        try:
            out = _rendered(op, mode, width, cache, what)
        except DerivationError as exc:
            yield exc
            continue
        if mode == "json":
            records.append(json.loads(out))
            if len(ops) == 1:
                yield json.dumps(records[0], indent=2) + "\n"
            continue
        yield ("" if first else "\n") + out
        first = False
    if mode == "json" and len(ops) > 1:  # a list even when every op failed: still JSON
        yield json.dumps(records, indent=2) + "\n"
