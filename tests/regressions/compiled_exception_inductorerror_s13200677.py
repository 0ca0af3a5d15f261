"""fuzz case, seed 13200677 (--windows --powers --constants --entries --segments)"""

# Found by `python -m fuzz --windows --powers --constants --entries --segments --compiled` (case
# seed 13200677) on 1a6b159, shrunk from 4 definition(s).
# Failed: WRONG (compiled exception InductorError: AssertionError: vr must not be None for symbol
# q0 (at torch/fx/experimental/symbolic_shapes.py:2542), dynamic shapes)
# Fixed: the compiled _index_put adds at the flat rows by scatter_add, not index_add: an index_add
# of the flat rows (this session's first form, which fixed 13100163) failed Inductor's symbolic
# shapes ("vr must not be None") under the argmax of a window of one entry, as --affine 13300135
# did too; the plain index_put compiled it.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it), and
# fuzz.compiled.run_compiled_case(OP, SEED) too (tests/modules/test_compiled.py).
from derive import Op

OP = Op(
    name="fuzz13200677",
    doc="fuzz case, seed 13200677 (--windows --powers --constants --entries --segments)",
    inputs=[
        "u[G, G, G]",
    ],
    definitions=[
        "Wq[i, l, f] = Max(u[2*i + ij - stride, l, f], ij)",
    ],
    params={"pad": 1, "stride": 2},
    sizes={"P": "pad", "H": "(G + 2*stride - (pad)) // 2 + 1"},
    ranges={"i": "H", "ij": "P"},
)

SEED = 13200677
