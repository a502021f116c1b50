/*
 * test_platform.c - aligned allocation, the parallel loop and atomics.
 */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "platform.h"

void test_aligned_alloc(void)
{
    static const size_t sizes[] = {0, 1, 63, 64, 65, 4096, 1000003};
    void *blocks[sizeof sizes / sizeof sizes[0]];
    size_t index;

    for (index = 0; index < sizeof sizes / sizeof sizes[0]; index++) {
        blocks[index] = fp8q_aligned_alloc(sizes[index]);
        CHECK(blocks[index] != NULL);
        CHECK_INT((uintptr_t)blocks[index] % FP8Q_ALIGNMENT, 0);
        if (blocks[index] != NULL && sizes[index] > 0) {
            memset(blocks[index], 0xA5, sizes[index]);
        }
    }
    /* Zero-byte blocks are still distinct. */
    CHECK(blocks[0] != blocks[1]);
    for (index = 0; index < sizeof sizes / sizeof sizes[0]; index++) {
        fp8q_aligned_free(blocks[index]);
    }
    fp8q_aligned_free(NULL);
    CHECK(fp8q_cpu_count() >= 1);
}

#define N_TASKS 1000

typedef struct visit_record {
    volatile int64_t visits[N_TASKS];
    volatile int64_t total;
} visit_record;

static void count_visit(void *context, int64_t task_index)
{
    visit_record *record = (visit_record *)context;
    fp8q_atomic_fetch_add_i64(&record->visits[task_index], 1);
    fp8q_atomic_fetch_add_i64(&record->total, task_index);
}

void test_parallel_for(void)
{
    static visit_record record;
    static const int thread_counts[] = {1, 2, 4, 16, 0, -3};
    size_t config;
    int64_t task;

    for (config = 0; config < sizeof thread_counts / sizeof thread_counts[0];
         config++) {
        int all_once = 1;
        memset((void *)&record, 0, sizeof record);
        fp8q_parallel_for(N_TASKS, thread_counts[config], count_visit,
                          &record);
        for (task = 0; task < N_TASKS; task++) {
            all_once = all_once && record.visits[task] == 1;
        }
        CHECK(all_once);
        CHECK_INT(record.total, (int64_t)N_TASKS * (N_TASKS - 1) / 2);
    }
    /* No tasks, and more threads than tasks. */
    memset((void *)&record, 0, sizeof record);
    fp8q_parallel_for(0, 4, count_visit, &record);
    CHECK_INT(record.total, 0);
    fp8q_parallel_for(3, 64, count_visit, &record);
    CHECK_INT(record.visits[0] + record.visits[1] + record.visits[2], 3);
    CHECK_INT(record.visits[3], 0);
}

void test_atomics(void)
{
    volatile int64_t value = 0;
    fp8q_atomic_store_i64(&value, INT64_C(5000000000));
    CHECK_INT(fp8q_atomic_load_i64(&value), INT64_C(5000000000));
    CHECK_INT(fp8q_atomic_fetch_add_i64(&value, -7), INT64_C(5000000000));
    CHECK_INT(fp8q_atomic_load_i64(&value), INT64_C(4999999993));
}
