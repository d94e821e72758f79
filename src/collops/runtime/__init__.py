"""The runtime: progress engine, communicators, requests, and starting ranks."""

from .comm import Comm, Request, wait_all
from .world import init, spawn

__all__ = ["Comm", "Request", "init", "spawn", "wait_all"]
