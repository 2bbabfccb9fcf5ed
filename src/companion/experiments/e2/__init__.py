"""Experiment E2 (chapter 7): out-of-distribution scaling: ``data``, ``readings`` (the one
pipeline), ``protocols`` (the earlier ones), ``rule`` (pre-registered) and ``verdicts``."""
