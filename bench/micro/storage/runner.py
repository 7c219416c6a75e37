"""Runs the jobs of :mod:`plan`: builds storagebench, makes the targets' directories (every
target is mounted and checked for space before anything runs), runs one storagebench per
job with progress and an ETA, the fio checks after a target's last job on the data files,
removes each kind of file after its last job, and writes the report. Ctrl-C stops the
running job, keeps what finished, and writes the report of it."""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.core import osuser, paths, procfs, results, storage, ui
from bench.micro.storage import analysis, fio, plan, report, targets
from bench.micro.storage.plan import FORCE_VARS, Job, Options

SOURCE = paths.REPO_ROOT / "storagebench"


def build_binary() -> Path:
    """``make -C storagebench B=$PGNVM_HOME/storagebench`` (incremental); the binary."""
    out = paths.pgnvm_home() / "storagebench"
    r = subprocess.run(
        ["make", "-s", "-C", str(SOURCE), f"B={out}"], capture_output=True, text=True, check=False
    )
    if r.returncode != 0:
        raise RuntimeError(f"building storagebench failed:\n{(r.stderr or r.stdout).strip()}")
    return out / "storagebench"


def command(binary: Path, job: Job, o: Options, t: targets.Target) -> list[str]:
    """storagebench's command line for ``job`` on target ``t``."""
    cmd = [
        str(binary),
        job.bench,
        "--dir",
        str(t.dir),
        "--path",
        job.v.binary_path,
        "--threads",
        str(job.threads),
        "--warmup",
        str(o.warmup),
        "--reps",
        str(o.reps),
        "--max-seconds",
        f"{o.max_seconds:g}",
        "--seed",
        str(o.seed),
    ]
    if job.bench == "logging":
        cmd += ["--entry-size", str(job.size), "--file-size", str(o.log_size)]
    else:
        cmd += ["--page-size", str(job.size), "--file-size", str(o.file_size)]
    if job.bench == "bufman":
        cmd += ["--write-ratio", f"{job.write_ratio}%", "--pool", str(o.pool_size)]
    if t.drop_caches:
        cmd.append("--drop-caches")
    return cmd


def job_env(job: Job) -> dict[str, str]:
    """The environment: the variant's forcing variables, and no inherited ones."""
    env = {k: v for k, v in os.environ.items() if k not in FORCE_VARS}
    env.update(job.v.env)
    return env


