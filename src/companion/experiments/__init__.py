"""The experiments (chapters 6 and 7): trained heads, on top of the theory modules.

``engine`` trains many stacked models as one tensor program, ``store`` keeps resumable result
files, ``heads`` the stacked heads every experiment trains, ``e1`` is E1 (table heads on the
witness family), ``e2`` is E2 (MLP and pool-table heads on unseen tokens). The theory
modules of :mod:`companion` import nothing from here.
"""
