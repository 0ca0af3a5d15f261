"""``show OP --jvp`` and ``show OP --order 2``: the derived tangent map and second order, as
the module computes them, in the three modes."""

from __future__ import annotations

import json

import pytest

from derive.__main__ import main


def _shown(capsys, *argv: str) -> str:
    assert main(["show", *argv, "--no-cache", "--width", "100"]) == 0
    return capsys.readouterr().out


def test_jvp_prints_the_tangent_steps_and_their_torch(capsys):
    out = _shown(capsys, "tanh", "--jvp")
    assert "Tangents (forward mode" in out
    assert "t_out[batch] = ⎝1 - out[batch] ⎠⋅t_x[batch]" in out
    assert "t_out = _into(_addcmul, t_x, t_x, out * out, -1, into=2)" in out


def test_jvp_json_is_the_module_docstring_steps(capsys):
    from generated import layernorm

    record = json.loads(_shown(capsys, "layernorm", "--jvp", "--json"))
    assert record["what"] == "tangents" and record["refused"] is None
    for eq in record["equations"]:  # the docstring lists the same steps, as derived
        assert f"{eq['lhs']} = {eq['sympy']}" in layernorm.__doc__


def test_order_2_prints_the_second_order_adjoints(capsys):
    out = _shown(capsys, "sigmoid", "--order", "2", "--latex")
    assert out.startswith("% sigmoid: Second order")
    # the gradient of pair with respect to grad_y, and the cotangent it reads: pair's own
    # cotangent is the 1 it always is (autograd asks for pair's gradients alone)
    assert r"{\mathrm{dgrad\_y}}_{\mathrm{batch}} = " in out
    assert r"{\mathrm{db\_dx}}_{\mathrm{batch}} = {\mathrm{v\_x}}_{\mathrm{batch}}" in out


@pytest.mark.parametrize("flags", [["--jvp", "--order", "2"]])
def test_jvp_and_order_2_are_exclusive(flags, capsys):
    with pytest.raises(SystemExit):
        main(["show", "tanh", *flags])
    assert "not allowed with" in capsys.readouterr().err
