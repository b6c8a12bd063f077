"""The `build` fixture: run the platform component under Pulumi mocks (see platform_helpers)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from platform_helpers import Recorder, platform_program


@pytest.fixture
def build() -> Callable[..., Recorder]:
    return platform_program
