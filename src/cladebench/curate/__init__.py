"""Curate: raw sources (iNaturalist exports, catalogs, published cards) into canonical benchmark rows."""
