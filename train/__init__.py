"""Training the seed's character-level MLP with backward passes from generated/.

Run it as ``python -m train``; ``train.step.generated_step`` is the hand-written step that
chains the generated forwards and backwards.
"""