class Run:
    def __init__(self, benches: list[str], o: Options, out: Path | None) -> None:
        self.benches = benches
        self.o = o
        self.jobs = plan.validate(benches, o)
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        self.out = out or paths.REPO_ROOT / "results" / f"micro-storage-{stamp}"
        self.targets: dict[str, targets.Target] = {}
        self.durations: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.failed = 0

    # ------------------------------------------------------------------ before anything
    def prepare(self) -> Path:
        """Build, mount and check every target: any error here comes before any run."""
        if self.o.fio and not shutil.which("fio"):
            raise targets.TargetError(
                "fio is not installed (Debian: apt-get install fio; ./pgnvm as root does it), "
                "or run with --no-fio"
            )
        binary = build_binary()
        try:
            for name in self.o.targets:
                js = [j for j in self.jobs if j.target == name]
                if not js:
                    continue
                t = targets.resolve(name)
                self.targets[name] = t
                pool = self.o.pool_size if any(j.bench == "bufman" for j in js) else 0
                targets.check_space(t, plan.bytes_on_target(js, self.o), pool)
        except BaseException:
            for t in self.targets.values():  # leave no run directory behind
                targets.cleanup(t)
            raise
        return binary

    def env_doc(self) -> dict[str, Any]:
        return {
            "started": datetime.now().isoformat(timespec="seconds"),
            "commit": paths.git_commit(),
            "kernel": platform.release(),
            "cpu": procfs.cpu_model(),
            "cpus": os.cpu_count(),
            "mem_total_gib": round(procfs.mem_total_bytes() / (1 << 30), 1),
            "root": osuser.is_root(),
            "load1_start": procfs.loadavg(),
            "benchmarks": self.benches,
            "options": {**self.o.__dict__, "paths": {b: list(v) for b, v in self.o.paths.items()}},
            "targets": {n: t.describe() for n, t in self.targets.items()},
            "jobs": len(self.jobs),
            "nvm_root": storage.describe_nvm_root().to_json(),
        }

    # ------------------------------------------------------------------ runs
    def eta(self, i: int) -> float:
        """Seconds left: each remaining job at the mean of finished jobs of its kind."""
        done = [d for ds in self.durations.values() for d in ds]
        fallback = statistics.mean(done) if done else None
        left = 0.0
        for j in self.jobs[i:]:
            ds = self.durations.get((j.target, j.bench))
            if ds:
                left += statistics.mean(ds)
            elif fallback is not None:
                left += fallback
            else:
                left += plan.estimate_seconds([j], self.o)
        return left

    def run_job(self, binary: Path, job: Job, t: targets.Target) -> dict[str, Any]:
        cmd = command(binary, job, self.o, t)
        load = procfs.loadavg()
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, env=job_env(job), check=False)
        wall = time.monotonic() - t0
        self.durations[(job.target, job.bench)].append(wall)
        try:
            doc = json.loads(p.stdout)
        except json.JSONDecodeError:
            doc = {"error": (p.stderr.strip() or f"exit {p.returncode}")[-500:]}
        if p.returncode != 0 and "error" not in doc:
            doc["error"] = p.stderr.strip()[-500:] or f"exit {p.returncode}"
        rec: dict[str, Any] = {
            "job": job.key(),
            "label": job.label(),
            "target_note": t.note,
            "forced_env": job.v.env,
            "wall_s": round(wall, 3),
            "load1": load,
            "command": " ".join(cmd),
            "doc": doc,
        }
        if job.target == "nvm-2m" and job.files == "data":
            rec["shmem_huge_bytes"] = targets.shmem_huge_bytes()
        problems = analysis.check_doc(doc) if "error" not in doc else []
        if problems:
            doc["error"] = "storagebench's document does not match schema 1: " + "; ".join(problems)
        return rec

    def run_fio(self, t: targets.Target, fio_out: Any) -> None:
        """fio on the target's data files, for every thread count of the plan."""
        data = [j for j in self.jobs if j.target == t.name and j.files == "data"]
        most = max(j.threads for j in data)
        for pattern in fio.PATTERNS:
            for threads in self.o.threads:
                if threads > most:
                    continue
                files = [t.dir / f"sb-data-{i}.dat" for i in range(threads)]
                if not all(f.exists() for f in files):
                    continue
                try:
                    r = fio.measure(
                        pattern,
                        files,
                        self.o.file_size,
                        self.o.file_size,
                        self.o.max_seconds,
                        self.o.reps,
                        (lambda d=t.dir: results.drop_os_caches(d)) if t.drop_caches else None,
                    )
                except (RuntimeError, ValueError, KeyError) as e:
                    ui.error(f"fio {pattern} on {t.name}, {threads} threads: {e}")
                    continue
                r["target"] = t.name
                fio_out.write(json.dumps(r) + "\n")
                fio_out.flush()
                ui.info(f"fio {t.name} {pattern} t{threads}: {r['gib_per_s']:.3f} GiB/s")

    def main(self) -> int:
        binary = self.prepare()
        self.out.mkdir(parents=True, exist_ok=True)
        env = self.env_doc()
        (self.out / "env.json").write_text(json.dumps(env, indent=2) + "\n")
        n = len(self.jobs)
        ui.step(
            f"{n} storagebench runs on {', '.join(self.targets)} (about "
            f"{ui.fmt_seconds(plan.estimate_seconds(self.jobs, self.o))}); results: {self.out}"
        )
        for t in self.targets.values():
            ui.info(f"target {t.name}: {t.dir} ({t.fs}); {t.note}")
        interrupted = False
        t_start = time.monotonic()
        try:
            with (
                open(self.out / "runs.jsonl", "a") as raw,
                open(self.out / "fio.jsonl", "a") as fio_out,
            ):
                for i, job in enumerate(self.jobs):
                    t = self.targets[job.target]
                    rec = self.run_job(binary, job, t)
                    raw.write(json.dumps(rec) + "\n")
                    raw.flush()
                    self._progress(i, n, t_start, job, rec)
                    rest = self.jobs[i + 1 :]
                    if not any(j.target == t.name and j.files == job.files for j in rest):
                        if job.files == "data" and self.o.fio:
                            self.run_fio(t, fio_out)
                        targets.remove_files(t, job.files)
                    if not any(j.target == t.name for j in rest):
                        targets.cleanup(t)
        except KeyboardInterrupt:
            interrupted = True
            ui.error("interrupted: the report shows the runs that finished")
        finally:
            for t in self.targets.values():
                targets.cleanup(t)
        env["load1_end"] = procfs.loadavg()
        env["wall_s"] = round(time.monotonic() - t_start, 1)
        env["interrupted"] = interrupted
        (self.out / "env.json").write_text(json.dumps(env, indent=2) + "\n")
        text = report.write(self.out)
        print(text)
        print(f"\nresults: {self.out}")
        if interrupted:
            return 130
        return 1 if self.failed else 0

    def _progress(self, i: int, n: int, t_start: float, job: Job, rec: dict[str, Any]) -> None:
        elapsed = time.monotonic() - t_start
        head = f"[{i + 1}/{n} {ui.fmt_seconds(elapsed)}, ETA {ui.fmt_seconds(self.eta(i + 1))}]"
        doc = rec["doc"]
        if "error" in doc:
            self.failed += 1
            ui.error(f"{head} {job.label()}: {doc['error']}")
            return
        g = doc["summary"]["gib_per_s"]
        ops = doc["summary"]["ops_per_s"]["median"]
        ui.info(
            f"{head} {job.label()}: {g['median']:.3f} GiB/s [{g['min']:.3f}-{g['max']:.3f}], "
            f"{ops / 1e3:.0f} kops/s"
        )
