"""The experiments (chapters 6-8): trained heads; the theory modules import nothing from here."""
