"""Linear attention written as one sum of three reads, ``q[b,t,e] k[b,s,e] v[b,s,d]`` over s
and e: (q k) v costs B T S (E + D) multiplies, q (k v) B S E D + B T E D, and which is fewer
depends on the sizes alone (both first pairs keep three axes). The order is chosen at the
call (found probing: left to the earliest pair, 13.6x autograd's time at T = S = 1024, E =
D = 64); tests/modules/test_contraction_order.py runs it at sizes that take each order."""

from derive import Op

OP = Op(
    name="linear_attention_inline",
    inputs=["q[B, T, E]", "k[B, S, E]", "v[B, S, D]"],
    definitions=["out[b, t, d] = Sum(q[b, t, e] * k[b, s, e] * v[b, s, d], e, s)"],
)
