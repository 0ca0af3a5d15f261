"""The seed's digit classifier (linear -> ReLU -> ... -> linear -> cross-entropy) trained with the
backward chained by hand from generated/ modules: ``python -m train --model classifier``.

Stages, one module each: ``idx`` (reading and checking IDX files), ``data`` (MNIST or the bundled
digits, split), ``model`` (parameters, plain-torch forward, evaluation), ``step`` (one step's loss
and gradients, generated or autograd), ``optim`` (torch.optim and clipping), ``monitor`` (the
statistics), ``plot`` (monitor.png), ``loop`` (steps, checkpoints, Ctrl-C, divergence), ``cli``.
"""
