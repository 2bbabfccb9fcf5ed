"""The experiments (chapters 6 and 7): trained heads, on top of the theory modules.

``engine`` trains many stacked models as one tensor program, ``store`` keeps resumable result
files, ``table_heads`` and ``witness_suite`` are E1 (table heads on the witness family),
``ood_data``, ``mlp_heads`` and ``ood_scaling`` are E2 (MLP heads on unseen tokens). The theory
modules of :mod:`companion` import nothing from here.
"""
