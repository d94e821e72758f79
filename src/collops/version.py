"""The package version (read by the build from here; `collops --version` prints it)."""

__version__ = "0.1.0"
