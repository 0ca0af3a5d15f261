"""A Gaussian kernel of pairwise squared distances written inline, the distance a sum of a
difference inside the exp: the exp is saved and the backward reads it, the N x M x K
difference is not made again for it."""

from derive import Op

OP = Op(
    name="rbf_of_distances_inline",
    inputs=["x[N, K]", "y[M, K]"],
    params={"gamma": 0.5},
    definitions=["out[n, m] = exp(-gamma * Sum((x[n, k] - y[m, k])**2, k))"],
)
