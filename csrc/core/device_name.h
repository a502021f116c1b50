/*
 * device_name.h - fp8q's device types and the reading of device names
 * ("cpu", "cuda", "cuda:N") without Python; the binding parses device=
 * arguments with it.
 */
#ifndef FP8Q_CORE_DEVICE_NAME_H
#define FP8Q_CORE_DEVICE_NAME_H

#include <stddef.h>

/* Device types use DLPack's DLDeviceType numbering. */
#define FP8Q_DEVICE_CPU 1
#define FP8Q_DEVICE_CUDA 2

/* A device: FP8Q_DEVICE_CPU (index 0) or FP8Q_DEVICE_CUDA and its index. */
typedef struct fp8q_place {
    int type;
    int index;
} fp8q_place;

/* The largest CUDA device index a device argument may name. */
#define FP8Q_MAX_DEVICE_INDEX 1000000

/* Reads "cpu" (FP8Q_DEVICE_CPU, index 0), "cuda" (FP8Q_DEVICE_CUDA, index
 * 0) or "cuda:N" (N decimal digits, at most FP8Q_MAX_DEVICE_INDEX) into
 * *type and *index; 0, or -1 (nothing written) for any other text. */
int fp8q_device_parse(const char *text, int *type, int *index);

/* Writes the name of device (type, index) into text (size bytes, truncated
 * as snprintf does): "cpu" for FP8Q_DEVICE_CPU, "cuda:<index>" for any
 * other type; the form fp8q_device_parse reads and Tensor.device shows. */
void fp8q_device_format(int type, int index, char *text, size_t size);

#endif /* FP8Q_CORE_DEVICE_NAME_H */
