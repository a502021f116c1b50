/*
 * test_platform.c - aligned allocation, the parallel loop, atomics,
 * one-time initialisation, shared libraries opened at run time and the
 * processor's features.
 */
#include <stdint.h>
#include <stdio.h>
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

#define N_OUTER_TASKS 8
#define N_INNER_TASKS 100

static volatile int64_t nested_visits[N_OUTER_TASKS][N_INNER_TASKS];

static void count_inner_visit(void *context, int64_t task_index)
{
    fp8q_atomic_fetch_add_i64(&nested_visits[*(const int64_t *)context]
                                            [task_index],
                              1);
}

/* A parallel loop started from inside a task (while the pool is busy)
 * runs on its own thread, and still runs every task once. */
static void run_inner_loop(void *context, int64_t task_index)
{
    (void)context;
    fp8q_parallel_for(N_INNER_TASKS, 4, count_inner_visit, &task_index);
}

void test_parallel_for_nested(void)
{
    int64_t outer, inner;
    int all_once = 1;

    memset((void *)nested_visits, 0, sizeof nested_visits);
    fp8q_parallel_for(N_OUTER_TASKS, 4, run_inner_loop, NULL);
    for (outer = 0; outer < N_OUTER_TASKS; outer++) {
        for (inner = 0; inner < N_INNER_TASKS; inner++) {
            all_once = all_once && nested_visits[outer][inner] == 1;
        }
    }
    CHECK(all_once);
}

void test_atomics(void)
{
    volatile int64_t value = 0;
    fp8q_atomic_store_i64(&value, INT64_C(5000000000));
    CHECK_INT(fp8q_atomic_load_i64(&value), INT64_C(5000000000));
    CHECK_INT(fp8q_atomic_fetch_add_i64(&value, -7), INT64_C(5000000000));
    CHECK_INT(fp8q_atomic_load_i64(&value), INT64_C(4999999993));
}

/* ------------------------------------------------------------------------- */
/* One-time initialisation                                                   */

static fp8q_once once_flag = FP8Q_ONCE_INIT;
static volatile int64_t once_runs;
static volatile int64_t once_seen_after;

static void count_run(void *context)
{
    fp8q_atomic_fetch_add_i64((volatile int64_t *)context, 1);
}

/* Every task calls fp8q_once_run and must find the function already run
 * when the call returns. */
static void run_once_task(void *context, int64_t task_index)
{
    (void)context;
    (void)task_index;
    fp8q_once_run(&once_flag, count_run, (void *)&once_runs);
    if (fp8q_atomic_load_i64(&once_runs) == 1) {
        fp8q_atomic_fetch_add_i64(&once_seen_after, 1);
    }
}

void test_once(void)
{
    fp8q_parallel_for(64, 8, run_once_task, NULL);
    CHECK_INT(fp8q_atomic_load_i64(&once_runs), 1);
    CHECK_INT(fp8q_atomic_load_i64(&once_seen_after), 64);
    fp8q_once_run(&once_flag, count_run, (void *)&once_runs);
    CHECK_INT(fp8q_atomic_load_i64(&once_runs), 1);
}

/* Every task takes the mutex made at first use, and the critical sections
 * it guards: one mutex for all, and no increment of a plain counter lost. */
static fp8q_once mutex_once = FP8Q_ONCE_INIT;
static fp8q_mutex *shared_mutex;
static int64_t guarded_count;
static volatile int64_t other_mutexes;

static void lock_and_count_task(void *context, int64_t task_index)
{
    fp8q_mutex *mutex = fp8q_mutex_create_once(&mutex_once, &shared_mutex);
    int round;

    (void)context;
    (void)task_index;
    if (mutex == NULL || mutex != shared_mutex) {
        fp8q_atomic_fetch_add_i64(&other_mutexes, 1);
        return;
    }
    for (round = 0; round < 1000; round++) {
        fp8q_mutex_lock(mutex);
        guarded_count++;
        fp8q_mutex_unlock(mutex);
    }
}

