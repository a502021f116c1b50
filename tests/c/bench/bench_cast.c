/*
 * bench_cast.c - throughput of the core cast loops on 16M elements: float32
 * -> float8_e4m3fn (the acceptance case), the reverse, a scaled quantize,
 * and memcpy of the same bytes for reference; single thread and all threads.
 * Build and run with tests/c/bench/run.sh. Reports the best of repeats.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cast.h"
#include "core/convert.h"
#include "platform.h"

#define N_ELEMENTS ((int64_t)16 << 20)
#define REPEATS 15

static double seconds_now(void)
{
    struct timespec now;
    timespec_get(&now, TIME_UTC);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

typedef struct bench_data {
    float *values;
    float *restored;
    uint8_t *codes;
    uint8_t *copy;
    float scale;
} bench_data;

static void run_case(const char *name, int which, bench_data *data,
                     int threads)
{
    const int64_t shape[1] = {N_ELEMENTS};
    fp8q_view values;
    fp8q_view restored;
    fp8q_view codes;
    fp8q_view scale;
    fp8q_error error;
    double best = 1e30;
    double bytes = 0.0;
    int repeat;

    fp8q_view_init_contiguous(&values, data->values, FP8Q_FLOAT32, 1, shape,
                              &error);
    fp8q_view_init_contiguous(&restored, data->restored, FP8Q_FLOAT32, 1,
                              shape, &error);
    fp8q_view_init_contiguous(&codes, data->codes, FP8Q_FLOAT8_E4M3FN, 1,
                              shape, &error);
    fp8q_view_init_contiguous(&scale, &data->scale, FP8Q_FLOAT32, 0, NULL,
                              &error);
    fp8q_set_num_threads(threads);
    for (repeat = 0; repeat < REPEATS; repeat++) {
        const double start = seconds_now();
        fp8q_status status = FP8Q_OK;
        double elapsed;
        switch (which) {
        case 0:
            status = fp8q_cast(&values, &codes, NULL, FP8Q_SCALE_DIVIDE, 1,
                               &error);
            bytes = 5.0 * (double)N_ELEMENTS;
            break;
        case 1:
            status = fp8q_cast(&codes, &restored, NULL, FP8Q_SCALE_DIVIDE, 1,
                               &error);
            bytes = 5.0 * (double)N_ELEMENTS;
            break;
        case 2:
            status = fp8q_cast(&values, &codes, &scale, FP8Q_SCALE_DIVIDE, 1,
                               &error);
            bytes = 5.0 * (double)N_ELEMENTS;
            break;
        default:
            memcpy(data->copy, data->values, (size_t)N_ELEMENTS * 4);
            bytes = 8.0 * (double)N_ELEMENTS;
            break;
        }
        elapsed = seconds_now() - start;
        if (status != FP8Q_OK) {
            printf("%s failed: %s\n", name, error.message);
            return;
        }
        best = elapsed < best ? elapsed : best;
    }
    printf("%-34s threads %2d  %7.2f ms  %6.2f G elements/s  %6.1f GB/s\n",
           name, threads, best * 1e3, (double)N_ELEMENTS / best / 1e9,
           bytes / best / 1e9);
}

int main(void)
{
    bench_data data;
    const int all_threads = fp8q_cpu_count();
    uint64_t state = 12345;
    int64_t i;

    data.values = (float *)fp8q_aligned_alloc((size_t)N_ELEMENTS * 4);
    data.restored = (float *)fp8q_aligned_alloc((size_t)N_ELEMENTS * 4);
    data.codes = (uint8_t *)fp8q_aligned_alloc((size_t)N_ELEMENTS);
    data.copy = (uint8_t *)fp8q_aligned_alloc((size_t)N_ELEMENTS * 4);
    data.scale = 0.37f;
    if (data.values == NULL || data.restored == NULL || data.codes == NULL ||
        data.copy == NULL) {
        printf("out of memory\n");
        return 1;
    }
    /* Normal-ish random values in (-500, 500), touching every page. */
    for (i = 0; i < N_ELEMENTS; i++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        data.values[i] = ((float)(state >> 40) / 16777216.0f - 0.5f) * 1000.0f;
    }
    memset(data.restored, 0, (size_t)N_ELEMENTS * 4);
    memset(data.codes, 0, (size_t)N_ELEMENTS);
    memset(data.copy, 0, (size_t)N_ELEMENTS * 4);

    printf("16M elements, best of %d; stores use the %s loops\n", REPEATS,
           fp8q_convert_uses_avx2() ? "AVX2" : "baseline");
    run_case("float32 -> float8_e4m3fn", 0, &data, 1);
    run_case("float8_e4m3fn -> float32", 1, &data, 1);
    run_case("float32 / scale -> float8_e4m3fn", 2, &data, 1);
    run_case("memcpy float32 (reference)", 3, &data, 1);
    if (fp8q_convert_uses_avx2()) {
        fp8q_convert_allow_avx2(0);
        run_case("float32 -> float8_e4m3fn, baseline", 0, &data, 1);
        run_case("float32 / scale -> e4m3fn, baseline", 2, &data, 1);
        run_case("float8_e4m3fn -> float32, baseline", 1, &data, 1);
        fp8q_convert_allow_avx2(1);
    }
    if (all_threads > 1) {
        run_case("float32 -> float8_e4m3fn", 0, &data, all_threads);
        run_case("float8_e4m3fn -> float32", 1, &data, all_threads);
        run_case("float32 / scale -> float8_e4m3fn", 2, &data, all_threads);
    }
    fp8q_aligned_free(data.values);
    fp8q_aligned_free(data.restored);
    fp8q_aligned_free(data.codes);
    fp8q_aligned_free(data.copy);
    return 0;
}
