# Drop-in code cells for notebooks/05_transcript.py (see docs-draft/theory_fixes.md, 05-B).
# Cell 1 follows the existing "smallest collision" cell (which defines q_min, s_min, tiny,
# collision); the first lines below recompute those so the file runs alone.
import numpy as np

from companion.quantised_sketch import CountingSketchModel, QuantisedSketchModel
from companion.transcript import (
    BlockConstruction,
    answer_vector_count,
    bits_needed,
    count_transcripts,
    find_collision,
    find_forced_error,
    sketch_bits,
)

q_min, s_min = 3, 1
tiny = QuantisedSketchModel(BlockConstruction(q_min, s_min))
collision = find_collision(tiny)

# %%  [cell 1: the same channel, a model that is right where it can be]
print("random weights, first collision: wrong on input(s)", collision.wrong_on)
designed = CountingSketchModel(BlockConstruction(q_min, s_min))  # L = H = r = d = b = 1
tokens = designed.construction.all_key_tokens()
print(designed)
print("transcripts used:", count_transcripts(designed, tokens),
      "| answer vectors it gets right:", designed.exact_answer_vectors(),
      "| answer vectors:", answer_vector_count(q_min, s_min))
forced = find_forced_error(designed)
for k in (0, 1):
    print(f"input {k}: z = {forced.key_tokens[k].tolist()} targets = {forced.answers[k]}")
print("common transcript:", forced.transcript)
print("common outputs:   ", np.round(forced.outputs, 6).tolist())
print("max error on each input:", [round(e, 6) for e in forced.errors],
      " wrong on input(s):", forced.wrong_on)

# %%  [cell 2: larger designed sketches below the bound]
print(f"{'q':>2} {'s':>2} {'d':>2} {'b':>2} {'bits':>5} {'need':>5} {'right on':>9} "
      f"{'answers':>8}  forced pair (right, wrong)")
for q, s, d, b in [(3, 2, 3, 1), (4, 3, 2, 2), (5, 2, 2, 1), (2, 4, 1, 2)]:
    model = CountingSketchModel(BlockConstruction(q, s), value_dim=d, bits=b)
    col = find_forced_error(model)
    print(f"{q:>2} {s:>2} {d:>2} {b:>2} {sketch_bits(1, 1, 1, d, b):>5} {bits_needed(q, s):>5} "
          f"{model.exact_answer_vectors():>9} {answer_vector_count(q, s):>8}  "
          f"{col.answers[0]} vs {col.answers[1]}")
