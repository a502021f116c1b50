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

/* A switch: its variable, the values it takes (names[0] is the default)
 * and the text that names them in a refusal. */
typedef struct choice {
    const char *name;
    const char *const *names;
    size_t count;
    const char *values_text;
} choice;

/* The switches, in the order they are read. */
enum { NO_FP8, TUNING, PATH, LAYER_PATH, N_CHOICES };
static const choice choices[N_CHOICES] = {
    {"FP8Q_CUDA_NO_FP8_TENSOR_CORES", no_fp8_names, N_NO_FP8_NAMES,
     "1 (scaled_mm takes the paths of GPUs without FP8 tensor cores), 0 or "
     "unset (docs/scaled_mm.md, \"Switches\")"},
    {"FP8Q_CUDA_GEMM_TUNING", tuning_names, N_TUNING_NAMES,
     "0 (cuBLASLt's first algorithm, none timed), 1 or unset (the fastest of "
     "its top candidates, timed once per product key) (docs/scaled_mm.md, "
     "\"Switches\")"},
    {"FP8Q_CUDA_SCALED_MM_PATH", path_names, N_PATH_NAMES,
     "auto (or unset), padded, epilogue, exact (docs/scaled_mm.md, "
     "\"Switches\")"},
    {"FP8Q_CUDA_FP8_LAYER_PATH", layer_path_names, N_LAYER_PATH_NAMES,
     "auto (or unset), fp8, weight-only (docs/torch.md, \"Which product "
     "runs\")"}};

/* Sets *index to the position of the switch's value in its names ("" is
 * position 0, the default); 0, or -1 with switches.error set, naming the
 * values it takes, when the value is not one of them. */
static int read_choice(const choice *which, size_t *index)
{
    char value[VALUE_SIZE];

    if (read_value(which->name, value) < 0) {
        return -1;
    }
    *index = 0;
    if (value[0] == '\0') {
        return 0;
    }
    for (*index = 0; *index < which->count; (*index)++) {
        if (strcmp(value, which->names[*index]) == 0) {
            return 0;
        }
    }
    fp8q_fail(&switches.error, FP8Q_ERROR_CUDA,
              "%s=%s is not one of the values it takes: %s", which->name,
              value, which->values_text);
    return -1;
}

static void read_switches(void *unused)
{
    size_t index[N_CHOICES] = {0};
    size_t read;

    (void)unused;
    fp8q_error_clear(&switches.error);
    /* Up to the first refused value; it and the rest keep their defaults. */
    for (read = 0; read < N_CHOICES; read++) {
        if (read_choice(&choices[read], &index[read]) < 0) {
            index[read] = 0;
            break;
        }
    }
    switches.no_fp8_tensor_cores = index[NO_FP8] == 1;
    switches.gemm_tuning = index[TUNING] == 0;
    switches.scaled_mm_path = (fp8q_scaled_mm_path_switch)index[PATH];
    switches.fp8_layer_path = (fp8q_layer_path)index[LAYER_PATH];
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
