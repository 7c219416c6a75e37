"""The individual checks of ``./pgnvm test``; see :mod:`bench.testsuite.registry`."""
