"""``cladebench load images``: a researcher's own images into a canonical Lance dataset.

A source is one of four kinds, each read as a stream of :class:`~.records.ImageRecord` by its own module: a folder
tree with one folder per taxon (:mod:`.folder`), a table of paths or URLs (CSV, TSV or Parquet, a Hugging Face
``datasets`` dataset's Parquet or its ``save_to_disk`` folder; :mod:`.table`), WebDataset tar shards
(:mod:`.shards`) and a Darwin Core Archive such as a GBIF download (:mod:`.archive`). :mod:`.kinds` names them
and tells them apart; :mod:`.columns` maps a table's columns (Darwin Core terms included) onto the canonical ones;
:mod:`.labels` turns each label's resolution against the taxonomy backbone into a row's ranks; :mod:`.card`
writes the dataset card and :mod:`.build` orders the work.
"""
