"""The `build` fixture: run the platform component under Pulumi mocks (see platform_helpers)."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
from platform_helpers import Recorder, platform_program


@pytest.fixture
def build() -> Callable[..., Recorder]:
    return platform_program


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The number of objects test_charts validated (a figure CI prints, not a time)."""
    counts = sys.modules.get("test_charts")
    found = getattr(counts, "COUNTS", None) if counts else None
    if found:
        terminalreporter.write_line(
            f"kubernetes-validate --strict: {found['objects']} objects ({found['custom']} custom resources "
            f"against their CRDs) x {found['versions']} Kubernetes versions = {found['validations']} validations, "
            f"all valid")
