/*
 * device_name.c - reading device names (core/device_name.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device_name.h"

int fp8q_device_parse(const char *text, int *type, int *index)
{
    char *end = NULL;
    long long value;

    if (strcmp(text, "cpu") == 0 || strcmp(text, "cuda") == 0) {
        *type = text[1] == 'p' ? FP8Q_DEVICE_CPU : FP8Q_DEVICE_CUDA;
        *index = 0;
        return 0;
    }
    if (strncmp(text, "cuda:", 5) != 0 || text[5] < '0' || text[5] > '9') {
        return -1;
    }
    value = strtoll(text + 5, &end, 10);
    if (*end != '\0' || value > FP8Q_MAX_DEVICE_INDEX) {
        return -1;
    }
    *type = FP8Q_DEVICE_CUDA;
    *index = (int)value;
    return 0;
}

void fp8q_device_format(int type, int index, char *text, size_t size)
{
    if (type == FP8Q_DEVICE_CPU) {
        (void)snprintf(text, size, "cpu");
    }
    else {
        (void)snprintf(text, size, "cuda:%d", index);
    }
}
