/*
 * main.c - storagebench's command line: parses and checks the options (every
 * error is reported before any file is touched), runs the benchmark through
 * the harness and prints one JSON document (schema: README.md, "Output").
 *
 *   storagebench tablescan|bufman|logging --dir DIR [options]
 *   storagebench paths      the benchmarks and their paths, one per line
 */
#define _GNU_SOURCE
#include "json.h"
#include "sb.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

static const char *const BENCH_NAMES[] = {"tablescan", "bufman", "logging"};
static const char *const PATH_NAMES[SB_PATH_COUNT] = {
    "pread", "odirect", "mmap", "pmem2", "new", "recycled", "pmemlog", "pmem2log",
};

/* Which paths each benchmark takes (the paper's). */
static bool path_allowed(enum sb_bench b, enum sb_path p)
{
    switch (b) {
    case SB_TABLESCAN:
        return p == SB_PATH_PREAD || p == SB_PATH_ODIRECT || p == SB_PATH_MMAP;
    case SB_BUFMAN:
        return p == SB_PATH_PREAD || p == SB_PATH_MMAP || p == SB_PATH_PMEM2;
    case SB_LOGGING:
        return p == SB_PATH_NEW || p == SB_PATH_RECYCLED || p == SB_PATH_PMEMLOG ||
               p == SB_PATH_PMEM2LOG;
    }
    return false;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: storagebench tablescan|bufman|logging --dir DIR [options]\n"
            "       storagebench paths\n"
            "  --path NAME        tablescan: pread odirect mmap; bufman: pread mmap pmem2;\n"
            "                     logging: new recycled pmemlog pmem2log\n"
            "  --threads N        worker threads, one file each (default 1)\n"
            "  --page-size SIZE   tablescan, bufman: multiple of 4k (default 4k)\n"
            "  --file-size SIZE   per thread: data file / log capacity (default 64M)\n"
            "  --work SIZE        bytes per thread and repetition (default: file size)\n"
            "  --write-ratio R    bufman: share of writes, 0..1 or N%% (default 0)\n"
            "  --pool SIZE        bufman: DRAM buffer pool of all threads (default 1G)\n"
            "  --entry-size SIZE  logging (default 128)\n"
            "  --warmup N         warm-up repetitions (default 1)\n"
            "  --reps N           measured repetitions (default 3)\n"
            "  --max-seconds S    stop a repetition after S seconds (default 0: never)\n"
            "  --seed N           random seed (default 1)\n"
            "  --drop-caches      sync + drop the files in --dir from the page cache before each\n"
            "                     repetition (posix_fadvise DONTNEED; never global)\n"
            "SIZE: bytes with an optional k/m/g suffix (powers of 1024).\n"
            "Environment: PMEM2_FORCE_GRANULARITY (libpmem2), PMEM_IS_PMEM_FORCE (libpmemlog).\n");
}

/* "4k", "16K", "1G", "128", "2MiB" -> bytes; -1 if not a size. */
static long long parse_size(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0)
        return -1;
    long long mult = 1;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': mult = 1LL << 10; break;
        case 'm': case 'M': mult = 1LL << 20; break;
        case 'g': case 'G': mult = 1LL << 30; break;
        default: return -1;
        }
        end++;
        if (!strcasecmp(end, "ib") || !strcasecmp(end, "b"))
            end += strlen(end);
        if (*end)
            return -1;
    }
    double b = v * (double)mult;
    if (b != floor(b) || b > 9e18)
        return -1;
    return (long long)b;
}

/* A usage error: the message on stderr, exit status 2, nothing touched. */
__attribute__((format(printf, 1, 2))) static int die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "storagebench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 2;
}

static const char *fs_name(const char *dir)
{
    static char buf[32];
    struct statfs sf;
    if (statfs(dir, &sf) != 0)
        return "unknown";
    switch ((unsigned long)sf.f_type) {
    case 0x01021994UL: return "tmpfs";
    case 0xEF53UL: return "ext4";
    case 0x58465342UL: return "xfs";
    case 0x9123683EUL: return "btrfs";
    }
    snprintf(buf, sizeof buf, "0x%lx", (unsigned long)sf.f_type);
    return buf;
}

/* Bytes the run will add to dir: files that are missing or of another size
 * (data files and recycled logs are reused when their size fits). */
