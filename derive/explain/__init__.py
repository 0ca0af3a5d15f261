"""Presentation: one op's derivation gathered for reading, and its renderings.

- :mod:`~derive.explain.explain`: the chain rule, simplified and collapsed forms and emitted
  torch of every adjoint, gathered into an :class:`~derive.explain.explain.Explanation`;
- :mod:`~derive.explain.excerpt`: the statements of the generated backward that compute one
  adjoint;
- :mod:`~derive.explain.show`: ``python -m derive show`` (text, LaTeX, JSON);
- :mod:`~derive.explain.formulas`: FORMULAS.md and formulas.html;
- :mod:`~derive.explain.latex`: the LaTeX and unicode printers; :mod:`~derive.explain.mathsvg`
  typesets LaTeX to SVG; :mod:`~derive.explain.browser` checks the page in headless Chromium.
"""
