"""Fine-Grained Challenges, one folder: its two benchmarks, pins, sidecar and protocols (:mod:`.benchmark`), the
builder from a TreeOfLife-200M catalog (:mod:`.builder`, ``cladebench build fine-grained-challenges``), the builder
of its camera-trap cohort from LILA collections (:mod:`.cameratrap`, ``cladebench build cameratrap``) and its
offline mirror (:mod:`.mirror`).

This ``__init__`` holds no code: importing one module of the family does not import the rest.
"""
