"""The complete example of docs/endpoints.md runs and prints what the page says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from collops.endpoints_demo import run_endpoints_demo

PAGE = Path(__file__).resolve().parents[2] / "docs" / "endpoints.md"


def test_the_complete_example_runs():
    code = re.search(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert code is not None
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code.group(1), str(PAGE), "exec"), {"__name__": "docs_example"})
    lines = printed.getvalue().splitlines()
    assert len(lines) == 2
    assert "affinity_tree" in lines[0] and lines[0].endswith("[10 10]")
    assert lines[0].count("'allreduce', [4.0, 4.0, 4.0]") == 2
    assert lines[0].count("'ambroadcast', [0, 1, 2, 3]") == 2  # the root's callback runs too
    assert lines[1].count("'ambroadcast', [0, 1, 2, 3]") == 2 and lines[1].endswith("None")
    assert lines[0].count("'amreduce', False") == 1 and lines[1].count("'amreduce', False") == 2
    assert lines[0].count("((0, 0), 'amreduce', [10, 10])") == 1


def test_the_task_farm_example_runs():
    section = PAGE.read_text().split("### Example: a task farm", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code.group(1), str(PAGE), "exec"), {"__name__": "docs_example"})
    farm, same = printed.getvalue().splitlines()
    assert same == "True"
    assert farm.startswith("[(1, 285.0), (2, 333328333350000.0)")


@pytest.mark.parametrize("transport", ["inproc", "shm"])
def test_the_active_messages_into_named_buffers_example_runs(transport):
    section = PAGE.read_text().split("### Example: active messages into buffers", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    source = code.group(1).replace("collops.spawn(task, 3)",
                                   f"collops.spawn(task, 3, transport={transport!r})")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(source, str(PAGE), "exec"), {"__name__": "docs_example"})
    assert printed.getvalue().splitlines() == [
        "[1. 2. 3.] [0, 1, 2] [18. 18. 18. 18.] True", "True True"]


def test_the_demo_section_succeeds():
    out: list[str] = []
    assert run_endpoints_demo(out.append) == 0
    assert any("refuses dispatch 2" in line for line in out)
    assert any("`affinity_tree`" in line for line in out)
