"""A segment sum whose ids count from 1 (0 marks no segment): ``k[n] == g + 1``. The
equality is solved for g, and the positions k - 1 are sent past the axis where they leave
it, as a plain segment id's are (found probing: an (N, G, D) where() forward)."""

from derive import Op

OP = Op(
    name="segment_at_an_offset",
    inputs=["x[N, D]", "k[N]: int64", "b[G, D]"],
    definitions=["out[g, d] = b[g, d] + Sum(where(k[n] == g + 1, x[n, d], 0), n)"],
)