void test_mutex_create_once(void)
{
    fp8q_parallel_for(64, 8, lock_and_count_task, NULL);
    CHECK_INT(fp8q_atomic_load_i64(&other_mutexes), 0);
    CHECK_INT(guarded_count, 64 * 1000);
    CHECK(fp8q_mutex_create_once(&mutex_once, &shared_mutex) == shared_mutex);
}

/* Keys and values of the pointer-table tests: only their addresses count. */
static char table_keys[12];
static fp8q_pointer_table shared_table = FP8Q_POINTER_TABLE_INIT;
static volatile int64_t table_additions;

/* Each of 64 tasks adds the same 6 keys, in an order of its own; key k's
 * value is the address of key k + 6. */
static void add_keys_task(void *context, int64_t task_index)
{
    int step;

    (void)context;
    for (step = 0; step < 6; step++) {
        const int key = (int)((step + task_index) % 6);
        if (fp8q_pointer_table_add(&shared_table, &table_keys[key],
                                   &table_keys[key + 6])) {
            fp8q_atomic_fetch_add_i64(&table_additions, 1);
        }
    }
}

void test_pointer_table(void)
{
    static fp8q_pointer_table table = FP8Q_POINTER_TABLE_INIT;
    const void *value = &table_keys[0];
    int key;

    /* One thread: absent, added once, a NULL value found as such. */
    CHECK_INT(fp8q_pointer_table_find(&table, &table_keys[0], &value), 0);
    CHECK(value == NULL);
    CHECK_INT(fp8q_pointer_table_add(&table, &table_keys[0], NULL), 1);
    CHECK_INT(fp8q_pointer_table_add(&table, &table_keys[0], &table), 0);
    CHECK_INT(fp8q_atomic_load_i64(&table.count), 1);
    value = &table;
    CHECK_INT(fp8q_pointer_table_find(&table, &table_keys[0], &value), 1);
    CHECK(value == NULL);
    /* Full: the keys after the eighth are neither kept nor found. */
    for (key = 1; key < 12; key++) {
        CHECK_INT(fp8q_pointer_table_add(&table, &table_keys[key],
                                         &table_keys[key]),
                  key < FP8Q_POINTER_TABLE_SIZE);
        CHECK_INT(fp8q_pointer_table_find(&table, &table_keys[key], &value),
                  key < FP8Q_POINTER_TABLE_SIZE);
        CHECK(value == (key < FP8Q_POINTER_TABLE_SIZE ? &table_keys[key]
                                                      : NULL));
    }
    /* 64 tasks racing to add 6 keys: each key added once, by one task. */
    fp8q_parallel_for(64, 8, add_keys_task, NULL);
    CHECK_INT(fp8q_atomic_load_i64(&table_additions), 6);
    CHECK_INT(fp8q_atomic_load_i64(&shared_table.count), 6);
    for (key = 0; key < 6; key++) {
        CHECK_INT(fp8q_pointer_table_find(&shared_table, &table_keys[key],
                                          &value),
                  1);
        CHECK(value == &table_keys[key + 6]);
    }
}

/* ------------------------------------------------------------------------- */
/* Shared libraries                                                          */

#if defined(_WIN32)
/* Loaded in every Windows process, and found in System32. */
#define SYSTEM_LIBRARY "kernel32.dll"
#define SYSTEM_SYMBOL "GetCurrentProcessId"
#define LOADED_NAME "kernel32.dll"
#elif defined(__APPLE__)
#define SYSTEM_LIBRARY "/usr/lib/libSystem.B.dylib"
#define SYSTEM_SYMBOL "strlen"
#define LOADED_NAME "/usr/lib/libSystem.B.dylib"
#else
#define SYSTEM_LIBRARY "libc.so.6"
#define SYSTEM_SYMBOL "strlen"
#define LOADED_NAME "libc.so.6"
#endif

