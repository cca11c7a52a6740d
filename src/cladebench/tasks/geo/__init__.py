"""Spatiotemporal tasks: a prior counted from observations, and its fusion with image scores."""
