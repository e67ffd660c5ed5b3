"""Shared fixtures for the store, ingest and query tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rootsift import Rootsift


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes more than ~20 s (deselect with -m 'not slow')")
    config.addinivalue_line(
        "markers", "sources: starts real servers (scripts/sources/); deselect with -m 'not sources'"
    )
    # kept query plans (rootsift.query.plan) go to a folder of this run, not the user's cache;
    # child processes (the CLI run by a test) inherit it
    os.environ["ROOTSIFT_CACHE_DIR"] = tempfile.mkdtemp(prefix="rootsift-test-cache-")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ.pop("ROOTSIFT_CACHE_DIR", ""), ignore_errors=True)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """An empty data directory."""
    return tmp_path / "data"


@pytest.fixture
def rs(data_dir: Path) -> Iterator[Rootsift]:
    """A store on a fresh data directory, closed after the test."""
    store = Rootsift(data_dir)
    try:
        yield store
    finally:
        store.close()