void test_library_open_and_symbols(void)
{
    char error_text[256] = "untouched";
    char path[1024];
    fp8q_library *library;
    fp8q_library *again = NULL;

    library = fp8q_library_open(SYSTEM_LIBRARY, 1, error_text,
                                sizeof error_text);
    CHECK(library != NULL);
    if (library == NULL) {
        return;
    }
    CHECK(strcmp(error_text, "untouched") == 0);
    CHECK(fp8q_library_symbol(library, SYSTEM_SYMBOL) != NULL);
    CHECK(fp8q_library_symbol(library, "fp8q_no_such_symbol") == NULL);
#if defined(__APPLE__)
    CHECK(fp8q_library_path(library, path, sizeof path) == -1 ||
          path[0] != '\0');
#else
    /* The file the loader found, not the name it was given. */
    CHECK_INT(fp8q_library_path(library, path, sizeof path), 0);
    CHECK(strstr(path, SYSTEM_LIBRARY) != NULL ||
          strstr(path, "KERNEL32") != NULL);
    CHECK(path[0] != '\0' && strcmp(path, SYSTEM_LIBRARY) != 0);
#endif
    /* A tiny buffer truncates, still NUL-terminated. */
    if (fp8q_library_path(library, path, 4) == 0) {
        CHECK_INT(strlen(path), 3);
    }
    fp8q_library_close(library);

    CHECK(fp8q_library_is_loaded(LOADED_NAME, NULL));
    CHECK(fp8q_library_is_loaded(LOADED_NAME, &again));
    CHECK(again != NULL);
    if (again != NULL) {
        CHECK(fp8q_library_symbol(again, SYSTEM_SYMBOL) != NULL);
    }
    fp8q_library_close(again);
    fp8q_library_close(NULL);
}

/* A bare name without `system_only`, then the file it came from by its
 * path (on Windows with forward slashes, which fp8q_library_open turns into
 * an absolute backslash path). */
void test_library_open_by_path(void)
{
    char error_text[256] = "";
    char path[1024];
    char *cursor;
    fp8q_library *library;
    fp8q_library *by_path;

    library = fp8q_library_open(SYSTEM_LIBRARY, 0, error_text,
                                sizeof error_text);
    CHECK(library != NULL);
    if (library == NULL) {
        return;
    }
    if (fp8q_library_path(library, path, sizeof path) == 0) {
        for (cursor = path; *cursor != '\0'; cursor++) {
            if (*cursor == '\\') {
                *cursor = '/';
            }
        }
        by_path = fp8q_library_open(path, 0, error_text, sizeof error_text);
        CHECK(by_path != NULL);
        if (by_path != NULL) {
            CHECK(fp8q_library_symbol(by_path, SYSTEM_SYMBOL) != NULL);
        }
        fp8q_library_close(by_path);
    }
    fp8q_library_close(library);

    /* A relative path that names nothing fails with the loader's reason. */
    library = fp8q_library_open("./fp8q-no-such-library-1234", 0, error_text,
                                sizeof error_text);
    CHECK(library == NULL);
#if defined(_WIN32)
    CHECK(strstr(error_text, "(Windows error 126)") != NULL);
#else
    CHECK(strstr(error_text, "fp8q-no-such-library-1234") != NULL);
#endif
}

void test_library_open_errors(void)
{
    char error_text[256];
    char small[8];
    fp8q_library *library = (fp8q_library *)&error_text;

    error_text[0] = '\0';
    library = fp8q_library_open("fp8q-no-such-library-1234", 0, error_text,
                                sizeof error_text);
    CHECK(library == NULL);
#if defined(_WIN32)
    /* ERROR_MOD_NOT_FOUND */
    CHECK(strstr(error_text, "(Windows error 126)") != NULL);
#else
    CHECK(strstr(error_text, "fp8q-no-such-library-1234") != NULL);
#endif
    /* Limited to System32 (Windows; POSIX ignores the flag), a missing
     * library fails the same way; a small buffer truncates the reason. */
    library = fp8q_library_open("fp8q-no-such-library-1234", 1, small,
                                sizeof small);
    CHECK(library == NULL);
    CHECK_INT(strlen(small), sizeof small - 1);
    CHECK(!fp8q_library_is_loaded("fp8q-no-such-library-1234", NULL));
    library = (fp8q_library *)&error_text;
    CHECK(!fp8q_library_is_loaded("fp8q-no-such-library-1234", &library));
    CHECK(library == NULL);
}

