/*
 * test_storagebench.c - tests of storagebench's units: every page path reads
 * back what it wrote (also through another path), libpmem2 reports the
 * granularity it was forced to, our libpmem2 log and a libpmemlog pool
 * survive reopening with every entry intact and in order (and a torn append
 * is not in the log), the logging paths' file logic (new file grows, recycled
 * file keeps its size and its bytes past the appends), exact write ratios,
 * the deadline, the JSON writer.
 *
 * Each test gets a fresh directory below $SB_TEST_DIR (default: /dev/shm, or
 * /tmp without it).  Prints one line per test and "N passed, M failed".
 */
#define _GNU_SOURCE
#include "json.h"
#include "pager.h"
#include "plog.h"
#include "sb.h"

#include <errno.h>
#include <fcntl.h>
#include <libpmemlog.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;   /* of the current test */

#define EXPECT(cond)                                                                    \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "    %s:%d: expected %s\n", __FILE__, __LINE__, #cond);     \
            failures++;                                                                 \
        }                                                                               \
    } while (0)

static char skip_reason[256];

/* ------------------------------------------------------------------ helpers */

static void pattern(char *buf, size_t len, uint64_t key)
{
    uint64_t s = sb_seed(key, 7, 7);
    sb_fill_random(buf, len, &s);
}

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static char *read_all(const char *path, size_t *len)
{
    off_t n = file_size(path);
    int fd = open(path, O_RDONLY);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (fd < 0 || !buf || pread(fd, buf, (size_t)n, 0) != n) {
        if (fd >= 0)
            close(fd);
        free(buf);
        return NULL;
    }
    close(fd);
    *len = (size_t)n;
    return buf;
}

/* A context for running a workload through the harness. */
static struct sb_ctx *ctx(const char *dir, enum sb_bench b, enum sb_path p)
{
    struct sb_ctx *c = calloc(1, sizeof *c);
    c->o = (struct sb_opts){.bench = b, .path = p, .dir = dir, .threads = 2, .page_size = 4096,
                            .file_size = 1 << 20, .pool_size = 256 << 10, .entry_size = 128,
                            .warmup = 0, .reps = 2, .seed = 42};
    c->is_pmem = -1;
    const struct sb_workload *w[] = {&sb_tablescan, &sb_bufman, &sb_logging};
    c->w = w[b];
    return c;
}

static void free_ctx(struct sb_ctx *c)
{
    free(c->reps);
    free(c);
}

/* ------------------------------------------------------------------ pages */

/* Write every page over `wpath`, read them back over the same path, close,
 * reopen over `rpath` and read them back again. */
static void roundtrip(const char *dir, enum sb_path wpath, enum sb_path rpath, size_t P)
{
    char file[4096], err[SB_ERRLEN];
    bool reused;
    snprintf(file, sizeof file, "%s/rt-%d-%d-%zu.dat", dir, wpath, rpath, P);
    const uint64_t npages = 32;
    EXPECT(sb_data_file(file, npages * P, 1, &reused, err, sizeof err) == 0);
    char *page = sb_alloc(4096, P), *back = sb_alloc(4096, P);
    struct sb_pager p;
    if (sb_pager_open(&p, file, wpath, P, true, err, sizeof err) != 0) {
        if (wpath == SB_PATH_ODIRECT && strstr(err, "Invalid argument")) {
            snprintf(skip_reason, sizeof skip_reason, "O_DIRECT not supported in %s", dir);
            goto out;
        }
        fprintf(stderr, "    %s\n", err);
        failures++;
        goto out;
    }
    EXPECT(p.npages == npages);
    for (uint64_t i = 0; i < npages; i++) {
        pattern(page, P, i * 31 + wpath);
        EXPECT(sb_pager_write(&p, i, page) == 0);
    }
    for (uint64_t i = 0; i < npages; i++) {
        pattern(page, P, i * 31 + wpath);
        EXPECT(sb_pager_read(&p, i, back) == 0);
        EXPECT(memcmp(page, back, P) == 0);
    }
    EXPECT(sb_pager_close(&p) == 0);
    EXPECT(sb_pager_open(&p, file, rpath, P, false, err, sizeof err) == 0);
    for (uint64_t i = 0; i < npages; i++) {
        pattern(page, P, i * 31 + wpath);
        EXPECT(sb_pager_read(&p, i, back) == 0);
        EXPECT(memcmp(page, back, P) == 0);
    }
    EXPECT(sb_pager_close(&p) == 0);
out:
    free(page);
    free(back);
}

