"""Microbenchmarks: ``./pgnvm micro scan`` (the configurations on a table larger than
shared_buffers), ``./pgnvm micro prefetch`` (libnvmprefetch's own benchmark)."""
