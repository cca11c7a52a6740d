"""Command-line argument types the benchmark scripts share.

Run as ``python bench/NAME.py``: the script's folder is on ``sys.path``, so ``from _args import positive_int``.
"""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An integer of at least 1 (sizes, repeats, block lengths), refused by argparse in one line otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value
