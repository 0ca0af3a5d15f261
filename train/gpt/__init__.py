"""makemore's GPT on the names data, its backward chained by hand from generated/ modules.

``python -m train --model gpt``: ``cli`` (options), ``data`` (words as padded sequences),
``model`` (parameters, the plain-torch forward, evaluation and sampling), ``step`` (the
generated and the autograd step), ``loop`` (the run: checkpoints, Ctrl-C, several processes).
"""
