"""Build Fine-Grained Challenges from a TreeOfLife-200M-style catalog (``cladebench build fine-grained-challenges``).

The modules, in the order a build uses them: :mod:`.config` (the options, the challenge groups, the ``--seen`` /
``--embed`` specs), :mod:`.catalog` (the catalog read with DuckDB), :mod:`.checks` (licenses, row checks,
sampling), :mod:`.images` (images fetched or read, resized, stored as lossless WebP; the camera-trap cohort's
builder writes its images with it too), :mod:`.card` (the summary and the card) and :mod:`.build`
(:func:`~.build.build_finegrained`). This ``__init__`` holds no code.
"""
