/*
 * tests/runner.c - the one main of every test program.
 *
 * Runs the suite the test file exports (tally_test_suite, written with
 * testutil.h's TT_SUITE rows and built by tt_suite below) with Check in its
 * default fork mode (CK_FORK=no runs in-process, for a debugger), and exits
 * 0 when every test passed, 1 otherwise. A backend-dependent suite (one that
 * defines tally_test_needs_backend = 1, or any run with TALLY_TEST_BACKEND
 * set) first probes its backend and exits 77, meson's SKIP, when the backend
 * is not compiled in, its library is missing or it has no device (a suite
 * that defines tally_test_only_backend always probes that one): a test of
 * an absent backend must never count as passed. A backend that is present
 * but fails to create a context is a failure (exit 1), not a skip.
 */
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

/* Test files that need no backend do not define it. */
#if defined(__GNUC__)
extern const int tally_test_needs_backend __attribute__((weak));
extern const char *const tally_test_only_backend __attribute__((weak));
#  define NEEDS_BACKEND_DEFINED() (&tally_test_needs_backend != NULL)
#  define ONLY_BACKEND() (&tally_test_only_backend != NULL ? tally_test_only_backend : NULL)
#else
#  define NEEDS_BACKEND_DEFINED() 0
#  define ONLY_BACKEND() NULL
#endif

#define EXIT_SKIP 77

/* A TCase named `name` with the row's fixtures and timeout. */
static TCase *row_tcase(const tt_tcase *row, const char *name)
{
    TCase *tc = tcase_create(name);
    if (row->unchecked_setup != NULL || row->unchecked_teardown != NULL)
        tcase_add_unchecked_fixture(tc, row->unchecked_setup, row->unchecked_teardown);
    if (row->setup != NULL || row->teardown != NULL) tcase_add_checked_fixture(tc, row->setup, row->teardown);
    if (row->timeout > 0) tcase_set_timeout(tc, row->timeout);
    return tc;
}

Suite *tt_suite(const char *name, const tt_tcase *cases, size_t count)
{
    Suite *s = suite_create(name);
    for (size_t c = 0; c < count; c++) {
        const tt_tcase *row = &cases[c];
        /* A full list may have lost tests to the initialiser (excess
         * elements are only a warning in C): the last slot stays NULL. */
        if (row->tests[sizeof row->tests / sizeof row->tests[0] - 1] != NULL) {
            fprintf(stderr, "suite %s, case %s: more tests than tt_tcase holds; enlarge tests[]\n", name, row->name);
            exit(2);
        }
        if (row->only_with != NULL && getenv(row->only_with) == NULL) continue;
        TCase *tc = NULL;
        for (size_t t = 0; row->tests[t] != NULL; t++) {
            if (tc == NULL || row->case_per_test) {
                tc = row_tcase(row, row->case_per_test ? row->tests[t]->name : row->name);
                suite_add_tcase(s, tc);
            }
            if (row->loops > 0)
                tcase_add_loop_test(tc, row->tests[t], 0, row->loops);
            else
                tcase_add_test(tc, row->tests[t]);
        }
    }
    return s;
}

int main(int argc, char **argv)
{
    const char *only = ONLY_BACKEND();
    if (only != NULL) setenv("TALLY_TEST_BACKEND", only, 1);
    const char *env = getenv("TALLY_TEST_BACKEND");
    int needs = (NEEDS_BACKEND_DEFINED() && tally_test_needs_backend) || (env != NULL && env[0] != '\0');
    if (needs) {
        char why[1200];
        int usable = tt_probe_backend(why, sizeof why);
        if (usable == 0) {
            fprintf(stderr, "SKIP: %s\n", why);
            return EXIT_SKIP;
        }
        if (usable < 0) {
            fprintf(stderr, "FAIL: %s\n", why);
            return EXIT_FAILURE;
        }
        fprintf(stderr, "backend %s: %s\n", tally_backend_name(tt_backend()), why);
    }

    /* Check's default of 4 seconds per test is too short where a test
     * creates a device context on a cold machine (PoCL compiles tally's
     * program the first time, tens of seconds on a slow CPU); suites that
     * need more set their own. Read when the suite's test cases are made. */
    setenv("CK_DEFAULT_TIMEOUT", "300", 0);
    SRunner *sr = srunner_create(tally_test_suite());
    /* An optional argument names one test case to run (CK_RUN_CASE also works). */
    if (argc > 1) setenv("CK_RUN_CASE", argv[1], 1);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
