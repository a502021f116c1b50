/*
 * gemm_tuning.c - csrc/cuda/gemm_tuning.h on the fake CUDA driver and the
 * fake cuBLASLt: the key of fake device 0 (its name, compute capability,
 * the driver's and cuBLASLt's versions as text, which
 * tests/test_c_gemm_tuning.py sets through the fakes' variables) and its
 * choices' text, two added choice lines read back whole and in order.
 *
 *   gemm_tuning KERNEL_FOLDER
 *
 * Prints "ok NAME" per check, or "FAIL NAME: why", and exits 1 on a
 * failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cublaslt.h"
#include "cuda/gemm_tuning.h"
#include "cuda/matmul.h"

#include "device_helpers.h"

/* The fakes' facts as the test sets them. */
#define EXPECTED_GPU "Fake H100 0" /* the fake appends the index */
#define EXPECTED_CC "9.0"
#define EXPECTED_DRIVER "12.8"
#define EXPECTED_CUBLASLT "12.9.1"

/* The key, with the fake cuBLASLt loaded. */
static void check_key(void)
{
    const fp8q_cublaslt *library = fp8q_cublaslt_load(NULL, 0);
    fp8q_gemm_tuning_key key;
    fp8q_error error;

    fp8q_error_clear(&error);
    if (library->error.status != FP8Q_OK) {
        fail("key", "no fake cuBLASLt", &library->error);
        return;
    }
    if (fp8q_gemm_tuning_key_get(0, library, &key, &error) != FP8Q_OK) {
        fail("key", "no key", &error);
        return;
    }
    if (strcmp(key.gpu, EXPECTED_GPU) != 0 ||
        strcmp(key.compute_capability, EXPECTED_CC) != 0 ||
        strcmp(key.driver, EXPECTED_DRIVER) != 0 ||
        strcmp(key.cublaslt, EXPECTED_CUBLASLT) != 0) {
        printf("FAIL key: got \"%s\" \"%s\" \"%s\" \"%s\"\n", key.gpu,
               key.compute_capability, key.driver, key.cublaslt);
        failures++;
        return;
    }
    printf("ok key\n");
}

/* Two lines (algorithms of 64 bytes as 128 hex digits) added, then the
 * whole text: the most recent first; an import with a bad line adds
 * nothing. */
static void check_choices(void)
{
    char first[256], second[256], expected[520];
    const char *lines[2];
    fp8q_error error;
    char *text;
    int index;

    (void)snprintf(first, sizeof first, "2 64 32 0 0 2 1 -1 0 0 1 16 16 16 ");
    (void)snprintf(second, sizeof second,
                   "8 128 256 0 1 3 2 4 1 1 0 16 16 16 ");
    for (index = 0; index < 64; index++) {
        (void)snprintf(first + strlen(first), 3, "%02x", index);
        (void)snprintf(second + strlen(second), 3, "%02x", 255 - index);
    }
    fp8q_error_clear(&error);
    /* A bad line anywhere: nothing is added. */
    lines[0] = first;
    lines[1] = "nonsense";
    if (fp8q_matmul_choices_add(0, lines, 2, &error) != FP8Q_ERROR_VALUE) {
        fail("choices", "a bad line accepted", &error);
        return;
    }
    text = fp8q_gemm_tuning_choices(0);
    if (text == NULL || text[0] != '\0') {
        printf("FAIL choices: a refused import added \"%s\"\n",
               text != NULL ? text : "(null)");
        failures++;
    }
    free(text);
    fp8q_error_clear(&error);
    lines[0] = first;
    lines[1] = second;
    if (fp8q_matmul_choices_add(0, lines, 2, &error) != FP8Q_OK) {
        fail("choices", "a line refused", &error);
        return;
    }
    (void)snprintf(expected, sizeof expected, "%s\n%s\n", second, first);
    text = fp8q_gemm_tuning_choices(0);
    if (text == NULL || strcmp(text, expected) != 0) {
        printf("FAIL choices: got \"%s\", expected \"%s\"\n",
               text != NULL ? text : "(null)", expected);
        failures++;
    }
    else {
        printf("ok choices\n");
    }
    free(text);
}

int main(int argc, char **argv)
{
    const int start = open_device(argc, argv, 2, "gemm_tuning KERNEL_FOLDER");

    if (start != 0) {
        return start;
    }
    check_key();
    check_choices();
    return failures != 0;
}
