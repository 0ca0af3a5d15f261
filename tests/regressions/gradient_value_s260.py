"""fuzz case, seed 260 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 260) on 389f874, not shrunk.
# Failed: WRONG (gradient value: dhid off by inf (relative)): a zero-padded read past the end
# dropped its range condition beside a quotient, 0 / 0 there.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz260",
    doc="fuzz case, seed 260 (--affine)",
    inputs=[
        "prob[Q, T, Q]",
        "s[Q, I, I]",
        "hid[T, Q, J]",
        "W1[I]",
        "W[I]",
        "Kx[I]",
        "Zz[T]",
        "C[T]",
        "gain[T]",
    ],
    definitions=[
        "v[j, t, h] = Sum(prob[j, t + u - dil, g] * hid[u, g, h], u, g)",
        "act[x] = W1[x] * W[x] * Kx[x]",
        "act2 = Sum(Zz[w] * C[w] * gain[w], w)",
        "emb[t2, b, d] = (act2 - hid[t2, b, d - 2]) / Sum(softplus(act2) * exp(hid[aa, b, d]), aa)",
    ],
    params={"dil": 2},
    sizes={"U": "T + dil - T + 1"},
    ranges={"t": "U"},
)

SEED = 260
