/*
 * src/errors.c - status names and messages, and the per-context and
 * per-thread error records.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *tally_status_string(tally_status status)
{
    switch (status) {
#define TALLY__STATUS_TEXT(name, code, text) \
    case TALLY_##name:                       \
        return text;
        TALLY_STATUS_MAP(TALLY__STATUS_TEXT)
#undef TALLY__STATUS_TEXT
    }
    return "unknown status";
}

const char *tally_status_name(tally_status status)
{
    switch (status) {
#define TALLY__STATUS_NAME(name, code, text) \
    case TALLY_##name:                       \
        return #name;
        TALLY_STATUS_MAP(TALLY__STATUS_NAME)
#undef TALLY__STATUS_NAME
    }
    return "UNKNOWN";
}

/* Calls that have no context (creation, enumeration) report here. A fixed
 * thread-local buffer keeps this free of allocation and of locks. */
static _Thread_local char thread_error[4096];

static void write_message(char *dst, size_t capacity, const char *fmt, va_list ap)
{
    int n = vsnprintf(dst, capacity, fmt, ap);
    if (n < 0) dst[0] = '\0';
}

tally_status tally__verror(tally_context *ctx, tally_status status, const char *fmt, va_list ap)
{
    if (ctx == NULL) {
        write_message(thread_error, sizeof thread_error, fmt, ap);
        return status;
    }
    va_list again;
    va_copy(again, ap);
    int needed = vsnprintf(NULL, 0, fmt, ap);
    if (needed < 0) needed = 0;
    size_t want = (size_t)needed + 1;
    if (want > ctx->error_capacity) {
        char *grown = realloc(ctx->error, want);
        if (grown != NULL) {
            ctx->error = grown;
            ctx->error_capacity = want;
        }
    }
    if (ctx->error_capacity > 0) write_message(ctx->error, ctx->error_capacity, fmt, again);
    va_end(again);
    return status;
}

tally_status tally__error(tally_context *ctx, tally_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tally__verror(ctx, status, fmt, ap);
    va_end(ap);
    return status;
}

void tally__error_append(tally_context *ctx, const char *text)
{
    if (text == NULL) return;
    if (ctx == NULL) {
        size_t used = strlen(thread_error);
        snprintf(thread_error + used, sizeof thread_error - used, "%s", text);
        return;
    }
    size_t used = ctx->error ? strlen(ctx->error) : 0;
    size_t want = used + strlen(text) + 1;
    if (want > ctx->error_capacity) {
        char *grown = realloc(ctx->error, want);
        if (grown == NULL) return;
        if (ctx->error_capacity == 0) grown[0] = '\0';
        ctx->error = grown;
        ctx->error_capacity = want;
    }
    memcpy(ctx->error + used, text, strlen(text) + 1);
}

void tally__error_to_thread(tally_context *ctx)
{
    if (ctx != NULL && ctx->error != NULL)
        snprintf(thread_error, sizeof thread_error, "%s", ctx->error);
}

tally_status tally__vendor_load(tally_status (*open)(const char **message))
{
    const char *message = NULL;
    tally_status st = open(&message);
    if (st != TALLY_OK) return tally__error(NULL, st, "%s", message);
    return TALLY_OK;
}

const char *tally_last_error(const tally_context *ctx)
{
    if (ctx == NULL) return thread_error;
    return ctx->error != NULL ? ctx->error : "";
}
