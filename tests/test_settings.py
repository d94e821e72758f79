"""The environment's settings: every variable with a value collops cannot use is a
`SettingError` naming it (a bare ValueError or a silently wrong setting is a bug)."""

from __future__ import annotations

import pytest

from collops import SettingError, config

COUNTS = ["COLLOPS_RANKS_PER_NODE", "COLLOPS_CALL_CACHE"]
BYTES = ["COLLOPS_SHM_PER_RANK"]
DURATIONS = ["COLLOPS_SPIN_SECONDS", "COLLOPS_YIELD_SECONDS", "COLLOPS_SLEEP_SLICE"]


@pytest.mark.parametrize("name", COUNTS)
@pytest.mark.parametrize("value", ["x", "-1", "0", "1.5", "2e3"])
def test_a_bad_count_names_the_variable(name, value):
    with pytest.raises(SettingError, match=name):
        config.Settings.from_env({name: value})


@pytest.mark.parametrize("value", ["x", "-1", "1.5"])
def test_a_bad_single_copy_threshold_names_the_variable(value):
    with pytest.raises(SettingError, match="COLLOPS_SHM_SINGLE_COPY_MIN"):
        config.Settings.from_env({"COLLOPS_SHM_SINGLE_COPY_MIN": value})


@pytest.mark.parametrize("name", BYTES)
@pytest.mark.parametrize("value", ["x", "0", "-4K"])
def test_a_bad_byte_count_names_the_variable(name, value):
    with pytest.raises(SettingError, match=name):
        config.Settings.from_env({name: value})


@pytest.mark.parametrize("name", DURATIONS)
@pytest.mark.parametrize("value", ["x", "-1", "nan"])
def test_a_bad_wait_duration_names_the_variable(name, value):
    with pytest.raises(SettingError, match=name):
        config.Settings.from_env({name: value})


def test_good_values_are_read():
    got = config.Settings.from_env({"COLLOPS_CALL_CACHE": "64", "COLLOPS_RANKS_PER_NODE": "2",
                                    "COLLOPS_SHM_SINGLE_COPY_MIN": "0",
                                    "COLLOPS_SHM_PER_RANK": "8M"})
    assert (got.call_cache, got.ranks_per_node, got.shm_single_copy_min, got.shm_per_rank) == \
        (64, 2, 0, 8 << 20)
    default = config.Settings.from_env({})
    assert default.call_cache == config.DEFAULT_CALL_CACHE
    assert default.ranks_per_node is None and default.shm_single_copy_min is None
