"""Functions of params behind a guard on them (found by probing, 2026-11-25): at alpha = 0 the
guard selects x, yet python evaluated ``math.log(alpha)`` and ``1 / alpha`` first (ValueError,
ZeroDivisionError); ``math.exp(800)`` an OverflowError where x <= 100 drops it; and at beta < 0
``beta ** (1/3)`` a complex number (torch: nan). Each takes torch's value now (-inf, inf,
nan), which the where() then drops, or, unguarded, carries as torch would."""

from derive import Op

OP = Op(
    name="guarded_param_functions",
    inputs=["x[N]"],
    params={"alpha": 2.0, "beta": 4.0},
    definitions=[
        "a[n] = where(alpha > 0, x[n] * log(alpha) + x[n]**2 / alpha, x[n])",
        "out[n] = a[n] * where(x[n] > 0, beta**(1/3), 1) + where(x[n] > 100, exp(alpha * 400), 0)",
    ],
)
