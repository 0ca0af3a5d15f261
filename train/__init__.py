"""Training with backward passes from generated/: ``python -m train [--model mlp|classifier|gpt]``.

One package, a model per file: ``models/mlp.py`` (the seed's makemore MLP, the default),
``models/classifier.py`` (the seed's digit classifier) and ``models/gpt.py`` (makemore's GPT)
each state their config, options, data, init, the generated step chained by hand beside the
autograd one, what their checkpoint adds and what the end of a run prints (``models.ModelSpec``).
The rest is shared: ``cli`` (the command line and its commands), ``engine`` (the run: new or
restored, the step loop, checkpoints, Ctrl-C), ``exits`` (every way a command ends), ``checkpoint``
(the file format), ``preflight`` (checks before the first step), ``report`` (metrics, plots,
the end of a run), ``data`` (the names data), ``config``, ``device``, ``distributed``,
``progress``, ``compare`` (``--check-every``'s table) and ``streams``.
"""