static void test_pread_reads_back(const char *dir)
{
    roundtrip(dir, SB_PATH_PREAD, SB_PATH_MMAP, 4096);
    roundtrip(dir, SB_PATH_PREAD, SB_PATH_MMAP, 16384);
}

static void test_odirect_reads_back(const char *dir) { roundtrip(dir, SB_PATH_ODIRECT, SB_PATH_PREAD, 4096); }

static void test_mmap_reads_back(const char *dir)
{
    roundtrip(dir, SB_PATH_MMAP, SB_PATH_PREAD, 4096);
    roundtrip(dir, SB_PATH_MMAP, SB_PATH_PREAD, 16384);
}

static void test_pmem2_reads_back(const char *dir)
{
    roundtrip(dir, SB_PATH_PMEM2, SB_PATH_PREAD, 4096);
    roundtrip(dir, SB_PATH_PMEM2, SB_PATH_MMAP, 16384);
}

/* PMEM2_FORCE_GRANULARITY=CACHE_LINE: libpmem2 says so (and persists with
 * cache-line flushes); the data still reads back. */
static void test_pmem2_forced_cache_line(const char *dir)
{
    char file[4096], err[SB_ERRLEN];
    bool reused;
    snprintf(file, sizeof file, "%s/g.dat", dir);
    EXPECT(sb_data_file(file, 8 * 4096, 3, &reused, err, sizeof err) == 0);
    struct sb_pager p;
    unsetenv("PMEM2_FORCE_GRANULARITY");
    EXPECT(sb_pager_open(&p, file, SB_PATH_PMEM2, 4096, true, err, sizeof err) == 0);
    const char *detected = sb_pager_granularity(&p);
    EXPECT(strcmp(detected, "page") == 0 || strcmp(detected, "cache-line") == 0 ||
           strcmp(detected, "byte") == 0);
    sb_pager_close(&p);
    setenv("PMEM2_FORCE_GRANULARITY", "CACHE_LINE", 1);
    EXPECT(sb_pager_open(&p, file, SB_PATH_PMEM2, 4096, true, err, sizeof err) == 0);
    EXPECT(strcmp(sb_pager_granularity(&p), "cache-line") == 0);
    sb_pager_close(&p);
    roundtrip(dir, SB_PATH_PMEM2, SB_PATH_PREAD, 4096);
    unsetenv("PMEM2_FORCE_GRANULARITY");
    struct sb_pager q;
    EXPECT(sb_pager_open(&q, file, SB_PATH_PREAD, 4096, false, err, sizeof err) == 0);
    EXPECT(strcmp(sb_pager_granularity(&q), "") == 0);
    sb_pager_close(&q);
}

/* ------------------------------------------------------------------ logs */

struct walk_state {
    size_t entry;
    uint64_t next;   /* sequence number expected next */
    int bad;
};

/* An entry: its sequence number, then a pattern derived from it. */
static void make_entry(char *buf, size_t len, uint64_t seq)
{
    pattern(buf, len, seq + 1000);
    memcpy(buf, &seq, sizeof seq);
}

static int check_entry(const void *buf, size_t len, void *arg)
{
    struct walk_state *w = arg;
    char want[512];
    make_entry(want, w->entry, w->next);
    if (len != w->entry || memcmp(buf, want, len) != 0)
        w->bad++;
    w->next++;
    return 0;
}

static int check_entry_pmemlog(const void *buf, size_t len, void *arg)
{
    return check_entry(buf, len, arg) == 0;   /* pmemlog_walk: non-zero goes on */
}

static void test_plog_survives_reopen(const char *dir)
{
    char file[4096], err[SB_ERRLEN], e[100];
    snprintf(file, sizeof file, "%s/plog.dat", dir);
    const uint64_t cap = 100 * 1000;
    EXPECT(plog_create(file, cap, err, sizeof err) == 0);
    EXPECT(file_size(file) == (off_t)(PLOG_HEADER + cap));
    struct plog l;
    EXPECT(plog_open(&l, file, err, sizeof err) == 0);
    EXPECT(l.tail == 0 && l.capacity == cap);
    for (uint64_t i = 0; i < 1000; i++) {
        make_entry(e, sizeof e, i);
        EXPECT(plog_append(&l, e, sizeof e) == 0);
    }
    errno = 0;
    EXPECT(plog_append(&l, e, 1) == -1 && errno == ENOSPC);   /* full */
    EXPECT(plog_close(&l) == 0);

    EXPECT(plog_open(&l, file, err, sizeof err) == 0);
    EXPECT(l.tail == cap);
    struct walk_state w = {.entry = sizeof e};
    plog_walk(&l, sizeof e, check_entry, &w);
    EXPECT(w.next == 1000 && w.bad == 0);
    plog_reset(&l);
    plog_close(&l);
    EXPECT(plog_open(&l, file, err, sizeof err) == 0);
    EXPECT(l.tail == 0);
    plog_close(&l);
}

