"""The suite runs on the built-in selection table: a user's own tuning file
(``~/.config/collops/tuning.toml``, written by ``collops tune``) would change which algorithm
every test gets. Tests that read a tuning file name it themselves."""

from __future__ import annotations

import os

os.environ.setdefault("COLLOPS_TUNING_FILE", "")

from collops import config  # noqa: E402

if config.settings.tuning_file:  # read before this file set the variable
    config.reload_settings()
