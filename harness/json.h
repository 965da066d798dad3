/*
 * harness/json.h - the one JSON writer of the CLI (crosscheck --json, info
 * --json) and tally-bench (--json, one object per line).
 *
 * Strings are escaped per RFC 8259 (quote, backslash, \n \r \t, other
 * control bytes as \u00XX; other bytes pass unchanged, so UTF-8 stays
 * UTF-8); numbers are printed with 9 significant digits, which round-trip a
 * float, and as null when not finite (JSON has no NaN or infinity).
 *
 * Thread rules: a harness_json belongs to one thread; the functions write
 * only to its stream.
 */
#ifndef TALLY_HARNESS_JSON_H
#define TALLY_HARNESS_JSON_H

#include <stdio.h>

/* Writes s as a JSON string literal, quotes included (NULL writes ""). */
void harness_json_string(FILE *f, const char *s);
/* Writes v as a JSON number, or null when it is not finite. */
void harness_json_number(FILE *f, double v);

/* One flat object on one line, written field by field:
 * harness_json_begin, then fields, then harness_json_end ("}\n", flushed). */
typedef struct harness_json {
    FILE *f;
    int fields; /* written so far: the first one opens the object */
} harness_json;

void harness_json_begin(harness_json *j, FILE *f);
/* Writes the separator and "key": the caller then writes a value. */
void harness_json_key(harness_json *j, const char *key);
void harness_json_str(harness_json *j, const char *key, const char *s);
void harness_json_num(harness_json *j, const char *key, double v);
void harness_json_int(harness_json *j, const char *key, long long v);
void harness_json_bool(harness_json *j, const char *key, int v);
void harness_json_end(harness_json *j);

#endif /* TALLY_HARNESS_JSON_H */
