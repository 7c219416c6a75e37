"""pgnvm tooling: build PostgreSQL 18 with the pgnvm patches, run clusters, run tests."""
