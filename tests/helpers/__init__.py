"""Helpers the tests share, one module per kind of thing; not tests themselves, and no test module imports another.

- http_local: run a real HTTP server on 127.0.0.1 for a block; pieces of an OpenAI-compatible chat endpoint.
- image_host, photo_host: image hosts for the downloader and for the sources and builders.
- vlm_server: a chat-completions server that answers like vLLM, for the VLM client and VLM tasks.
- lineage_vlm: two-organism photos and an endpoint that answers the lineage task in many shapes.
- crypticbio_rows, inquire_rows, coobserved_rows: rows and files in each benchmark's published layout.
- images, planted_embeddings, rerank_data: pictures, datasets with planted vectors, planted rerank datasets.
- embedded: a table written as a dataset and embedded with a tiny model into ``emb_tiny``.
- huge_png, ray_local: decompression-bomb PNGs; a local Ray for one test module.
- source_imports: who imports whom in src/cladebench, read from the text (the shape and layout tests).
- devtools: headless Chromium over the DevTools pipe (open a page at a width, evaluate JS, screenshot).
- report_runs: real run records that make a report wide, for the report layout tests.
- before_model: CLI commands in a fresh Python, each with its exit code and whether torch was imported by then.
- suite_writer: a writer of a suite's results table, run in processes of their own (the concurrency test).

Fixtures that tests of several packages use (``tiny_model``, ``lineage_photos``, ``lineage_endpoint``) live in
tests/conftest.py.
"""
