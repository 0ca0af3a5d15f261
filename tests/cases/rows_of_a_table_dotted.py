"""Two rows of an embedding table dotted, summed over ``e``: after a nested subscript
(``C[a[n], e]``) e was read as Euler's number, and the Sum refused as over 'E' (found by
probing)."""

from derive import Op

OP = Op(
    name="rows_of_a_table_dotted",
    doc="(C[a] * C[b]).sum(1).",
    inputs=["C[V, E]", "a[N]: int64", "b[N]: int64"],
    definitions=["out[n] = Sum(C[a[n], e] * C[b[n], e], e)"],
)