static unsigned long long bytes_needed(const struct sb_opts *o)
{
    const char *kind = o->bench == SB_LOGGING ? NULL : "data";
    unsigned long long need = 0;
    for (int t = 0; t < o->threads; t++) {
        char path[4096];
        struct stat st;
        if (kind) {
            sb_file_path(path, sizeof path, o->dir, kind, t);
            if (stat(path, &st) == 0 && (uint64_t)st.st_size == o->file_size)
                continue;
            need += o->file_size;
        } else {
            need += o->file_size + (2u << 20);   /* log + headers of any kind */
        }
    }
    return need;
}

/* qsort order of doubles. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* {"median", "min", "max"} of v[0..n) under key (nulls when n is 0). */
static void stats(struct json *j, const char *key, double *v, int n)
{
    json_obj(j, key);
    if (n == 0) {
        json_null(j, "median");
        json_null(j, "min");
        json_null(j, "max");
    } else {
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
        json_num(j, "median", med);
        json_num(j, "min", v[0]);
        json_num(j, "max", v[n - 1]);
    }
    json_obj_end(j);
}

static void head(struct json *j, const struct sb_opts *o)
{
    json_str(j, "schema", "storagebench");
    json_int(j, "schema_version", SB_SCHEMA_VERSION);
    json_str(j, "benchmark", BENCH_NAMES[o->bench]);
    json_str(j, "path", PATH_NAMES[o->path]);
}

/* The document of a finished run. */
static void emit(const struct sb_ctx *c)
{
    const struct sb_opts *o = &c->o;
    struct json j;
    json_init(&j, stdout);
    json_obj(&j, NULL);
    head(&j, o);
    json_obj(&j, "params");
    json_str(&j, "dir", o->dir);
    json_int(&j, "threads", o->threads);
    if (o->bench != SB_LOGGING)
        json_uint(&j, "page_size", o->page_size);
    else
        json_null(&j, "page_size");
    json_uint(&j, "file_size", o->file_size);
    json_uint(&j, "work_bytes", o->work_bytes ? o->work_bytes : o->file_size);
    if (o->bench == SB_BUFMAN) {
        json_num(&j, "write_ratio", o->write_ratio);
        json_uint(&j, "pool_size", o->pool_size);
    } else {
        json_null(&j, "write_ratio");
        json_null(&j, "pool_size");
    }
    if (o->bench == SB_LOGGING)
        json_uint(&j, "entry_size", o->entry_size);
    else
        json_null(&j, "entry_size");
    json_int(&j, "warmup", o->warmup);
    json_int(&j, "reps", o->reps);
    json_num(&j, "max_seconds", o->max_seconds);
    json_uint(&j, "seed", o->seed);
    json_bool(&j, "drop_caches", o->drop_caches);
    json_obj_end(&j);

    json_obj(&j, "env");
    json_str(&j, "fs_type", fs_name(o->dir));
    json_str(&j, "pmem2_granularity", c->granularity[0] ? c->granularity : NULL);
    json_str(&j, "PMEM2_FORCE_GRANULARITY", getenv("PMEM2_FORCE_GRANULARITY"));
    json_str(&j, "PMEM_IS_PMEM_FORCE", getenv("PMEM_IS_PMEM_FORCE"));
    if (c->is_pmem >= 0)
        json_bool(&j, "pmem_is_pmem", c->is_pmem != 0);
    else
        json_null(&j, "pmem_is_pmem");
    json_bool(&j, "files_reused", c->files_reused);
    json_num(&j, "prepare_seconds", c->prepare_seconds);
    json_str(&j, "cache_error", c->cache_error[0] ? c->cache_error : NULL);
    json_obj_end(&j);

    double gib[c->nreps > 0 ? c->nreps : 1], ops[c->nreps > 0 ? c->nreps : 1];
    int nm = 0, stopped = 0;
    json_arr(&j, "runs");
    for (int r = 0; r < c->nreps; r++) {
        const struct sb_rep *rp = &c->reps[r];
        uint64_t bytes = 0, nops = 0, reads = 0, writes = 0;
        for (int t = 0; t < o->threads; t++) {
            bytes += rp->thr[t].bytes;
            nops += rp->thr[t].ops;
            reads += rp->thr[t].reads;
            writes += rp->thr[t].writes;
        }
        double g = rp->seconds > 0 ? (double)bytes / (double)(1ULL << 30) / rp->seconds : 0;
        double os = rp->seconds > 0 ? (double)nops / rp->seconds : 0;
        json_obj(&j, NULL);
        json_int(&j, "rep", r);
        json_bool(&j, "warmup", rp->warmup);
        json_bool(&j, "stopped", rp->stopped);
        if (rp->caches_dropped)
            json_bool(&j, "caches_dropped", rp->caches_dropped > 0);
        else
            json_null(&j, "caches_dropped");
        json_num(&j, "seconds", rp->seconds);
        json_uint(&j, "bytes", bytes);
        json_uint(&j, "ops", nops);
        json_uint(&j, "reads", reads);
        json_uint(&j, "writes", writes);
        json_num(&j, "gib_per_s", g);
        json_num(&j, "ops_per_s", os);
        json_num(&j, "user_s", rp->user_s);
        json_num(&j, "sys_s", rp->sys_s);
        json_arr(&j, "threads");
        for (int t = 0; t < o->threads; t++) {
            json_obj(&j, NULL);
            json_uint(&j, "bytes", rp->thr[t].bytes);
            json_uint(&j, "ops", rp->thr[t].ops);
            json_num(&j, "seconds", rp->thr[t].seconds);
            json_obj_end(&j);
        }
        json_arr_end(&j);
        json_obj_end(&j);
        if (!rp->warmup) {
            gib[nm] = g;
            ops[nm] = os;
            nm++;
            stopped += rp->stopped;
        }
    }
    json_arr_end(&j);
    json_obj(&j, "summary");
    json_int(&j, "reps", nm);
    json_int(&j, "stopped_reps", stopped);
    stats(&j, "gib_per_s", gib, nm);
    stats(&j, "ops_per_s", ops, nm);
    json_obj_end(&j);
    json_obj_end(&j);
}

