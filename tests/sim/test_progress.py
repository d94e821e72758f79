"""The progress bar of long simulations: silent when short or not on a terminal, else drawn
with tqdm, rich or plain text, and fed by every model."""

from __future__ import annotations

import sys
import types
from contextlib import contextmanager

import pytest

from collops.cli import main
from collops.sim import api, progress
from collops.sim.progress import progress_bar


@pytest.fixture
def no_libraries(monkeypatch):
    """Neither tqdm nor rich importable: the plain-text bar."""
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "rich", None)
    monkeypatch.setitem(sys.modules, "rich.progress", None)


def test_plain_text_bar_draws_percentages_and_ends_its_line(capsys, no_libraries):
    with progress_bar("alltoall on torus:2x2", enabled=True, delay=0.0) as update:
        update(1, 4)
        update(4, 4)
    err = capsys.readouterr().err
    assert err == "\ralltoall on torus:2x2:  25.0%\ralltoall on torus:2x2: 100.0%\n"


def test_nothing_is_drawn_before_the_delay(capsys, no_libraries):
    with progress_bar("quick", enabled=True, delay=3600.0) as update:
        update(1, 2)
        update(2, 2)
    assert capsys.readouterr().err == ""


def test_nothing_is_drawn_when_stderr_is_not_a_terminal(capsys, no_libraries, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    with progress_bar("piped", enabled=None, delay=0.0) as update:
        update(1, 2)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with progress_bar("terminal", enabled=None, delay=0.0) as update:
        update(1, 2)
    assert "terminal:  50.0%" in capsys.readouterr().err


def test_tqdm_is_used_when_importable(monkeypatch):
    made = []

    class FakeTqdm:
        def __init__(self, total, desc, file, leave):
            self.total, self.desc, self.n, self.refreshed, self.closed = total, desc, 0, 0, False
            made.append(self)

        def refresh(self):
            self.refreshed += 1

        def close(self):
            self.closed = True

    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeTqdm))
    with progress_bar("packet model", enabled=True, delay=0.0) as update:
        update(3, 10)
        update(10, 12)  # the total may change between stages
    (bar,) = made
    assert bar.desc == "packet model" and (bar.n, bar.total) == (10, 12)
    assert bar.refreshed == 2 and bar.closed


@pytest.mark.parametrize("model", ["congestion", "packet"])
def test_every_model_reports_progress_up_to_its_total(monkeypatch, model):
    seen = []

    @contextmanager
    def recording(description, enabled=None, delay=2.0):
        assert enabled is True and "alltoall.linear on torus:4x4" in description

        def update(done, total):
            seen.append((done, total))
        yield update

    monkeypatch.setattr(api, "progress_bar", recording)
    api.simulate("alltoall", "linear", "torus:4x4", size_bytes=4096, model=model,
                 progress=True)
    assert seen, "the model never reported progress"
    assert all(0 <= done <= total for done, total in seen)
    assert seen[-1][0] == seen[-1][1]  # the last report says done


def test_collops_sim_progress_option(monkeypatch, capsys, no_libraries):
    calls = []
    real = progress.progress_bar

    @contextmanager
    def immediate(description, enabled=None, delay=2.0):
        calls.append(enabled)
        with real(description, enabled, delay=0.0) as update:
            yield update

    monkeypatch.setattr(api, "progress_bar", immediate)
    base = ["sim", "--collective", "alltoall", "--algorithm", "linear", "--topology",
            "torus:4x4", "--size", "4K", "--model", "packet"]
    assert main(base + ["--progress", "on"]) == 0
    assert main(base + ["--progress", "off"]) == 0
    assert main(base) == 0
    assert calls == [True, False, None]
    err = capsys.readouterr().err
    assert err.count("100.0%") == 1 and err.endswith("\n")
