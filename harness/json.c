/*
 * harness/json.c - see json.h.
 */
#include "json.h"

#include <math.h>

void harness_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s != NULL ? s : ""); *p != '\0'; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}

void harness_json_number(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, "%.9g", v);
    else fputs("null", f);
}

void harness_json_begin(harness_json *j, FILE *f)
{
    j->f = f;
    j->fields = 0;
}

void harness_json_key(harness_json *j, const char *key)
{
    fputs(j->fields++ == 0 ? "{" : ",", j->f);
    harness_json_string(j->f, key);
    fputc(':', j->f);
}

void harness_json_str(harness_json *j, const char *key, const char *s)
{
    harness_json_key(j, key);
    harness_json_string(j->f, s);
}

void harness_json_num(harness_json *j, const char *key, double v)
{
    harness_json_key(j, key);
    harness_json_number(j->f, v);
}

void harness_json_int(harness_json *j, const char *key, long long v)
{
    harness_json_key(j, key);
    fprintf(j->f, "%lld", v);
}

void harness_json_bool(harness_json *j, const char *key, int v)
{
    harness_json_key(j, key);
    fputs(v ? "true" : "false", j->f);
}

void harness_json_end(harness_json *j)
{
    fputs(j->fields == 0 ? "{}\n" : "}\n", j->f);
    fflush(j->f);
}
