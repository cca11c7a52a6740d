"""INQUIRE-Rerank, one folder: the benchmark and its protocol (:mod:`.benchmark`), the published shards' and query
CSVs' reader and builder (:mod:`.source`) and its offline mirror (:mod:`.mirror`).

This ``__init__`` holds no code: importing one module of the family does not import the rest.
"""
