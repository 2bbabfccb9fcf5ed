"""The lower-bound argument (chapters 2 and 3): gap domination (Lemma B), amplification along
chains (Lemma C), rank bounds (Lemmas D, D' and Theorem E), codes and their search, the witness
family F(S) and the asymptotics in m."""