/* An entry copied but whose tail was never written (a crash between the two
 * steps of plog_append) is not in the log after reopening. */
static void test_plog_torn_append_invisible(const char *dir)
{
    char file[4096], err[SB_ERRLEN], e[64];
    snprintf(file, sizeof file, "%s/torn.dat", dir);
    EXPECT(plog_create(file, 4096, err, sizeof err) == 0);
    struct plog l;
    EXPECT(plog_open(&l, file, err, sizeof err) == 0);
    for (uint64_t i = 0; i < 3; i++) {
        make_entry(e, sizeof e, i);
        EXPECT(plog_append(&l, e, sizeof e) == 0);
    }
    make_entry(e, sizeof e, 3);
    l.memcpy_fn(l.data + l.tail, e, sizeof e, 0);   /* step 1 only */
    plog_close(&l);
    EXPECT(plog_open(&l, file, err, sizeof err) == 0);
    EXPECT(l.tail == 3 * sizeof e);
    struct walk_state w = {.entry = sizeof e};
    plog_walk(&l, sizeof e, check_entry, &w);
    EXPECT(w.next == 3 && w.bad == 0);
    plog_close(&l);
}

static void test_plog_rejects_other_files(const char *dir)
{
    char file[4096], err[SB_ERRLEN];
    bool reused;
    struct plog l;
    snprintf(file, sizeof file, "%s/notalog.dat", dir);
    EXPECT(sb_data_file(file, 8192, 5, &reused, err, sizeof err) == 0);
    EXPECT(plog_open(&l, file, err, sizeof err) == -1);
    EXPECT(strstr(err, "not a log") != NULL);
    snprintf(file, sizeof file, "%s/damaged.dat", dir);
    EXPECT(plog_create(file, 4096, err, sizeof err) == 0);
    EXPECT(truncate(file, 6000) == 0);   /* capacity now exceeds the file */
    EXPECT(plog_open(&l, file, err, sizeof err) == -1);
    EXPECT(strstr(err, "damaged") != NULL);
}

static void test_pmemlog_survives_reopen(const char *dir)
{
    char file[4096], e[128];
    snprintf(file, sizeof file, "%s/pmemlog.dat", dir);
    PMEMlogpool *plp = pmemlog_create(file, PMEMLOG_MIN_POOL, 0644);
    EXPECT(plp != NULL);
    if (!plp)
        return;
    for (uint64_t i = 0; i < 2000; i++) {
        make_entry(e, sizeof e, i);
        EXPECT(pmemlog_append(plp, e, sizeof e) == 0);
    }
    pmemlog_close(plp);
    plp = pmemlog_open(file);
    EXPECT(plp != NULL);
    if (!plp)
        return;
    EXPECT(pmemlog_tell(plp) == 2000 * (long long)sizeof e);
    struct walk_state w = {.entry = sizeof e};
    pmemlog_walk(plp, sizeof e, check_entry_pmemlog, &w);
    EXPECT(w.next == 2000 && w.bad == 0);
    pmemlog_close(plp);
}

/* ------------------------------------------------------------------ workloads */

/* new: the file is created empty before a repetition and grows by every
 * append; gone after it. */
static void test_logging_new_file(const char *dir)
{
    struct sb_ctx *c = ctx(dir, SB_LOGGING, SB_PATH_NEW);
    c->o.threads = 1;
    c->o.work_bytes = 100 * 128;
    char file[4096];
    sb_file_path(file, sizeof file, dir, "log-new", 0);
    EXPECT(sb_logging.prepare(c) == 0);
    EXPECT(sb_logging.open_rep(c, 0, 0) == 0);
    EXPECT(file_size(file) == 0);
    struct sb_thread_result r = {0};
    EXPECT(sb_logging.run(c, 0, &r) == 0);
    EXPECT(r.ops == 100 && r.bytes == 100 * 128);
    EXPECT(file_size(file) == 100 * 128);
    EXPECT(sb_logging.close_rep(c, 0) == 0);
    EXPECT(file_size(file) == -1);
    sb_logging.finish(c);
    free_ctx(c);
}

