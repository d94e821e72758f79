"""The suite runs on the built-in selection table: a user's own tuning file
(``~/.config/collops/tuning.toml``, written by ``collops tune``) would change which algorithm
every test gets. Tests that read a tuning file name it themselves."""

from __future__ import annotations

import os

os.environ.setdefault("COLLOPS_TUNING_FILE", "")

import pytest  # noqa: E402

from collops import config  # noqa: E402
from tests.support.runners import compiled_runners  # noqa: E402

if config.settings.tuning_file:  # read before this file set the variable
    config.reload_settings()


@pytest.fixture
def compiled_on():
    """The compiled runners switched on for a test of the compiled route, whatever the
    environment says (``COLLOPS_COMPILED=0`` turns them off for a user, not for the tests
    that check them); ranks spawned in the test inherit it."""
    with compiled_runners(True):
        yield
