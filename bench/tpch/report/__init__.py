"""The report of a ``./pgnvm tpch`` run (see :mod:`bench.tpch.report.output`)."""

from bench.tpch.report.output import Report, rebuild
from bench.tpch.report.statistics import Analysis

__all__ = ["Analysis", "Report", "rebuild"]
