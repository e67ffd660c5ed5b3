"""Helpers shared by the store, ingest and query tests."""
