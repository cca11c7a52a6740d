"""CrypticBio, one folder: its four benchmarks and their protocol (:mod:`.benchmark`), the published CSVs' reader
and builder (:mod:`.source`), the cryptic-group lookup (:mod:`.cryptic_groups`), the builder from metadata and a
YAML config (:mod:`.builder`, ``cladebench build crypticbio``) and its offline mirror (:mod:`.mirror`).

This ``__init__`` holds no code: importing one module of the family does not import the rest.
"""
