/*
 * json.h - a minimal streaming JSON writer (objects, arrays, strings,
 * numbers, booleans, null), enough for storagebench's one document per run.
 * Keys are given with each value; NULL key inside arrays and at the top.
 */
#ifndef SB_JSON_H
#define SB_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json {
    FILE *f;
    int depth;
    bool first[JSON_MAX_DEPTH];
};

void json_init(struct json *j, FILE *f);
void json_obj(struct json *j, const char *key);
void json_obj_end(struct json *j);
void json_arr(struct json *j, const char *key);
void json_arr_end(struct json *j);
void json_str(struct json *j, const char *key, const char *val); /* NULL: null */
void json_int(struct json *j, const char *key, int64_t val);
void json_uint(struct json *j, const char *key, uint64_t val);
void json_num(struct json *j, const char *key, double val);     /* non-finite: null */
void json_bool(struct json *j, const char *key, bool val);
void json_null(struct json *j, const char *key);

#endif
