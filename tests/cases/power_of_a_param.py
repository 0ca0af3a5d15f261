"""x**p, p a param (found by probing, 2026-11-25): SymPy's d x**p = p x**p / x was 0 / 0 at
x = 0 in the tangent and the double backward (torch: 2 x, finite), and p x**(p - 1) was
0 * inf at p = 0 (torch: 0, d 1 = 0). A power's partials are taken as torch's pow backward
takes them (reverse._power): where(p = 0, 0, p x**(p - 1))."""

from derive import Op

OP = Op(
    name="power_of_a_param",
    inputs=["x[N]"],
    params={"p": 3.0},
    definitions=["out[n] = x[n]**p"],
)
