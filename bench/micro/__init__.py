"""Microbenchmarks: ``./pgnvm micro scan`` (the configurations on a table larger than shared_buffers)."""
