"""iNat Co-Observed, one folder: the benchmark and its protocol (:mod:`.benchmark`), the published files' reader
and builder (:mod:`.source`), the builder from an iNaturalist export (:mod:`.builder`, ``cladebench build
inat-coobserved``) and its offline mirror (:mod:`.mirror`).

This ``__init__`` holds no code: importing one module of the family does not import the rest.
"""
