"""The shared core of pgnvm's tooling: what every job (tpch, micro, testsuite) stands on.

paths, ui, osuser (the server's OS user), build, cluster (+ storage: where data directories
live), procfs (the one /proc reader), configs (the catalogue of named storage
configurations), server (the one server handle), topology (the nvmpf-topology client),
counters (pgnvm's counters). Nothing here imports a job.
"""
