"""fuzz case, seed 810585, shrunk by hand to its one definition"""

# Found by `python -m fuzz` (case seed 810585) on 5c8005b, and 810848 alike (both on the session's
# first commit too). Refused: forward mode not derived, "lowering ... lost its free index ['b']
# (an engine bug)". The tangent's product of the gate where(c, 1, 0) and
# Heaviside(where(c, v[t2] + emb[b], L emb[b]) - emb[b]) is rewritten as where(c, ..., 0) with
# the branch simplified under c: Heaviside(v[t2]), which no longer reads b. The rewrite is now
# expanded along the indices it dropped (derive/lower/context.py, Context.spread).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz810585",
    doc="fuzz case, seed 810585",
    inputs=[
        "v[Z]",
        "Kx[Z]",
        "emb[L]",
    ],
    definitions=[
        "gain[b, t2] = maximum(emb[b], where(Kx[t2] + Kx[t2] > 0, v[t2] + emb[b], L * emb[b]))",
    ],
)

SEED = 810585
