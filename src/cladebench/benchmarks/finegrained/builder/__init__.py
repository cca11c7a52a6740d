"""Build Fine-Grained Challenges from a TreeOfLife-200M-style catalog (``cladebench build fine-grained-challenges``).

The modules, in the order a build uses them: :mod:`.catalog` (the catalog read with DuckDB), :mod:`.checks`
(licenses, row checks, sampling), :mod:`.card` (the summary and the card) and :mod:`.build`
(:func:`~.build.build_finegrained`); the options and the images are :mod:`cladebench.curate.builders.finegrained`'s.
This ``__init__`` holds no code.
"""
