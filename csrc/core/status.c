/*
 * status.c - records an error status and its formatted message, or clears it.
 */
#include <stdarg.h>
#include <stdio.h>

#include "core/status.h"

fp8q_status fp8q_fail(fp8q_error *error, fp8q_status status,
                      const char *format, ...)
{
    va_list arguments;

    if (error == NULL) {
        return status;
    }
    error->status = status;
    va_start(arguments, format);
    vsnprintf(error->message, sizeof error->message, format, arguments);
    va_end(arguments);
    /* Some C runtimes do not terminate a truncated message. */
    error->message[sizeof error->message - 1] = '\0';
    return status;
}

void fp8q_error_clear(fp8q_error *error)
{
    error->status = FP8Q_OK;
    error->message[0] = '\0';
}
