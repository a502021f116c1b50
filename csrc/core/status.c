/*
 * status.c - records an error status and its formatted message, or clears
 * it; writes numbers for messages.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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

fp8q_number_text fp8q_number(double value)
{
    /* The fields of an IEEE 754 double. */
    const uint64_t sign_bit = UINT64_C(0x8000000000000000);
    const uint64_t exponent_bits = UINT64_C(0x7FF0000000000000);
    const uint64_t mantissa_bits = UINT64_C(0x000FFFFFFFFFFFFF);
    fp8q_number_text number;
    uint64_t bits;

    memcpy(&bits, &value, sizeof bits);
    if ((bits & exponent_bits) != exponent_bits) {
        (void)snprintf(number.text, sizeof number.text, "%g", value);
    }
    else {
        (void)snprintf(number.text, sizeof number.text, "%s%s",
                       (bits & sign_bit) != 0 ? "-" : "",
                       (bits & mantissa_bits) != 0 ? "nan" : "inf");
    }
    return number;
}
