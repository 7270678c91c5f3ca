from __future__ import annotations

import pytest

from tests.support.workspaces import Lab


@pytest.fixture
def lab(tmp_path):
    instance = Lab(tmp_path)
    yield instance
    instance.close()
