"""Microbenchmarks: ``./pgnvm micro scan`` (engines on a table larger than shared_buffers)."""
