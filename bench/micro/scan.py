"""The runs of ``./pgnvm micro scan`` (what they measure and with which configurations:
:mod:`bench.micro.settings`): one cluster per page size, loaded once, each configuration
applied to it in turn, every run after a restart."""

from __future__ import annotations

import json
import statistics
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.core import build, configs, paths, procfs, results, rootkind, selection, ui
from bench.core import cluster as clu
from bench.core.server import Server
from bench.micro import settings

SCHEMA_VERSION = 1


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
        self.sb_mb = settings.parse_size_mb(args.shared_buffers)
        self.table_mb = self.sb_mb * args.table_factor
        #: bench.core.selection's, built by the command line (the defaults without one)
        self.selection: selection.Selection = getattr(args, "selection", None) or (
            selection.select(settings.job(self.sb_mb), args.configs)
        )
        self.configs = self.selection.run
        self.unavailable: dict[str, str] = {}
        self.unknown: dict[str, str] = {}
        self.whole_db: str | None = None  # shared_buffers of mem_limit: table + index
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        default_out = paths.REPO_ROOT / "results" / f"micro-scan-{stamp}"
        self.out = Path(args.out) if args.out else default_out

    # ------------------------------------------------------------------ servers
    def common(self) -> dict[str, str]:
        return settings.common(self.sb_mb)

    def settings(self, cfg: configs.Config) -> dict[str, str]:
        """``cfg``'s settings on top of the common ones (mem_limit: shared_buffers for the
        whole table once it is loaded, the common value before)."""
        common = self.common()
        return configs.server_settings(cfg, common, self.whole_db or common["shared_buffers"])

    def server(self, pages: str) -> Server:
        """The cluster of this page size (one data directory for every configuration)."""
        name = f"micro-scan-{pages}"
        spec = clu.ClusterSpec(
            name=name,
            engine="base",
            storage="nvm",
            port=self.args.port + (0 if pages == "4k" else 1),
            flavour="release",
            huge=(pages == "2m"),
            settings=self.settings(configs.BY_NAME[configs.REFERENCE]),
        )
        if clu.Cluster.exists(name):
            c = clu.Cluster.load(name)
            if (c.spec.huge, c.spec.flavour, c.spec.nvm_root) != (
                spec.huge,
                spec.flavour,
                spec.nvm_root,  # another root (--nvm-root): initialised there
            ):
                c.destroy()
                c = clu.Cluster(spec)
                c.init()
        else:
            c = clu.Cluster(spec)
            c.init()
        return Server(c)

    def check_available(self, bindir: Path) -> None:
        """Drop the configurations the build or the machine cannot run (with a notice)."""
        sel = self.selection.judge(bindir)
        self.configs = sel.run
        self.unavailable = sel.refused
        self.unknown = sel.unknown

    def load(self, srv: Server) -> None:
        """Create micro_t (id, v, pad) of about table_mb megabytes, if not there yet."""
        rows = self.table_mb * 1024 * 1024 // 260  # ~260 bytes per heap tuple
        marker = f"{SCHEMA_VERSION}:{rows}"
        with srv.connect() as conn:
            have = conn.execute(
                "SELECT obj_description(oid, 'pg_class') FROM pg_class"
                " WHERE relname = 'micro_t' AND relnamespace = 'public'::regnamespace"
            ).fetchone()
            if not (have and have[0] == marker):
                ui.info(f"loading micro_t: {rows} rows (~{self.table_mb} MB) into {srv.name}")
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
            if any(c.prewarm for c in self.configs):
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
            total = conn.execute("SELECT pg_total_relation_size('micro_t')").fetchone()[0]
        self.whole_db = configs.whole_db_shared_buffers(int(total))

    # ------------------------------------------------------------------ runs
    def statement(self, workload: str, nrows: int) -> str:
        if workload == "seqscan":
            return "SELECT count(*), sum(v) FROM micro_t"
        return (
            f"SELECT count(*), sum(t.v) FROM generate_series(1, {int(self.args.lookups)}) g"
            f" JOIN micro_t t ON t.id = 1 + (hashint8(g * 7919) & 2147483647) % {int(nrows)}"
        )

    def run_one(
        self, srv: Server, cfg: configs.Config, pages: str, workload: str, rep: int
    ) -> dict:
        srv.restart()
        if cfg.prewarm:
            srv.prewarm("SELECT 'micro_t'::regclass UNION ALL SELECT 'micro_t_pkey'::regclass")
        with srv.connect() as conn:
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
        self.check_available(build.bindir("release"))
        self.out.mkdir(parents=True, exist_ok=True)
        runs: list[dict[str, Any]] = []
        answers: dict[tuple[str, str], list[str]] = {}
        failed = False
        with open(self.out / "runs.jsonl", "w") as raw:
            for pages in self.args.pages:
                srv = self.server(pages)
                try:
                    srv.stop()
                    srv.apply_config(self.configs[0], self.settings(self.configs[0]))
                    srv.start()
                    self.load(srv)
                    for rep in range(self.args.repeat):
                        for workload in self.args.workloads:
                            for cfg in self.configs:
                                srv.apply_config(cfg, self.settings(cfg))
                                r = self.run_one(srv, cfg, pages, workload, rep)
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
                    srv.stop()
        summary = summarize(runs)
        text = render(summary)
        notes = [f"{n}: not available: {why}" for n, why in self.unavailable.items()]
        notes += [f"{n}: availability unknown: {why}" for n, why in self.unknown.items()]
        env = results.environment()
        results.write_json(self.out / "env.json", env)
        notes.insert(0, rootkind.report_text(env) or "")
        (self.out / "summary.md").write_text(
            f"shared_buffers {self.sb_mb} MB, table ~{self.table_mb} MB, "
            f"{self.args.lookups} index lookups, {self.args.repeat} runs each\n"
            + "".join(f"{n}\n" for n in notes)
            + f"\n{text}\n"
        )
        print("\n".join([text, *notes]))
        print(f"\nresults: {self.out}")
        return 1 if failed else 0
