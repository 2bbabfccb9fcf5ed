"""Experiment E2 (chapter 7): out-of-distribution scaling. ``data`` (pools, sequence
distributions, splits), ``readings`` (the one pipeline and its configurations), ``protocols``
(the earlier protocols' presets and stored files), ``rule`` (the pre-registered rule) and
``verdicts`` (the rule applied, the summary, the tables)."""
