"""Checking algorithms: numpy's answers for every collective (`cases`) and the checker behind
`collops check` (`checker`)."""

from .checker import Problem, Report, check_algorithm, check_case

__all__ = ["Problem", "Report", "check_algorithm", "check_case"]
