"""Build the camera-trap cohort of Fine-Grained Challenges from LILA BC collections (``cladebench build cameratrap``).

The published Fine-Grained Challenges card holds genus-only *Peromyscus* rows from two LILA BC camera-trap
collections (Wildlife Conservation Society Camera Traps, North American Camera Trap Images): images labelled
*Peromyscus* were selected before taxonomic resolution, one collection (Ohio Small Animals) was excluded, labels
were resolved, the images retrieved, MegaDetector screened them at a confidence threshold of 0.30 (an animal
detection kept an image, none kept had a person detection), and images were stored as lossless WebP of at most
720 px, license CDLA-Permissive-1.0, ``seen_in_training = []``, ``species`` null. This builder makes such a cohort
from the collections' published files (COCO Camera Traps metadata and MegaDetector batch output), for these
collections or any others, and appends it to a ``build finegrained`` dataset or writes it on its own.

The package, one module per job, in the order a build uses them:

- :mod:`.records`: the published files read (COCO Camera Traps metadata, streamed), :mod:`.megadetector` the
  detector's batch output;
- :mod:`.config`: the command line's options and the cohort file (collections, labels, exclusions, threshold);
- :mod:`.resolve`: each selected label resolved offline against the taxonomy backbone;
- :mod:`.fetching`: metadata, detections and images fetched (or read), images resized and stored as WebP;
- :mod:`.screening`: the reasons an image is left out, the detector screening and the accounting;
- :mod:`.table`: what a camera-trap row holds;
- :mod:`.append`: the append to a built Fine-Grained Challenges dataset and its bookkeeping;
- :mod:`.card`: the summary (``build.json``) and the card (``README.md``);
- :mod:`.build`: :func:`~.build.build_cameratrap`, which runs them.

The family registers the builder (:mod:`cladebench.benchmarks.finegrained.benchmark`) with its config in
:mod:`.config` and its function in :mod:`.build`; this ``__init__`` holds no code.
"""
