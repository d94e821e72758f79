"""docs/writing-algorithms.md, run: its Python files are written out as the page names them,
each ``console`` command runs, and every line of output the page shows is in what it printed
(a line ``…`` stands for lines left out; ranks may print in any order)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "writing-algorithms.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _blocks(kind: str) -> list[str]:
    return [body for k, body in BLOCK.findall(PAGE.read_text()) if k == kind]


def _commands() -> list[tuple[str, list[str]]]:
    out = []
    for body in _blocks("console"):
        lines = body.rstrip("\n").split("\n")
        assert lines[0].startswith("$ "), lines[0]
        out.append((lines[0][2:], lines[1:]))
    return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("tutorial")
    for body in _blocks("python"):
        first = body.split("\n", 1)[0]
        assert first.startswith("# ") and first.endswith(".py"), first
        (where / first[2:]).write_text(body)
    return where


@pytest.mark.timeout(300)
@pytest.mark.parametrize("command, shown", _commands(), ids=lambda c: str(c)[:40])
def test_each_command_prints_what_the_page_shows(workdir: Path, command: str,
                                                  shown: list[str]) -> None:
    argv = shlex.split(command)
    assert argv[0] == "collops"
    done = subprocess.run([sys.executable, "-m", "collops", *argv[1:]], cwd=workdir,
                          capture_output=True, text=True, timeout=280, env=dict(os.environ))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    printed = [line.rstrip() for line in done.stdout.splitlines()]
    for line in shown:
        if line != "…":
            assert line.rstrip() in printed, f"{line!r} not printed by {command}:\n{done.stdout}"
