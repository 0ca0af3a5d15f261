"""Second orders under torch.func (found by probing, 2026-11-25): torch.func's hessian, jacrev
of jacrev and jvp of grad differentiated the generated backward as torch code, whose own
derivatives are wrong where the backward is right in value: pow(relu(x), 0.5)'s forward-mode
derivative at 0 is 0 * inf (nan at every x < 0), a where() that drops x**(g - 1)'s inf at
x = 0 is 0 * inf in reverse mode, clamp(x, max=1)'s derivative at 1 is 1 where minimum's is
1/2. The backward is now a node of its own there, running the derived double backward and
its tangent (the template's _TransformableBackward, _backward_tangent)."""

from derive import Op

OP = Op(
    name="second_orders_under_transforms",
    inputs=["x[N]", "y[N]"],
    params={"g": 0.0},
    definitions=[
        "out[n] = relu(x[n])**1.5 + relu(x[n])**2 * y[n] + x[n] * minimum(x[n], 1) + x[n]**g"
    ],
)
