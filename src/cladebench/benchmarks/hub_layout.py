"""What the Hub's ``datasets`` writes into the Parquet files the Hub benchmarks publish (INQUIRE-Rerank, iNat
Co-Observed), for the mirrors written in their layouts."""

from __future__ import annotations

import pyarrow as pa

HF_IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
"""An image as the Hub's ``datasets`` stores it."""
