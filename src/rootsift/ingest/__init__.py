"""Inputs into segments: sources, readers, log formats (docs/architecture.md)."""

COMMIT_EVERY = 5.0
"""Seconds between the commits of a stream (``tail -f app.log | rootsift ingest -``).
Here, not in the pipeline, so the command line can show it without loading ingest."""
