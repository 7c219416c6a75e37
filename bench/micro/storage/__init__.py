"""``./pgnvm micro tablescan|bufman|logging|storage``: the storage microbenchmarks of paper 004
§3 on our emulated persistent memory and on the disk.

The measuring is done by ``storagebench/`` (C, built on demand into
``$PGNVM_HOME/storagebench``): one invocation per configuration (benchmark, target, path,
page or entry size, write ratio, threads), warm-up and measured repetitions, one JSON
document each. This package plans the configurations (:mod:`plan`), makes the targets'
directories (:mod:`targets`: the tmpfs with 4 KB pages, the one with 2 MB pages, the disk),
runs them with progress and an ETA (:mod:`runner`), has ``fio`` measure the same Linux I/O
patterns on the same files (:mod:`fio`), and writes the raw data, a CSV and the report with
the paper's figures re-drawn on our data (:mod:`analysis`, :mod:`charts`, :mod:`report`).

Targets: ``nvm-4k`` (tmpfs, 4 KB pages: /mnt/pgnvm/nvm), ``nvm-2m`` (tmpfs, huge=always:
/mnt/pgnvm/nvm-huge), ``disk`` ($PGNVM_HOME/disk: here the disk the OS runs from; the page
cache is dropped before every repetition when root, otherwise the numbers are labelled warm);
``nvm`` names both tmpfs targets.

Results: ``results/micro-storage-<stamp>/``: ``runs.jsonl`` (storagebench's documents, with
the target and path each ran on), ``fio.jsonl``, ``results.csv``, ``report.md``,
``report.html``, the charts (PNG) and ``env.json``. Ctrl-C keeps what finished and writes
the report of it.
"""
