"""The lower-bound argument of chapters 2 and 3: Lemmas B, C, D, D', Theorem E and its codes."""