/* The document of a run that failed after the options were accepted. */
static void emit_error(const struct sb_opts *o, const char *msg)
{
    struct json j;
    json_init(&j, stdout);
    json_obj(&j, NULL);
    head(&j, o);
    json_str(&j, "error", msg);
    json_obj_end(&j);
}

/* Parse and check the options (usage errors: exit 2, nothing touched), run,
 * print the document (failure: exit 1 and a document with "error"). */
int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "paths")) {
        for (int b = 0; b < 3; b++)
            for (int p = 0; p < SB_PATH_COUNT; p++)
                if (path_allowed((enum sb_bench)b, (enum sb_path)p))
                    printf("%s %s\n", BENCH_NAMES[b], PATH_NAMES[p]);
        return 0;
    }
    struct sb_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return 1;
    struct sb_opts *o = &c->o;
    int b;
    for (b = 0; b < 3 && strcmp(argv[1], BENCH_NAMES[b]); b++)
        ;
    if (b == 3)
        return die("unknown benchmark '%s' (tablescan, bufman, logging)", argv[1]);
    *o = (struct sb_opts){.bench = (enum sb_bench)b, .threads = 1, .page_size = 4096,
                          .file_size = 64ULL << 20, .pool_size = 1ULL << 30, .entry_size = 128,
                          .warmup = 1, .reps = 3, .seed = 1};
    o->path = b == SB_LOGGING ? SB_PATH_RECYCLED : SB_PATH_PREAD;
    c->is_pmem = -1;

    enum { O_DIR = 256, O_PATH, O_THREADS, O_PAGE, O_FILE, O_WORK, O_WRATIO, O_POOL, O_ENTRY,
           O_WARMUP, O_REPS, O_MAXS, O_SEED, O_DROP, O_HELP };
    static const struct option longopts[] = {
        {"dir", required_argument, NULL, O_DIR},
        {"path", required_argument, NULL, O_PATH},
        {"threads", required_argument, NULL, O_THREADS},
        {"page-size", required_argument, NULL, O_PAGE},
        {"file-size", required_argument, NULL, O_FILE},
        {"work", required_argument, NULL, O_WORK},
        {"write-ratio", required_argument, NULL, O_WRATIO},
        {"pool", required_argument, NULL, O_POOL},
        {"entry-size", required_argument, NULL, O_ENTRY},
        {"warmup", required_argument, NULL, O_WARMUP},
        {"reps", required_argument, NULL, O_REPS},
        {"max-seconds", required_argument, NULL, O_MAXS},
        {"seed", required_argument, NULL, O_SEED},
        {"drop-caches", no_argument, NULL, O_DROP},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    optind = 2;
    int opt;
    long long v;
    char *end;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case O_DIR: o->dir = optarg; break;
        case O_PATH: {
            int p;
            for (p = 0; p < SB_PATH_COUNT && strcmp(optarg, PATH_NAMES[p]); p++)
                ;
            if (p == SB_PATH_COUNT)
                return die("unknown path '%s' (storagebench paths lists them)", optarg);
            if (!path_allowed(o->bench, (enum sb_path)p))
                return die("path '%s' is not one of this benchmark's (storagebench paths)",
                           optarg);
            o->path = (enum sb_path)p;
            break;
        }
        case O_THREADS:
            o->threads = (int)strtol(optarg, &end, 10);
            if (*end || o->threads < 1 || o->threads > SB_MAX_THREADS)
                return die("--threads must be 1..256, not '%s'", optarg);
            break;
        case O_PAGE: case O_FILE: case O_WORK: case O_POOL: case O_ENTRY:
            v = parse_size(optarg);
            if (v <= 0 && !(opt == O_WORK && v == 0))
                return die("not a size: '%s'", optarg);
            if (opt == O_PAGE) o->page_size = (size_t)v;
            if (opt == O_FILE) o->file_size = (uint64_t)v;
            if (opt == O_WORK) o->work_bytes = (uint64_t)v;
            if (opt == O_POOL) o->pool_size = (uint64_t)v;
            if (opt == O_ENTRY) o->entry_size = (size_t)v;
            break;
        case O_WRATIO: {
            double r = strtod(optarg, &end);
            if (*end == '%') {
                r /= 100;
                end++;
            }
            if (end == optarg || *end || r < 0 || r > 1)
                return die("--write-ratio must be 0..1 or 0%%..100%%, not '%s'", optarg);
            o->write_ratio = r;
            break;
        }
        case O_WARMUP: case O_REPS: {
            long n = strtol(optarg, &end, 10);
            if (*end || n < 0 || n > 1000 || (opt == O_REPS && n < 1))
                return die("bad repetition count '%s'", optarg);
            if (opt == O_WARMUP) o->warmup = (int)n; else o->reps = (int)n;
            break;
        }
        case O_MAXS:
            o->max_seconds = strtod(optarg, &end);
            if (*end || o->max_seconds < 0)
                return die("--max-seconds must be >= 0, not '%s'", optarg);
            break;
        case O_SEED:
            o->seed = strtoull(optarg, &end, 10);
            if (*end)
                return die("bad seed '%s'", optarg);
            break;
        case O_DROP: o->drop_caches = true; break;
        case O_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc)
        return die("unexpected argument '%s'", argv[optind]);
    if (!o->dir)
        return die("--dir is required");
    struct stat st;
    if (stat(o->dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return die("--dir %s is not a directory", o->dir);
    if (o->bench != SB_LOGGING) {
        if (o->page_size % 4096 != 0)
            return die("--page-size must be a multiple of 4k, not %zu", o->page_size);
        if (o->file_size < o->page_size || o->file_size % o->page_size != 0)
            return die("--file-size must be a multiple of the page size");
    } else {
        if (o->entry_size > o->file_size)
            return die("--entry-size must not exceed --file-size (the log)");
        if (o->work_bytes > o->file_size)
            return die("--work must not exceed --file-size for logging (the log's capacity)");
    }
    struct statvfs vfs;
    if (statvfs(o->dir, &vfs) == 0) {
        unsigned long long avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
        unsigned long long need = bytes_needed(o);
        if (need > avail) {
            return die("%s: the files need %llu MiB more, only %llu MiB free", o->dir,
                       need >> 20, avail >> 20);
        }
    }
    static const struct sb_workload *const W[] = {&sb_tablescan, &sb_bufman, &sb_logging};
    c->w = W[o->bench];
    if (sb_run(c) != 0) {
        fprintf(stderr, "storagebench: %s\n", c->error[0] ? c->error : "failed");
        emit_error(o, c->error[0] ? c->error : "failed");
        return 1;
    }
    emit(c);
    free(c->reps);
    free(c);
    return 0;
}
