"""Presentation: one op's derivation gathered for reading, and its renderings.

- :mod:`~derive.explain.explain`: the chain rule, simplified and collapsed forms and emitted
  torch of every adjoint, gathered into an :class:`~derive.explain.explain.Explanation`;
- :mod:`~derive.explain.excerpt`: the statements of the generated backward that compute one
  adjoint;
- :mod:`~derive.explain.show`: ``python -m derive show``'s renderings (text, LaTeX, JSON);
  :mod:`~derive.explain.command` its loop, :mod:`~derive.explain.cache` the renderings kept on
  disk by content, :mod:`~derive.explain.catalogue` which file an OP names (these three import
  no SymPy: a cached op is printed without it);
- :mod:`~derive.explain.formulas`: FORMULAS.md and formulas.html;
- :mod:`~derive.explain.latex`: the LaTeX and unicode printers; :mod:`~derive.explain.mathsvg`
  typesets LaTeX to SVG; :mod:`~derive.explain.browser` checks the page in headless Chromium.
"""
