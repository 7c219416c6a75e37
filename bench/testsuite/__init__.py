"""pgnvm test harness: ``./pgnvm test``.

Runs PostgreSQL's own suites plus pgnvm-specific crash, error-path,
differential and syscall checks against each storage engine.
"""
