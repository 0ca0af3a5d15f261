"""fuzz case, seed 701525"""

# Found by `python -m fuzz` (case seed 701525) on 40e4be6: SKIPPED, not judged.
# Skipped: reference: RuntimeError: One of the differentiated Tensors does not require grad (the
# reference interpreter took the adjoint of W = where(.., pi, 0), a constant, through autograd).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz701525",
    doc="fuzz case, seed 701525",
    inputs=[
        "hid[K, K]",
        "a1",
        "v[K]",
    ],
    definitions=[
        "W[w, u, t] = where(log1p(softplus(hid[t, u]) * exp(hid[w, u])) >= tanh(sin(hid[u, t])), pi, 0)",
        "logits[p] = Sum(v[p] * hid[aa, p], aa) + v[p]",
        "y[q, n1] = Sum(logits[f] * W[n1, f, q], f)",
    ],
    stepwise=True,
)


SEED = 701525
