"""Tests of the scaler's commands, many run in-process (`scaler.cli.main`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """`run` sets up the process's logging (scaler.metrics.setup_logging: the root logger's handler on the
    stderr of the moment, its level); run in-process by a test, that handler outlived the test and wrote into
    its closed capture, so a later test's stderr got '--- Logging error ---' tracebacks. Each test leaves the
    logging as it found it."""
    root = logging.getLogger()
    loggers = [root, *(logging.getLogger(n) for n in ("kubernetes", "urllib3", "botocore", "azure", "leaderelection"))]
    saved = [(lg, lg.level, list(lg.handlers)) for lg in loggers]
    yield
    for lg, level, handlers in saved:
        lg.setLevel(level)
        lg.handlers[:] = handlers
