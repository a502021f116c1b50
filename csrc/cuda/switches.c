/*
 * switches.c - FP8Q_CUDA_NO_FP8_TENSOR_CORES, FP8Q_CUDA_GEMM_TUNING and
 * FP8Q_CUDA_SCALED_MM_PATH, read once (see switches.h).
 */
#include <string.h>

#include "cuda/switches.h"
#include "platform.h"

/* Longer than any accepted value; a longer one is refused as not one. */
#define VALUE_SIZE 32

static const char *const path_names[] = {"auto", "padded", "epilogue",
                                         "exact"};
#define N_PATH_NAMES (sizeof path_names / sizeof path_names[0])

static fp8q_once read_once = FP8Q_ONCE_INIT;
static fp8q_cuda_switches switches;

/* The value of `name` ("" when unset); 0, or -1 with switches.error set
 * when it does not fit VALUE_SIZE or is not text. */
static int read_value(const char *name, char *value)
{
    if (fp8q_getenv_utf8(name, value, VALUE_SIZE) >= 0) {
        return 0;
    }
    fp8q_fail(&switches.error, FP8Q_ERROR_CUDA,
              "%s is not one of the values it takes (see docs/scaled_mm.md, "
              "\"Switches\"): its value is longer than %d bytes or not text",
              name, VALUE_SIZE - 1);
    return -1;
}

/* A "0" / "1" switch into *flag (`unset` when the variable is unset or
 * empty); 0, or -1 with switches.error set (naming `values`, the text of
 * what each value does) for any other value. */
static int read_flag(const char *name, int unset, const char *values,
                     int *flag)
{
    char value[VALUE_SIZE];
    if (read_value(name, value) < 0) {
        return -1;
    }
    if (value[0] == '\0' || strcmp(value, "0") == 0 ||
        strcmp(value, "1") == 0) {
        *flag = value[0] == '\0' ? unset : value[0] == '1';
        return 0;
    }
    fp8q_fail(&switches.error, FP8Q_ERROR_CUDA,
              "%s=%s is not one of the values it takes: %s "
              "(docs/scaled_mm.md, \"Switches\")",
              name, value, values);
    return -1;
}

static void read_switches(void *unused)
{
    char value[VALUE_SIZE];
    size_t index;

    (void)unused;
    fp8q_error_clear(&switches.error);
    switches.gemm_tuning = 1;
    if (read_flag("FP8Q_CUDA_NO_FP8_TENSOR_CORES", 0,
                  "1 (scaled_mm takes the paths of GPUs without FP8 tensor "
                  "cores), 0 or unset",
                  &switches.no_fp8_tensor_cores) < 0 ||
        read_flag("FP8Q_CUDA_GEMM_TUNING", 1,
                  "0 (cuBLASLt's first algorithm, none timed), 1 or unset "
                  "(the fastest of its top candidates, timed once per "
                  "product key)",
                  &switches.gemm_tuning) < 0) {
        return;
    }
    if (read_value("FP8Q_CUDA_SCALED_MM_PATH", value) < 0) {
        return;
    }
    if (value[0] == '\0') {
        return; /* auto */
    }
    for (index = 0; index < N_PATH_NAMES; index++) {
        if (strcmp(value, path_names[index]) == 0) {
            switches.scaled_mm_path = (fp8q_scaled_mm_path_switch)index;
            return;
        }
    }
    fp8q_fail(&switches.error, FP8Q_ERROR_CUDA,
              "FP8Q_CUDA_SCALED_MM_PATH=%s is not one of the values it takes: "
              "auto (or unset), padded, epilogue, exact (docs/scaled_mm.md, "
              "\"Switches\")",
              value);
}

const fp8q_cuda_switches *fp8q_cuda_switches_get(void)
{
    fp8q_once_run(&read_once, read_switches, NULL);
    return &switches;
}

const char *fp8q_scaled_mm_path_switch_name(fp8q_scaled_mm_path_switch path)
{
    return (size_t)path < N_PATH_NAMES ? path_names[path] : "auto";
}
