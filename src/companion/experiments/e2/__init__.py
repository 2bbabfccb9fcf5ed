"""Experiment E2 (chapter 7): out-of-distribution scaling, its data, readings, the
pre-registered transition rule and its verdicts."""
