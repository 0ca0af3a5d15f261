"""p-norms of the rows of x, each zero at a zero row: p read from a 0-d input and p = 3.
``Sum(|x|**p)**(1/p)`` differentiated at a zero row chained the root's partial (inf) by the
sum's (0), NaN where torch.linalg.vector_norm's gradient is 0, and its partial in p was
0 * log(0); a power of magnitudes is a sum of squares to the root rule, and a root whose
exponent is read from a tensor is held as a numeric one (found by probing)."""

from derive import Op

OP = Op(
    name="p_norms_at_zero",
    doc="The p-norm and the 3-norm of each row of x, added.",
    inputs=["x[N, D]", "p"],
    definitions=["out[n] = Sum(abs(x[n, d])**p, d)**(1/p) + Sum(abs(x[n, d])**3, d)**(1/3)"],
)
