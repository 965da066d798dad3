/*
 * harness/args.c - see args.h.
 */
#include "args.h"

#include <stdio.h>
#include <string.h>

int harness_args_next(harness_args *a)
{
    a->value = NULL;
    a->err[0] = '\0';
    if (a->pos >= a->argc) return HARNESS_ARGS_DONE;
    const char *arg = a->argv[a->pos];
    /* -h is --help on every command that has --help. */
    if (strcmp(arg, "-h") == 0) arg = "--help";
    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
        snprintf(a->err, sizeof a->err, "unexpected argument '%s'", arg);
        return -1;
    }
    const char *name = arg + 2;
    const char *eq = strchr(name, '=');
    size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
    for (size_t i = 0; i < a->n_options; i++) {
        const harness_option *o = &a->options[i];
        if (strlen(o->name) != len || strncmp(o->name, name, len) != 0) continue;
        if (!o->has_value) {
            if (eq != NULL) {
                snprintf(a->err, sizeof a->err, "option --%s takes no value", o->name);
                return -1;
            }
            a->pos += 1;
            return o->id;
        }
        if (eq != NULL) {
            a->value = eq + 1;
            a->pos += 1;
        } else {
            if (a->pos + 1 >= a->argc) {
                snprintf(a->err, sizeof a->err, "option --%s needs a value", o->name);
                return -1;
            }
            a->value = a->argv[a->pos + 1];
            a->pos += 2;
        }
        return o->id;
    }
    snprintf(a->err, sizeof a->err, "unknown option '--%.*s'", (int)len, name);
    return -1;
}

int harness_list_has(const char *list, const char *name)
{
    if (list == NULL) return 1;
    const size_t len = strlen(name);
    for (const char *p = list;;) {
        const char *comma = strchr(p, ',');
        const size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);
        if (n == len && strncmp(p, name, n) == 0) return 1;
        if (comma == NULL) return 0;
        p = comma + 1;
    }
}
