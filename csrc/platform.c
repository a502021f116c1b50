/*
 * platform.c - the only OS-specific code in fp8q: aligned allocation, the
 * processor count, a fork-join parallel loop and 64-bit atomics.
 *
 * POSIX builds use posix_memalign, sysconf/sched_getaffinity, pthreads and the
 * GCC/clang __atomic builtins; Windows builds use _aligned_malloc,
 * GetActiveProcessorCount, _beginthreadex and the Interlocked* functions.
 */
#if defined(_WIN32)
#ifndef _WIN32_WINNT
#define _WIN32_WINNT 0x0601 /* Windows 7: GetActiveProcessorCount */
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
#include <malloc.h>
#include <process.h>
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h> /* __cpuid, _xgetbv */
#endif
#elif defined(__linux__)
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h> /* madvise(MADV_HUGEPAGE) */
#include <unistd.h>
#elif defined(__APPLE__)
#define _DARWIN_C_SOURCE /* sysconf(_SC_NPROCESSORS_ONLN) */
#include <pthread.h>
#include <unistd.h>
#else
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <unistd.h>
#endif

#include <stdlib.h>

#include "platform.h"

/* ------------------------------------------------------------------------- */
/* Memory                                                                    */

#if defined(__linux__)
/* Large blocks are aligned to, and advised as, transparent huge pages, as
 * NumPy does for its data: a fresh 16 MiB result then costs 8 page faults
 * instead of 4096, which otherwise dominates a memory-bound cast. */
#define FP8Q_HUGE_PAGE_SIZE ((size_t)2 << 20)
#define FP8Q_HUGE_PAGE_MIN_REQUEST ((size_t)4 << 20)
#endif

void *fp8q_aligned_alloc(size_t size)
{
    /* A zero-byte request still gets a real, unique block. */
    const size_t request = size == 0 ? FP8Q_ALIGNMENT : size;
#if defined(_WIN32)
    return _aligned_malloc(request, FP8Q_ALIGNMENT);
#else
    void *pointer = NULL;
    size_t alignment = FP8Q_ALIGNMENT;
#if defined(__linux__)
    if (request >= FP8Q_HUGE_PAGE_MIN_REQUEST) {
        alignment = FP8Q_HUGE_PAGE_SIZE;
    }
#endif
    if (posix_memalign(&pointer, alignment, request) != 0) {
        return NULL;
    }
#if defined(__linux__)
    if (alignment == FP8Q_HUGE_PAGE_SIZE) {
        /* Advice only: a kernel without THP support returns an error that
         * changes nothing, so it is ignored. */
        (void)madvise(pointer, request & ~(FP8Q_HUGE_PAGE_SIZE - 1), MADV_HUGEPAGE);
    }
#endif
    return pointer;
#endif
}

void fp8q_aligned_free(void *pointer)
{
#if defined(_WIN32)
    _aligned_free(pointer);
#else
    free(pointer);
#endif
}

/* ------------------------------------------------------------------------- */
/* Atomics                                                                   */

#if defined(_WIN32)

int64_t fp8q_atomic_load_i64(const volatile int64_t *address)
{
    /* A compare-exchange that never changes the value: a full-barrier load. */
    return InterlockedCompareExchange64((volatile LONG64 *)address, 0, 0);
}

void fp8q_atomic_store_i64(volatile int64_t *address, int64_t value)
{
    InterlockedExchange64((volatile LONG64 *)address, value);
}

int64_t fp8q_atomic_fetch_add_i64(volatile int64_t *address, int64_t delta)
{
    return InterlockedExchangeAdd64((volatile LONG64 *)address, delta);
}

#else

int64_t fp8q_atomic_load_i64(const volatile int64_t *address)
{
    return __atomic_load_n(address, __ATOMIC_SEQ_CST);
}

void fp8q_atomic_store_i64(volatile int64_t *address, int64_t value)
{
    __atomic_store_n(address, value, __ATOMIC_SEQ_CST);
}

int64_t fp8q_atomic_fetch_add_i64(volatile int64_t *address, int64_t delta)
{
    return __atomic_fetch_add(address, delta, __ATOMIC_SEQ_CST);
}

#endif

/* ------------------------------------------------------------------------- */
/* Processor features                                                        */

#if defined(_MSC_VER) && !defined(__clang__) && \
    (defined(_M_X64) || defined(_M_IX86))

