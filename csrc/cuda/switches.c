/*
 * switches.c - FP8Q_CUDA_NO_FP8_TENSOR_CORES, FP8Q_CUDA_GEMM_TUNING,
 * FP8Q_CUDA_SCALED_MM_PATH and FP8Q_CUDA_FP8_LAYER_PATH, read once (see
 * switches.h).
 */
#include <string.h>

#include "cuda/switches.h"
#include "platform.h"

/* Longer than any accepted value; a longer one is refused as not one. */
#define VALUE_SIZE 32

static const char *const no_fp8_names[] = {"0", "1"};
#define N_NO_FP8_NAMES (sizeof no_fp8_names / sizeof no_fp8_names[0])
/* The first is the default: tuning on. */
static const char *const tuning_names[] = {"1", "0"};
#define N_TUNING_NAMES (sizeof tuning_names / sizeof tuning_names[0])
static const char *const path_names[] = {"auto", "padded", "epilogue",
                                         "exact"};
#define N_PATH_NAMES (sizeof path_names / sizeof path_names[0])
static const char *const layer_path_names[] = {"auto", "fp8", "weight-only"};
#define N_LAYER_PATH_NAMES (sizeof layer_path_names / sizeof layer_path_names[0])

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

/* Sets *index to the position of `name`'s value in names[0..count) ("" is
 * position 0, the default); 0, or -1 with switches.error set, naming the
 * values it takes (`values_text`), when the value is not one of them. */
static int read_choice(const char *name, const char *const *names,
                       size_t count, const char *values_text, size_t *index)
{
    char value[VALUE_SIZE];

    if (read_value(name, value) < 0) {
        return -1;
    }
    *index = 0;
    if (value[0] == '\0') {
        return 0;
    }
    for (*index = 0; *index < count; (*index)++) {
        if (strcmp(value, names[*index]) == 0) {
            return 0;
        }
    }
    fp8q_fail(&switches.error, FP8Q_ERROR_CUDA,
              "%s=%s is not one of the values it takes: %s", name, value,
              values_text);
    return -1;
}

static void read_switches(void *unused)
{
    size_t index;

    (void)unused;
    fp8q_error_clear(&switches.error);
    switches.gemm_tuning = 1;
    if (read_choice("FP8Q_CUDA_NO_FP8_TENSOR_CORES", no_fp8_names,
                    N_NO_FP8_NAMES,
                    "1 (scaled_mm takes the paths of GPUs without FP8 tensor "
                    "cores), 0 or unset (docs/scaled_mm.md, \"Switches\")",
                    &index) < 0) {
        return;
    }
    switches.no_fp8_tensor_cores = index == 1;
    if (read_choice("FP8Q_CUDA_GEMM_TUNING", tuning_names, N_TUNING_NAMES,
                    "0 (cuBLASLt's first algorithm, none timed), 1 or unset "
                    "(the fastest of its top candidates, timed once per "
                    "product key) (docs/scaled_mm.md, \"Switches\")",
                    &index) < 0) {
        return;
    }
    switches.gemm_tuning = index == 0;
    if (read_choice("FP8Q_CUDA_SCALED_MM_PATH", path_names, N_PATH_NAMES,
                    "auto (or unset), padded, epilogue, exact "
                    "(docs/scaled_mm.md, \"Switches\")",
                    &index) < 0) {
        return;
    }
    switches.scaled_mm_path = (fp8q_scaled_mm_path_switch)index;
    if (read_choice("FP8Q_CUDA_FP8_LAYER_PATH", layer_path_names,
                    N_LAYER_PATH_NAMES,
                    "auto (or unset), fp8, weight-only (docs/torch.md, "
                    "\"Which product runs\")",
                    &index) < 0) {
        return;
    }
    switches.fp8_layer_path = (fp8q_layer_path)index;
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

const char *fp8q_layer_path_name(fp8q_layer_path path)
{
    return (size_t)path < N_LAYER_PATH_NAMES ? layer_path_names[path]
                                             : "auto";
}

int fp8q_layer_path_parse(const char *text, fp8q_layer_path *path)
{
    size_t index;

    for (index = 0; index < N_LAYER_PATH_NAMES; index++) {
        if (strcmp(text, layer_path_names[index]) == 0) {
            *path = (fp8q_layer_path)index;
            return 0;
        }
    }
    return -1;
}
