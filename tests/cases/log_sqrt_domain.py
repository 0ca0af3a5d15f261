"""log and sqrt: the check must draw inputs where they are defined."""

from derive import Op

OP = Op(name="log_sqrt_domain", inputs=["x[N]"], definitions=["out[n] = log(x[n]) + sqrt(x[n])"])
