"""Transports: moving bytes between ranks behind one small interface."""

from .base import Capabilities, Handle, Transport

__all__ = ["Capabilities", "Handle", "Transport"]
