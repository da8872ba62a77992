"""Pipelines: several functions, their hand-offs, and the layouts negotiated for them."""
