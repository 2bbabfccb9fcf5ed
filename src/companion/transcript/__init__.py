"""Theorem G (chapter 5): the precision transcript bound and the quantised sketch that
realises its channel."""