int fp8q_cpu_has_avx2(void)
{
    int registers[4];
    __cpuid(registers, 0);
    if (registers[0] < 7) {
        return 0;
    }
    /* AVX and OSXSAVE, and the OS saving the XMM and YMM registers. */
    __cpuid(registers, 1);
    if ((registers[2] & (1 << 28)) == 0 || (registers[2] & (1 << 27)) == 0 ||
        (_xgetbv(0) & 6) != 6) {
        return 0;
    }
    __cpuidex(registers, 7, 0);
    return (registers[1] & (1 << 5)) != 0;
}

#elif defined(__x86_64__) || defined(__i386__)

int fp8q_cpu_has_avx2(void)
{
    /* libgcc / compiler-rt check the OS support (XGETBV) as well. */
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
}

#else

int fp8q_cpu_has_avx2(void)
{
    return 0;
}

#endif

/* ------------------------------------------------------------------------- */
/* Processor count                                                           */

int fp8q_cpu_count(void)
{
    int64_t count = 1;
#if defined(_WIN32)
    count = (int64_t)GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
#elif defined(__linux__)
    /* Respect the affinity mask (taskset, cgroup cpusets) where known. */
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
        count = CPU_COUNT(&allowed);
    }
    else {
        count = (int64_t)sysconf(_SC_NPROCESSORS_ONLN);
    }
#else
    count = (int64_t)sysconf(_SC_NPROCESSORS_ONLN);
#endif
    if (count < 1) {
        return 1;
    }
    if (count > 4096) {
        return 4096;
    }
    return (int)count;
}

/* ------------------------------------------------------------------------- */
/* Parallel loop                                                             */

/* What every participating thread shares: tasks are claimed one at a time
 * from next_task, so threads that finish early take more. */
typedef struct parallel_job {
    volatile int64_t next_task;
    int64_t n_tasks;
    fp8q_task_fn task;
    void *context;
} parallel_job;

static void run_tasks(parallel_job *job)
{
    for (;;) {
        const int64_t index = fp8q_atomic_fetch_add_i64(&job->next_task, 1);
        if (index >= job->n_tasks) {
            return;
        }
        job->task(job->context, index);
    }
}

#if defined(_WIN32)

typedef HANDLE worker_handle;

static unsigned __stdcall worker_main(void *argument)
{
    run_tasks((parallel_job *)argument);
    return 0;
}

static int start_worker(worker_handle *handle, parallel_job *job)
{
    const uintptr_t thread =
        _beginthreadex(NULL, 0, worker_main, job, 0, NULL);
    if (thread == 0) {
        return 0;
    }
    *handle = (HANDLE)thread;
    return 1;
}

static void join_worker(worker_handle handle)
{
    WaitForSingleObject(handle, INFINITE);
    CloseHandle(handle);
}

#else

typedef pthread_t worker_handle;

static void *worker_main(void *argument)
{
    run_tasks((parallel_job *)argument);
    return NULL;
}

static int start_worker(worker_handle *handle, parallel_job *job)
{
    return pthread_create(handle, NULL, worker_main, job) == 0;
}

static void join_worker(worker_handle handle)
{
    pthread_join(handle, NULL);
}

#endif

void fp8q_parallel_for(int64_t n_tasks, int n_threads, fp8q_task_fn task,
                       void *context)
{
    parallel_job job;
    worker_handle *workers = NULL;
    int n_workers = 0;
    int64_t wanted = n_threads < 1 ? 1 : n_threads;
    int index;

    if (n_tasks <= 0) {
        return;
    }
    if (wanted > n_tasks) {
        wanted = n_tasks;
    }
    job.next_task = 0;
    job.n_tasks = n_tasks;
    job.task = task;
    job.context = context;

    /* The calling thread is one of the wanted threads. Any worker that cannot
     * be started simply leaves its share to the threads that did start. */
    if (wanted > 1) {
        workers = (worker_handle *)malloc((size_t)(wanted - 1) *
                                          sizeof *workers);
    }
    if (workers != NULL) {
        while (n_workers < wanted - 1 &&
               start_worker(&workers[n_workers], &job)) {
            n_workers++;
        }
    }
    run_tasks(&job);
    for (index = 0; index < n_workers; index++) {
        join_worker(workers[index]);
    }
    free(workers);
}
