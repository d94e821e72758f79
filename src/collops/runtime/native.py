"""Attaching a transport's own collectives (``mpi_native``, ``shm_direct``) to the registry.

Transports move bytes and know nothing of algorithms; a transport names the resources it
offers (`Capabilities.resources`), and the runtime — which owns both the registry's use and
the message tag layout — registers the algorithm module that goes with each resource the
first time a communicator over that transport is made. It tells the shared-memory transport
whether its compiled direct runner may be used (the ``compiled`` setting), and a transport that can
watch for a call made directly on one rank and with messages on another where a call's
number sits in a tag (``call_tags``).
"""

from __future__ import annotations

import importlib
import weakref

from .. import config as _cfg
from ..transport.base import Transport
from . import fingerprint as fp
from .engine import CALL_BITS, PHASE_BITS, SEQ_BITS

#: resource name -> the modules whose ``register(transport)`` add their algorithms
PLUGINS = {"mpi": ("collops.algorithms.mpi_native",),
           "shm_direct": ("collops.algorithms.shm_direct", "collops.algorithms.shm_cma"),
           "shm_stream": ("collops.algorithms.shm_stream",)}

_attached: weakref.WeakSet[Transport] = weakref.WeakSet()


def attach(transport: Transport) -> None:
    """Register the algorithms of ``transport``'s resources (once per transport)."""
    if transport in _attached:
        return
    _attached.add(transport)
    for resource in sorted(transport.capabilities().resources):
        for module in PLUGINS.get(resource, ()):
            importlib.import_module(module).register(transport)
    if hasattr(transport, "compiled_direct"):
        transport.compiled_direct = _cfg.settings.compiled
    if hasattr(transport, "call_tags"):
        transport.call_tags = (SEQ_BITS, CALL_BITS + PHASE_BITS, fp.describe)