/* recycled: prepared in full once; a repetition overwrites from offset 0,
 * the size and the bytes past the appends stay; prepared files are reused. */
static void test_logging_recycled_file(const char *dir)
{
    struct sb_ctx *c = ctx(dir, SB_LOGGING, SB_PATH_RECYCLED);
    c->o.threads = 1;
    c->o.file_size = 64 << 10;
    c->o.work_bytes = 16 << 10;
    char file[4096];
    sb_file_path(file, sizeof file, dir, "log-recycled", 0);
    EXPECT(sb_logging.prepare(c) == 0);
    EXPECT(!c->files_reused);
    size_t n0, n1;
    char *before = read_all(file, &n0);
    EXPECT(before && n0 == 64 << 10);
    for (int rep = 0; rep < 2; rep++) {
        EXPECT(sb_logging.open_rep(c, 0, rep) == 0);
        struct sb_thread_result r = {0};
        EXPECT(sb_logging.run(c, 0, &r) == 0);
        EXPECT(r.bytes == 16 << 10);
        EXPECT(sb_logging.close_rep(c, 0) == 0);
        char *after = read_all(file, &n1);
        EXPECT(after && n1 == n0);
        if (before && after) {
            EXPECT(memcmp(before, after, 16 << 10) != 0);                 /* overwritten */
            EXPECT(memcmp(before + (16 << 10), after + (16 << 10), n0 - (16 << 10)) == 0);
        }
        free(after);
    }
    sb_logging.finish(c);
    free_ctx(c);
    c = ctx(dir, SB_LOGGING, SB_PATH_RECYCLED);
    c->o.threads = 1;
    c->o.file_size = 64 << 10;
    EXPECT(sb_logging.prepare(c) == 0);
    EXPECT(c->files_reused);
    sb_logging.finish(c);
    free_ctx(c);
    free(before);
}

/* pmemlog / pmem2log through the harness: after a run each log holds the
 * last repetition's appends (rewound before each), readable on reopening. */
static void test_logging_libraries(const char *dir)
{
    for (int k = 0; k < 2; k++) {
        enum sb_path p = k ? SB_PATH_PMEM2LOG : SB_PATH_PMEMLOG;
        struct sb_ctx *c = ctx(dir, SB_LOGGING, p);
        c->o.work_bytes = 10 * 128;
        EXPECT(sb_run(c) == 0);
        EXPECT(c->nreps == 2 && c->reps[1].thr[1].ops == 10);
        for (int t = 0; t < 2; t++) {
            char file[4096], err[SB_ERRLEN];
            sb_file_path(file, sizeof file, dir, k ? "log-pmem2log" : "log-pmemlog", t);
            if (k) {
                struct plog l;
                EXPECT(plog_open(&l, file, err, sizeof err) == 0);
                EXPECT(l.tail == 10 * 128 && l.capacity >= c->o.file_size);
                plog_close(&l);
            } else {
                PMEMlogpool *plp = pmemlog_open(file);
                EXPECT(plp && pmemlog_tell(plp) == 10 * 128);
                EXPECT(plp && pmemlog_nbyte(plp) >= c->o.file_size);
                if (plp)
                    pmemlog_close(plp);
            }
        }
        if (k)
            EXPECT(c->granularity[0] != '\0');
        else
            EXPECT(c->is_pmem == 0 || c->is_pmem == 1);
        free_ctx(c);
    }
}

/* Every path of the table scan and the buffer manager runs its whole work;
 * the write ratio is exact. */
static void test_page_workloads(const char *dir)
{
    const enum sb_path scan[] = {SB_PATH_PREAD, SB_PATH_MMAP};
    for (size_t i = 0; i < 2; i++) {
        struct sb_ctx *c = ctx(dir, SB_TABLESCAN, scan[i]);
        EXPECT(sb_run(c) == 0);
        EXPECT(c->reps[0].thr[0].ops == 256 && c->reps[1].thr[1].bytes == 1 << 20);
        EXPECT(!c->reps[0].stopped);
        free_ctx(c);
    }
    const enum sb_path bm[] = {SB_PATH_PREAD, SB_PATH_MMAP, SB_PATH_PMEM2};
    for (size_t i = 0; i < 3; i++) {
        struct sb_ctx *c = ctx(dir, SB_BUFMAN, bm[i]);
        c->o.write_ratio = 0.2;
        EXPECT(sb_run(c) == 0);
        struct sb_thread_result *r = &c->reps[1].thr[1];
        EXPECT(r->ops == 256 && r->writes == 51 && r->reads == 205);
        EXPECT(c->files_reused);   /* the table scan's files */
        if (bm[i] == SB_PATH_PMEM2)
            EXPECT(c->granularity[0] != '\0');
        free_ctx(c);
    }
}

