"""Evaluate: run a task on a dataset with a model, and keep the run record with its provenance."""
