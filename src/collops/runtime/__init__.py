"""The runtime: progress engine, communicators, requests, and starting ranks."""

from .comm import Comm
from .persistent import PersistentRequest, start_all
from .request import Request, test_all, wait_all, wait_any
from .world import init, spawn

__all__ = ["Comm", "PersistentRequest", "Request", "init", "spawn", "start_all", "test_all",
           "wait_all", "wait_any"]