/* The deadline stops a repetition that would run far longer. */
static void test_deadline_stops(const char *dir)
{
    struct sb_ctx *c = ctx(dir, SB_TABLESCAN, SB_PATH_PREAD);
    c->o.work_bytes = 1ULL << 40;   /* a terabyte, in passes over 1 MiB */
    c->o.max_seconds = 0.05;
    c->o.reps = 1;
    double t0 = sb_now();
    EXPECT(sb_run(c) == 0);
    EXPECT(sb_now() - t0 < 5);
    EXPECT(c->reps[0].stopped);
    EXPECT(c->reps[0].thr[0].ops > 0);
    free_ctx(c);
}

static void test_json_writer(const char *dir)
{
    (void)dir;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct json j;
    json_init(&j, f);
    json_obj(&j, NULL);
    json_str(&j, "s", "a\"b\\c\n\x01");
    json_int(&j, "i", -3);
    json_arr(&j, "a");
    json_num(&j, NULL, 1.5);
    json_bool(&j, NULL, true);
    json_null(&j, NULL);
    json_obj(&j, NULL);
    json_obj_end(&j);
    json_arr_end(&j);
    json_num(&j, "nan", 0.0 / 0.0);
    json_str(&j, "none", NULL);
    json_obj_end(&j);
    fclose(f);
    const char *want = "{\"s\":\"a\\\"b\\\\c\\n\\u0001\",\"i\":-3,\"a\":[1.5,true,null,{}],"
                       "\"nan\":null,\"none\":null}\n";
    EXPECT(buf && strcmp(buf, want) == 0);
    if (buf && strcmp(buf, want) != 0)
        fprintf(stderr, "    got %s", buf);
    free(buf);
}

/* ------------------------------------------------------------------ runner */

static const struct {
    const char *name;
    void (*fn)(const char *dir);
} TESTS[] = {
    {"pread_reads_back", test_pread_reads_back},
    {"odirect_reads_back", test_odirect_reads_back},
    {"mmap_reads_back", test_mmap_reads_back},
    {"pmem2_reads_back", test_pmem2_reads_back},
    {"pmem2_forced_cache_line", test_pmem2_forced_cache_line},
    {"plog_survives_reopen", test_plog_survives_reopen},
    {"plog_torn_append_invisible", test_plog_torn_append_invisible},
    {"plog_rejects_other_files", test_plog_rejects_other_files},
    {"pmemlog_survives_reopen", test_pmemlog_survives_reopen},
    {"logging_new_file", test_logging_new_file},
    {"logging_recycled_file", test_logging_recycled_file},
    {"logging_libraries", test_logging_libraries},
    {"page_workloads", test_page_workloads},
    {"deadline_stops", test_deadline_stops},
    {"json_writer", test_json_writer},
};

int main(void)
{
    const char *base = getenv("SB_TEST_DIR");
    if (!base)
        base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    char root[4096];
    snprintf(root, sizeof root, "%s/storagebench-test-XXXXXX", base);
    if (!mkdtemp(root)) {
        fprintf(stderr, "cannot create a directory below %s: %s\n", base, strerror(errno));
        printf("0 passed, 1 failed\n");
        return 1;
    }
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s", root, TESTS[i].name);
        mkdir(dir, 0755);
        failures = 0;
        skip_reason[0] = '\0';
        double t0 = sb_now();
        TESTS[i].fn(dir);
        double ms = (sb_now() - t0) * 1e3;
        if (failures) {
            failed++;
            printf("FAIL %s (%.0f ms)\n", TESTS[i].name, ms);
        } else if (skip_reason[0]) {
            skipped++;
            printf("skip %s: %s\n", TESTS[i].name, skip_reason);
        } else {
            passed++;
            printf("ok   %s (%.0f ms)\n", TESTS[i].name, ms);
        }
        fflush(stdout);
    }
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    if (skipped)
        printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else
        printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
