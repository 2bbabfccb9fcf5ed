"""The sandwich (chapter 3): the smallest feature rank of an exact head on a witness family,
bracketed by a certified bound and an exactly verified head: the matrix problem, heads from
its factors, the numerical search and head files."""
