"""``./pgnvm micro scan``: a table larger than shared_buffers, read by each engine.

Two workloads over one table of ``--table-factor`` x shared_buffers (default 4x):

* ``seqscan``: ``SELECT count(*), sum(v) FROM micro_t`` (one backend, no parallel workers);
* ``index``: ``--lookups`` random primary-key lookups in one statement (a nested loop over
  ``generate_series`` with an index scan per row), so most heap pages are misses.

For every engine (``--engines``, e.g. ``base,se1,se2``; ``base`` with each ``--io-methods``)
and page size of the emulated NVM (``--pages 4k,2m``: a tmpfs with 4 KB pages, or one
mounted ``huge=always``), the same data directory is started with the engine's settings.
Each run restarts the server (cold shared buffers; the file pages stay in the tmpfs, which
is the "NVM"), opens a fresh connection and measures the statement's wall-clock time and
the backend's user/system CPU time (all its threads, so including prefetch helpers) and page
faults from ``/proc``. Repetitions interleave
the configurations; the report gives the median with min and max, and ratios to the first
configuration. Results: ``results/micro-scan-<stamp>/runs.jsonl`` and ``summary.md``.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from bench.core import build, paths, procfs, ui
from bench.core import cluster as clu

WORKLOADS = ("seqscan", "index")
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Config:
    name: str
    engine: str
    settings: dict[str, str]


#: se2 with prefetching (nvm_prefetch.c): name -> extra settings
SE2_PREFETCH: dict[str, dict[str, str]] = {
    "se2_inline": {"nvm_prefetch": "inline"},
    "se2_m1": {"nvm_prefetch": "helper", "nvm_prefetch_mapping": "m1"},
    "se2_m2": {"nvm_prefetch": "helper", "nvm_prefetch_mapping": "m2"},
    "se2_m3": {"nvm_prefetch": "helper", "nvm_prefetch_mapping": "m3"},
}
ENGINE_CHOICES: tuple[str, ...] = ("base", "se1", "se2", *SE2_PREFETCH)


def configs_for(engines: list[str], io_methods: list[str]) -> list[Config]:
    """One configuration per engine; base once per io_method (the others do not use it);
    ``se2_inline``/``se2_m1``/... are se2 with the prefetch settings of ``SE2_PREFETCH``."""
    out: list[Config] = []
    for e in engines:
        if e == "base":
            for m in io_methods:
                out.append(Config(f"base_{m}", "base", {"io_method": m}))
        elif e in SE2_PREFETCH:
            out.append(Config(e, "se2", {"io_method": "worker", **SE2_PREFETCH[e]}))
        elif e in ENGINE_CHOICES:
            out.append(Config(e, e, {"io_method": "worker"}))
        else:
            raise ValueError(f"unknown engine {e!r} (one of {', '.join(ENGINE_CHOICES)})")
    return out


def parse_size_mb(text: str) -> int:
    t = text.strip().upper().removesuffix("B")
    if t.endswith("G"):
        return int(float(t[:-1]) * 1024)
    if t.endswith("M"):
        return int(float(t[:-1]))
    raise ValueError(f"size must end in MB or GB: {text!r}")


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median, min and max of each metric per (pages, workload, config), in first-seen order."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["pages"], r["workload"], r["config"]), []).append(r)
    out = []
    for (pages, workload, config), rs in groups.items():
        row: dict[str, Any] = {"pages": pages, "workload": workload, "config": config, "n": len(rs)}
        for m in ("wall_s", "utime_s", "stime_s", "minflt"):
            xs = [float(r[m]) for r in rs]
            row[m] = statistics.median(xs)
            row[m + "_min"] = min(xs)
            row[m + "_max"] = max(xs)
        out.append(row)
    # ratios of the median wall-clock to the first configuration of the same group
    first: dict[tuple[str, str], float] = {}
    for row in out:
        key = (row["pages"], row["workload"])
        first.setdefault(key, row["wall_s"])
        row["ratio"] = row["wall_s"] / first[key] if first[key] else None
    return out


def render(summary: list[dict[str, Any]]) -> str:
    lines = [
        "| pages | workload | config | wall s (median [min-max]) | ratio | backend user s |"
        " backend sys s | minor faults |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in summary:
        lines.append(
            f"| {r['pages']} | {r['workload']} | {r['config']} | "
            f"{r['wall_s']:.3f} [{r['wall_s_min']:.3f}-{r['wall_s_max']:.3f}] | "
            f"{r['ratio']:.2f} | {r['utime_s']:.2f} | {r['stime_s']:.2f} | {r['minflt']:.0f} |"
        )
    return "\n".join(lines)


class Bench:
    def __init__(self, args: Any) -> None:
        self.args = args
        self.sb_mb = parse_size_mb(args.shared_buffers)
        self.table_mb = self.sb_mb * args.table_factor
        self.configs = configs_for(args.engines, args.io_methods)
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        default_out = paths.REPO_ROOT / "results" / f"micro-scan-{stamp}"
        self.out = Path(args.out) if args.out else default_out

    # ------------------------------------------------------------------ clusters
    def cluster(self, pages: str) -> clu.Cluster:
        name = f"micro-scan-{pages}"
        spec = clu.ClusterSpec(
            name=name,
            engine="base",
            storage="nvm",
            port=self.args.port + (0 if pages == "4k" else 1),
            flavour="release",
            huge=(pages == "2m"),
            settings=self.settings({"io_method": "worker"}),
        )
        if clu.Cluster.exists(name):
            c = clu.Cluster.load(name)
            if c.spec.huge != spec.huge or c.spec.flavour != spec.flavour:
                c.destroy()
                c = clu.Cluster(spec)
                c.init()
        else:
            c = clu.Cluster(spec)
            c.init()
        return c

    def settings(self, extra: dict[str, str]) -> dict[str, str]:
        s = {
            "shared_buffers": f"{self.sb_mb}MB",
            "max_parallel_workers_per_gather": "0",
            "jit": "off",
            "autovacuum": "off",
            "max_wal_size": "4GB",
            "checkpoint_timeout": "1h",
        }
        s.update(extra)
        return s

    def configure(self, c: clu.Cluster, cfg: Config) -> None:
        if c.is_running():
            c.stop("fast")
        c.spec.engine = cfg.engine
        c.spec.settings = self.settings(cfg.settings)
        c._write_conf()  # in-place engine switch: the data format does not depend on it
        c.save()

    def load(self, c: clu.Cluster) -> None:
        """Create micro_t (id, v, pad) of about table_mb megabytes, if not there yet."""
        rows = self.table_mb * 1024 * 1024 // 260  # ~260 bytes per heap tuple
        marker = f"{SCHEMA_VERSION}:{rows}"
        with psycopg.connect(c.conninfo(), autocommit=True) as conn:
            have = conn.execute(
                "SELECT obj_description(oid, 'pg_class') FROM pg_class"
                " WHERE relname = 'micro_t' AND relnamespace = 'public'::regnamespace"
            ).fetchone()
            if have and have[0] == marker:
                return
            ui.info(f"loading micro_t: {rows} rows (~{self.table_mb} MB) into {c.spec.name}")
            conn.execute("DROP TABLE IF EXISTS micro_t")
            conn.execute(
                "CREATE TABLE micro_t (id bigint PRIMARY KEY, v bigint, pad text)"
                " WITH (autovacuum_enabled = off)"
            )
            conn.execute(
                "INSERT INTO micro_t SELECT g, g %% 1000, repeat('x', 200)"
                " FROM generate_series(1, %s) g",
                (rows,),
            )
            conn.execute("VACUUM (FREEZE, ANALYZE) micro_t")
            conn.execute("CHECKPOINT")
            conn.execute(f"COMMENT ON TABLE micro_t IS '{marker}'")
            size = conn.execute("SELECT pg_relation_size('micro_t')").fetchone()[0]
            ui.info(f"micro_t: {size / 2**20:.0f} MB, shared_buffers {self.sb_mb} MB")

    # ------------------------------------------------------------------ runs
    def statement(self, workload: str, nrows: int) -> str:
        if workload == "seqscan":
            return "SELECT count(*), sum(v) FROM micro_t"
        return (
            f"SELECT count(*), sum(t.v) FROM generate_series(1, {int(self.args.lookups)}) g"
            f" JOIN micro_t t ON t.id = 1 + (hashint8(g * 7919) & 2147483647) % {int(nrows)}"
        )

    def run_one(self, c: clu.Cluster, cfg: Config, pages: str, workload: str, rep: int) -> dict:
        c.stop("fast")
        c.start()
        with psycopg.connect(c.conninfo(), autocommit=True) as conn:
            nrows = conn.execute("SELECT max(id) FROM micro_t").fetchone()[0]
            if workload == "index":
                conn.execute("SET enable_seqscan = off")
                conn.execute("SET enable_bitmapscan = off")
                conn.execute("SET enable_hashjoin = off")
                conn.execute("SET enable_mergejoin = off")
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            before = procfs.sample(pid)
            t0 = time.perf_counter()
            result = conn.execute(self.statement(workload, nrows)).fetchone()
            wall = time.perf_counter() - t0
            after = procfs.sample(pid)
        assert before is not None and after is not None
        d = after.minus(before)
        return {
            "pages": pages,
            "workload": workload,
            "config": cfg.name,
            "engine": cfg.engine,
            "rep": rep,
            "wall_s": wall,
            "utime_s": d["utime_s"],
            "stime_s": d["stime_s"],
            "minflt": d["minflt"],
            "majflt": d["majflt"],
            "result": [str(x) for x in result],
        }

    def main(self) -> int:
        if not self.args.no_build:
            build.ensure_built("release")
        self.out.mkdir(parents=True, exist_ok=True)
        runs: list[dict[str, Any]] = []
        answers: dict[tuple[str, str], list[str]] = {}
        failed = False
        with open(self.out / "runs.jsonl", "w") as raw:
            for pages in self.args.pages:
                c = self.cluster(pages)
                try:
                    self.configure(c, self.configs[0])
                    c.start()
                    self.load(c)
                    for rep in range(self.args.repeat):
                        for workload in self.args.workloads:
                            for cfg in self.configs:
                                self.configure(c, cfg)
                                r = self.run_one(c, cfg, pages, workload, rep)
                                raw.write(json.dumps(r) + "\n")
                                raw.flush()
                                runs.append(r)
                                key = (pages, workload)
                                if answers.setdefault(key, r["result"]) != r["result"]:
                                    ui.error(
                                        f"{cfg.name} {workload}: answer {r['result']} "
                                        f"differs from {answers[key]}"
                                    )
                                    failed = True
                                ui.info(
                                    f"{pages} {workload} {cfg.name} rep {rep + 1}: "
                                    f"{r['wall_s']:.3f} s"
                                )
                finally:
                    c.stop("fast")
        summary = summarize(runs)
        text = render(summary)
        (self.out / "summary.md").write_text(
            f"shared_buffers {self.sb_mb} MB, table ~{self.table_mb} MB, "
            f"{self.args.lookups} index lookups, {self.args.repeat} runs each\n\n{text}\n"
        )
        print(text)
        print(f"\nresults: {self.out}")
        return 1 if failed else 0
