"""The experiments (chapters 6-8): trained heads, on top of the theory modules.

``sweep`` (the one sweep protocol and its result files), ``engine`` (many stacked models as
one tensor program), ``heads`` (the stacked heads), ``e1`` (chapter 6), ``probes`` (chapter
8), ``e2`` (chapter 7), ``reference`` (live re-runs against committed results). The theory
modules of :mod:`companion` import nothing from here.
"""
