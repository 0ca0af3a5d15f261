"""A preference (DPO / Bradley-Terry) loss, found by probing: the gradient in the preferred
input came out with its sign flipped (``_multiplied_out`` read the factors of the one term it
left, -F sigmoid(-u), as terms of a sum), so training climbed the loss."""

from derive import Op

OP = Op(
    name="log_sigmoid_of_a_difference",
    inputs=["a[N]", "b[N]"],
    definitions=["loss = -Sum(log(sigmoid(a[n] - b[n])), n)"],
)
