/*
 * harness/args.h - long options, "--name value" or "--name=value" (and -h
 * for --help), for the `tally` commands and tally-bench alike.
 *
 * A command lists its options in a table and walks its arguments:
 *
 *     harness_args a = HARNESS_ARGS(argc, argv, 0, options);
 *     for (int id; (id = harness_args_next(&a)) != HARNESS_ARGS_DONE;)
 *         switch (id) { case O_X: use(a.value); break; default: fail(a.err); }
 *
 * Thread rules: a harness_args belongs to one thread; it reads argv only.
 */
#ifndef TALLY_HARNESS_ARGS_H
#define TALLY_HARNESS_ARGS_H

#include <stddef.h>

typedef struct harness_option {
    const char *name; /* without the leading "--" */
    int has_value;
    int id; /* >= 0 */
} harness_option;

typedef struct harness_args {
    int argc;
    char **argv;
    int pos; /* the next argument to read */
    const harness_option *options;
    size_t n_options;
    const char *value; /* the current option's value; NULL for a flag */
    char err[160];     /* why harness_args_next returned -1 */
} harness_args;

/* The walk of argv[first..argc) against a static options table. */
#define HARNESS_ARGS(argc_, argv_, first_, options_)                                                     \
    (harness_args)                                                                                       \
    {                                                                                                    \
        .argc = (argc_), .argv = (argv_), .pos = (first_), .options = (options_),                       \
        .n_options = sizeof(options_) / sizeof((options_)[0]), .value = NULL, .err = ""                 \
    }

#define HARNESS_ARGS_DONE (-2)

/* Reads the next option and its value. Returns its id, HARNESS_ARGS_DONE
 * after the last argument, or -1 with a message in err for an argument that
 * is not a known option, lacks its value or has one it does not take (the
 * walk then stays on that argument). */
int harness_args_next(harness_args *a);

/* 1 when name is one of the items of a comma-separated list (--ops,
 * --only), or when list is NULL (no filter); 0 otherwise. */
int harness_list_has(const char *list, const char *name);

#endif /* TALLY_HARNESS_ARGS_H */
