"""Every test here runs with fake credentials only (helpers.aws_fixtures), and may ask for moto."""

from __future__ import annotations

from typing import Dict

import pytest
from helpers.aws_fixtures import aws_env, moto  # noqa: F401 - fixtures


@pytest.fixture(autouse=True)
def _fake_credentials(aws_env: Dict[str, str]) -> None:  # noqa: F811
    pass
