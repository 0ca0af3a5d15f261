"""CELU written by its definition (found by probing, 2026-11-25). Its double backward is lowered
statement by statement: the adjoint of ``exp(x / alpha)`` is gated by minimum's step,
``dout_exp0 = where(u > 0, g, where(u < 0, 0, g / 2))``, and the next statement multiplied it by
the exp, ``dx = dout_exp0 * out_exp0 / alpha``: at alpha = 1e-3 the exp is inf from x = 0.71 on,
exactly where the gate is 0, and 0 * inf made the second derivative nan where it is 0 (torch's
celu's is). The read of the gated name now carries its mask into the product, which selects
(derive/lower/arithmetic.py, _masked); tests/modules/test_stability.py holds it at such
inputs. alpha is 1 here so that the checks' random inputs stay where the definitions' own
autograd (the oracle) is finite; the test passes 1e-3."""

from derive import Op

OP = Op(
    name="celu_gated_adjoint",
    inputs=["x[N]"],
    params={"alpha": 1.0},
    definitions=["out[n] = maximum(x[n], 0) + minimum(0, alpha * (exp(x[n] / alpha) - 1))"],
)
