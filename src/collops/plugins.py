"""Loading users' algorithms: plug-in files, modules, ``COLLOPS_PLUGINS`` and entry points.

A plug-in is a Python file or an importable module whose import registers algorithms with
`collops.algorithm`, or an MSCCL-IR XML file (`collops.msccl`), registered under its ``algo``'s
name after the checks of `collops check`. Three ways in, all ending in `load_plugin`:

* ``--plugin FILE.py|module`` on the ``collops`` subcommands (`collops.cli` loads them and
  adds them to ``COLLOPS_PLUGINS`` so the ranks a launcher starts load them too);
* ``COLLOPS_PLUGINS=mod1,path/to/file.py`` — read when ``collops`` is imported, so every rank
  of a job (``collops run``, ``mpiexec``) registers the same algorithms;
* an installed package's entry points in the group ``collops.algorithms`` (each entry point
  names a module, or a callable that is called once).

Each plug-in is loaded once per process (files by their resolved path). One that fails to
import raises `PluginError` naming the plug-in and the file and line where it failed.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from .errors import PluginError

#: the environment variable naming plug-ins every rank loads
ENV = "COLLOPS_PLUGINS"
#: the entry-point group installed packages declare their algorithms in
ENTRY_POINT_GROUP = "collops.algorithms"

_loaded: dict[str, str] = {}


def loaded_plugins() -> dict[str, str]:
    """Each plug-in loaded in this process -> the module it was imported as."""
    return dict(_loaded)


def is_file(spec: str) -> bool:
    """Whether ``spec`` names a file (a path ending in ``.py``) rather than a module."""
    return spec.endswith((".py", ".xml")) or os.sep in spec


def canonical(spec: str) -> str:
    """The name a plug-in is known by: a file's absolute path, a module's name."""
    return str(Path(spec).expanduser().resolve()) if is_file(spec) else spec


def load_plugin(spec: str) -> str:
    """Import the plug-in ``spec`` (a ``.py`` file or a module name) once; its module name."""
    key = canonical(spec)
    if key in _loaded:
        return _loaded[key]
    if is_file(spec):
        path = Path(key)
        if not path.is_file():
            raise PluginError(spec, f"no such file: {path}")
        if path.suffix == ".xml":  # an MSCCL-IR program
            from .msccl.load import import_file
            _loaded[key] = import_file(path).name
            return _loaded[key]
        name = f"collops_plugin_{path.stem}_{abs(hash(key)) & 0xFFFFFF:06x}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise PluginError(spec, f"cannot import {path} as Python")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[name]
            raise PluginError(spec, _where(exc, str(path))) from exc
    else:
        name = spec
        try:
            module = importlib.import_module(spec)
        except ModuleNotFoundError as exc:
            if exc.name and spec.startswith(exc.name):
                raise PluginError(spec, f"no module named {exc.name!r} (give a file path "
                                        "ending in .py, or a module on sys.path)") from exc
            raise PluginError(spec, _where(exc, None)) from exc
        except Exception as exc:
            raise PluginError(spec, _where(exc, None)) from exc
    _loaded[key] = name
    return name


def load_plugins(specs: Iterable[str]) -> list[str]:
    """Load each plug-in of ``specs`` (empty entries skipped); their module names."""
    return [load_plugin(s.strip()) for s in specs if s.strip()]


def load_entry_points() -> list[str]:
    """Load every installed ``collops.algorithms`` entry point once; their names."""
    names = []
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        key = f"entry-point:{entry.value}"
        if key in _loaded:
            continue
        try:
            target = entry.load()
            if callable(target):
                target()
        except Exception as exc:
            raise PluginError(f"{entry.name} = {entry.value} (entry point "
                              f"{ENTRY_POINT_GROUP})", _where(exc, None)) from exc
        _loaded[key] = entry.value
        names.append(entry.name)
    return names


def load_configured_plugins() -> None:
    """Load the plug-ins of ``COLLOPS_PLUGINS`` and the installed entry points."""
    load_plugins(os.environ.get(ENV, "").split(","))
    load_entry_points()


def export_to_ranks(specs: Iterable[str]) -> None:
    """Add ``specs`` to ``COLLOPS_PLUGINS`` so processes started from here load them too."""
    known = [s for s in os.environ.get(ENV, "").split(",") if s.strip()]
    for spec in specs:
        key = canonical(spec)
        if key not in known:
            known.append(key)
    if known:
        os.environ[ENV] = ",".join(known)


def _where(exc: BaseException, path: str | None) -> str:
    """``File F, line N: Kind: message`` for the deepest frame in the plug-in's own code."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"File {exc.filename}, line {exc.lineno}: {type(exc).__name__}: {exc.msg}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith("<frozen")]
    own = str(Path(__file__).parent)
    mine = [f for f in frames if f.filename == path] if path is not None else [
        f for f in frames if not f.filename.startswith(own)]
    frames = mine or frames
    where = f"File {frames[-1].filename}, line {frames[-1].lineno}: " if frames else ""
    return f"{where}{type(exc).__name__}: {exc}"
