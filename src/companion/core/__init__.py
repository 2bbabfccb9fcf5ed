"""The objects every chapter shares: the Min-IP task, one attention head, exact evaluation
(Fractions), exact linear feasibility and the explicit constructions."""
