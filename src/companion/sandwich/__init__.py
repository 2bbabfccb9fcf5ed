"""The sandwich (chapter 3): the smallest feature rank of an exact head on a witness family,
bracketed by a certified bound and an exactly verified head: the matrix problem, heads from
its factors and from block designs, the numerical search, head and certificate files, and the
table of windows they give."""
