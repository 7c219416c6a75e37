/*
 * json.c - the JSON writer of json.h.  Commas are placed by remembering, per
 * nesting level, whether a value was written yet; the document ends with a
 * newline after the outermost value.
 */
#include "json.h"

#include <math.h>

void json_init(struct json *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->first[0] = true;
}

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* Separator and key before a value at the current level. */
static void prefix(struct json *j, const char *key)
{
    if (!j->first[j->depth])
        fputc(',', j->f);
    j->first[j->depth] = false;
    if (key) {
        put_string(j->f, key);
        fputc(':', j->f);
    }
}

static void open_(struct json *j, const char *key, char c)
{
    prefix(j, key);
    fputc(c, j->f);
    if (j->depth + 1 < JSON_MAX_DEPTH)
        j->depth++;
    j->first[j->depth] = true;
}

static void close_(struct json *j, char c)
{
    fputc(c, j->f);
    if (j->depth > 0)
        j->depth--;
    if (j->depth == 0)
        fputc('\n', j->f);
}

void json_obj(struct json *j, const char *key) { open_(j, key, '{'); }
void json_obj_end(struct json *j) { close_(j, '}'); }
void json_arr(struct json *j, const char *key) { open_(j, key, '['); }
void json_arr_end(struct json *j) { close_(j, ']'); }

void json_str(struct json *j, const char *key, const char *val)
{
    prefix(j, key);
    if (val)
        put_string(j->f, val);
    else
        fputs("null", j->f);
}

void json_int(struct json *j, const char *key, int64_t val)
{
    prefix(j, key);
    fprintf(j->f, "%lld", (long long)val);
}

void json_uint(struct json *j, const char *key, uint64_t val)
{
    prefix(j, key);
    fprintf(j->f, "%llu", (unsigned long long)val);
}

void json_num(struct json *j, const char *key, double val)
{
    prefix(j, key);
    if (isfinite(val))
        fprintf(j->f, "%.9g", val);
    else
        fputs("null", j->f);
}

void json_bool(struct json *j, const char *key, bool val)
{
    prefix(j, key);
    fputs(val ? "true" : "false", j->f);
}

void json_null(struct json *j, const char *key)
{
    prefix(j, key);
    fputs("null", j->f);
}
