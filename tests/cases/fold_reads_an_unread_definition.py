"""The output does not read prob, but folding writes the backward's hid[d] as prob[d] (prob is
hid's copy): the forward must still compute prob and save it (fuzz seed 160066, a NameError
once unread definitions were no longer computed)."""

from derive import Op

OP = Op(
    name="fold_reads_an_unread_definition",
    doc="prob = hid (unread by C); C = sum_{x,d} hid[x] a1[x, d]",
    inputs=["hid[D]", "a1[D, D]"],
    definitions=["prob[o] = hid[o]", "C = Sum(hid[x] * a1[x, d], d, x)"],
)
