"""``python -m bench``: how fast and how lean the generated training step is, against autograd.

One full SGD step of the makemore MLP (forward, backward, update) per variant: autograd through
the seed's decomposed forward (A) and through fused ops (B), the generated backward eager (G)
and under ``torch.compile`` (GC), and B compiled (AC). Every variant is first checked against A
in float64; one that disagrees is reported as wrong and never timed. Variants run interleaved,
round by round, in one process, so load on a shared machine hits them alike.
"""
