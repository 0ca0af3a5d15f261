"""fuzz case, seed 13200619 (--windows --powers --constants --entries --segments)"""

# Found by `python -m fuzz --windows --powers --constants --entries --segments --compiled` (case
# seed 13200619) on 1a6b159, shrunk from 6 definition(s).
# Failed: WRONG (compiled gradient value: dWq off by 0.824 (relative), dynamic shapes)
# Open: a silently wrong gradient under dynamic shapes. Inductor (torch 2.13) fuses the backward
# into one C++ kernel whose loops run in the order zero-fill of the scatter's buffer, the loop
# computing dWq = A + B (reading that buffer: zeros), then the scatter's atomic adds into it; B's
# adds are lost. A or B returned alone is right, as is A + (a tensor no scatter writes); the same
# with the scatter written as index_put, index_add or scatter_add. Not cut down to plain torch; no
# workaround written.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it), and
# fuzz.compiled.run_compiled_case(OP, SEED) too (tests/modules/test_compiled.py).
from derive import Op

OP = Op(
    name="fuzz13200619",
    doc="fuzz case, seed 13200619 (--windows --powers --constants --entries --segments)",
    inputs=[
        "s[N]",
        "g[Y, V]",
        "w",
        "prob[V, J]",
        "emb[3, J]",
        "W[I, N]",
        "Wq[M, J, L, P]",
        "cls[V, Z]: int64",
        "tgt[V, Z]: int64",
        "ids[V]: int64",
    ],
    definitions=[
        "Kx = view(prob, M, L, J)",
        "u[kk, n1, c] = Sum(Kx[kk, t2, c + v]*Wq[kk, n1, t2, v]*Sum(Wq[tgt[i, c], c + v, cls[y, c], ids[stride46 + y]], i, y), t2, v)",
    ],
    params={
        "dil": 2,
        "eps": 3,
        "grp": 2,
        "off": 2,
        "pad": 2,
        "step": 1,
        "stride": 3,
        "stride46": 2,
    },
    sizes={
        "K": "eps",
        "B": "J / eps",
        "T": "(V - N) // 2 + 1",
        "I": "step",
        "G": "(((V - N) // 2 + 1) + 2*off - 2*((step) - 1) - 1) // pad + 1",
        "M": "grp",
        "L": "V / grp",
        "P": "stride",
        "Z": "J - (stride) + 1",
    },
    ranges={"y": "V"},
)

SEED = 13200619