/* ------------------------------------------------------------------------- */
/* Processor features                                                        */

/* The flags line of /proc/cpuinfo (Linux's view of CPUID, with the
 * features whose registers the kernel does not enable taken out), with a
 * space at each end, in `flags`; 0 where there is no such file (Windows; a
 * program under Wine reads the Linux host's). */
static int read_cpuinfo_flags(char *flags, size_t size)
{
    char line[8192];
    FILE *file = fopen("/proc/cpuinfo", "r");
    int found = 0;

    if (file == NULL) {
        return 0;
    }
    while (!found && fgets(line, (int)sizeof line, file) != NULL) {
        if (strncmp(line, "flags", 5) == 0 && strchr(line, ':') != NULL) {
            (void)snprintf(flags, size, " %s", strchr(line, ':') + 1);
            flags[strcspn(flags, "\n")] = ' ';
            found = 1;
        }
    }
    fclose(file);
    return found;
}

void test_cpu_features(void)
{
    static const char *const flag_names[FP8Q_CPU_FEATURE_COUNT] = {
        " avx2 ", " fma ", " f16c "};
    static const char *const names[FP8Q_CPU_FEATURE_COUNT] = {"AVX2", "FMA",
                                                               "F16C"};
    static char flags[8192];
    const int have_flags = read_cpuinfo_flags(flags, sizeof flags);
    fp8q_cpu_support support[FP8Q_CPU_FEATURE_COUNT];
    int feature;

    for (feature = 0; feature < FP8Q_CPU_FEATURE_COUNT; feature++) {
        support[feature] = fp8q_cpu_support_of((fp8q_cpu_feature)feature);
        CHECK(strcmp(fp8q_cpu_feature_name((fp8q_cpu_feature)feature),
                     names[feature]) == 0);
#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64) || \
    defined(_M_IX86)
        CHECK(support[feature] != FP8Q_CPU_NOT_X86);
        if (have_flags) {
            /* The kernel's flags and fp8q's reading of CPUID and XCR0 agree
             * (natively, and under Wine through the host's file). */
            CHECK_INT(support[feature] == FP8Q_CPU_SUPPORTED,
                      strstr(flags, flag_names[feature]) != NULL);
        }
#else
        (void)have_flags;
        (void)flag_names;
        CHECK_INT(support[feature], FP8Q_CPU_NOT_X86);
#endif
        /* Read once: the same answer every time. */
        CHECK_INT(fp8q_cpu_support_of((fp8q_cpu_feature)feature),
                  support[feature]);
    }
    CHECK_INT(fp8q_cpu_has_avx2(),
              support[FP8Q_CPU_AVX2] == FP8Q_CPU_SUPPORTED &&
                  support[FP8Q_CPU_F16C] == FP8Q_CPU_SUPPORTED);
    CHECK_INT(fp8q_cpu_has_avx2_fma(),
              fp8q_cpu_has_avx2() &&
                  support[FP8Q_CPU_FMA] == FP8Q_CPU_SUPPORTED);
    CHECK(strcmp(fp8q_cpu_support_text(FP8Q_CPU_SUPPORTED), "supported") ==
          0);
    CHECK(strcmp(fp8q_cpu_support_text(FP8Q_CPU_NOT_X86),
                 "not built (non-x86)") == 0);
    CHECK(strcmp(fp8q_cpu_support_text(FP8Q_CPU_NOT_REPORTED),
                 "not reported by the CPU") == 0);
    CHECK(strcmp(fp8q_cpu_support_text(FP8Q_CPU_NO_OS_AVX_STATE),
                 "the OS has not enabled AVX state") == 0);
}
