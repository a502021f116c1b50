/*
 * platform.c - the only OS-specific code in fp8q: aligned allocation, the
 * processor count and its x86 features, a parallel loop on a pool of worker
 * threads, interrupts that long loops poll (thread-local, with a monotonic
 * clock), 64-bit atomics, one-time initialisation, locks that survive
 * fork() and a small pointer cache with lock-free lookups, shared
 * libraries opened at run time and whole files read by UTF-8 path.
 *
 * POSIX builds use posix_memalign, sysconf/sched_getaffinity, pthreads (with
 * fork handlers that keep every lock usable in a child), the GCC/clang
 * __atomic builtins and dlopen; Windows builds use _aligned_malloc,
 * GetActiveProcessorCount, _beginthreadex, the Interlocked* functions, SRW
 * locks, condition variables and LoadLibraryExW. Processor features come
 * from the CPUID and XGETBV instructions on every OS and compiler.
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
#include <wchar.h> /* wcspbrk */
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h> /* __cpuidex */
#endif
#elif defined(__linux__)
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h> /* madvise(MADV_HUGEPAGE) */
#include <unistd.h>
#include <dlfcn.h>
#include <link.h> /* dlinfo(RTLD_DI_LINKMAP) */
#elif defined(__APPLE__)
#define _DARWIN_C_SOURCE /* sysconf(_SC_NPROCESSORS_ONLN) */
#include <pthread.h>
#include <unistd.h>
#include <dlfcn.h>
#else
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <unistd.h>
#include <dlfcn.h>
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if !defined(_WIN32)
#include <time.h> /* clock_gettime */
#endif
#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64) || \
    defined(_M_IX86)
#define FP8Q_X86 1
#else
#define FP8Q_X86 0
#endif
/* A hint to the processor inside a polling loop (x86's PAUSE). */
#if FP8Q_X86
#include <immintrin.h> /* _mm_pause, _xgetbv */
#define FP8Q_SPIN_PAUSE() _mm_pause()
#else
#define FP8Q_SPIN_PAUSE() ((void)0)
#endif

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

/*
 * Read from the CPUID and XGETBV instructions through each compiler's
 * intrinsics: MSVC's __cpuidex and _xgetbv; <cpuid.h>'s __cpuid_count and
 * <immintrin.h>'s _xgetbv with gcc, clang and zig. Their _xgetbv belongs to
 * the XSAVE instruction set, so read_xcr0 alone is compiled for it; it runs
 * only where CPUID's OSXSAVE bit says the OS has turned XSAVE on (which
 * implies that the processor has it). The decisions below are the same for
 * every compiler.
 */
#if FP8Q_X86 && defined(_MSC_VER) && !defined(__clang__)

/* CPUID leaf `leaf`, subleaf `subleaf`: EAX, EBX, ECX and EDX. */
static void read_cpuid(unsigned int leaf, unsigned int subleaf,
                       uint32_t registers[4])
{
    int values[4];
    int i;

    __cpuidex(values, (int)leaf, (int)subleaf);
    for (i = 0; i < 4; i++) {
        registers[i] = (uint32_t)values[i];
    }
}

/* XCR0: the register state the OS saves and restores (XGETBV 0). */
static uint64_t read_xcr0(void)
{
    return (uint64_t)_xgetbv(0);
}

#elif FP8Q_X86

#include <cpuid.h> /* __cpuid_count */

/* CPUID leaf `leaf`, subleaf `subleaf`: EAX, EBX, ECX and EDX. */
static void read_cpuid(unsigned int leaf, unsigned int subleaf,
                       uint32_t registers[4])
{
    unsigned int eax, ebx, ecx, edx;

    __cpuid_count(leaf, subleaf, eax, ebx, ecx, edx);
    registers[0] = eax;
    registers[1] = ebx;
    registers[2] = ecx;
    registers[3] = edx;
}

/* XCR0: the register state the OS saves and restores (XGETBV 0). */
__attribute__((target("xsave"))) static uint64_t read_xcr0(void)
{
    return (uint64_t)_xgetbv(0);
}

#endif

#if FP8Q_X86
/* The bits that matter here: CPUID leaf 1's ECX, leaf 7's EBX, and XCR0's
 * SSE (XMM, bit 1) and AVX (upper YMM halves, bit 2) state components. */
#define CPUID_1_ECX_FMA (1u << 12)
#define CPUID_1_ECX_OSXSAVE (1u << 27)
#define CPUID_1_ECX_AVX (1u << 28)
#define CPUID_1_ECX_F16C (1u << 29)
#define CPUID_7_EBX_AVX2 (1u << 5)
#define XCR0_SSE_AVX_STATE 6u
#endif

static fp8q_cpu_support cpu_support[FP8Q_CPU_FEATURE_COUNT];
static fp8q_once cpu_support_once = FP8Q_ONCE_INIT;

static void detect_cpu_support(void *context)
{
#if FP8Q_X86
    uint32_t registers[4];
    uint32_t max_leaf;
    uint32_t leaf1_ecx;
    uint32_t leaf7_ebx = 0;
    int reported[FP8Q_CPU_FEATURE_COUNT];
    int os_avx_state;
    int feature;

    (void)context;
    read_cpuid(0, 0, registers);
    max_leaf = registers[0];
    read_cpuid(1, 0, registers);
    leaf1_ecx = registers[2];
    if (max_leaf >= 7) {
        read_cpuid(7, 0, registers);
        leaf7_ebx = registers[1];
    }
    os_avx_state = (leaf1_ecx & CPUID_1_ECX_OSXSAVE) != 0 &&
                   (read_xcr0() & XCR0_SSE_AVX_STATE) == XCR0_SSE_AVX_STATE;
    reported[FP8Q_CPU_AVX2] = (leaf7_ebx & CPUID_7_EBX_AVX2) != 0;
    reported[FP8Q_CPU_FMA] = (leaf1_ecx & CPUID_1_ECX_FMA) != 0;
    reported[FP8Q_CPU_F16C] = (leaf1_ecx & CPUID_1_ECX_F16C) != 0;
    for (feature = 0; feature < FP8Q_CPU_FEATURE_COUNT; feature++) {
        /* All three are VEX-encoded: each needs AVX and its registers. */
        if (!reported[feature] || (leaf1_ecx & CPUID_1_ECX_AVX) == 0) {
            cpu_support[feature] = FP8Q_CPU_NOT_REPORTED;
        }
        else if (!os_avx_state) {
            cpu_support[feature] = FP8Q_CPU_NO_OS_AVX_STATE;
        }
        else {
            cpu_support[feature] = FP8Q_CPU_SUPPORTED;
        }
    }
#else
    int feature;

    (void)context;
    for (feature = 0; feature < FP8Q_CPU_FEATURE_COUNT; feature++) {
        cpu_support[feature] = FP8Q_CPU_NOT_X86;
    }
#endif
}

fp8q_cpu_support fp8q_cpu_support_of(fp8q_cpu_feature feature)
{
    fp8q_once_run(&cpu_support_once, detect_cpu_support, NULL);
    return cpu_support[feature];
}

const char *fp8q_cpu_feature_name(fp8q_cpu_feature feature)
{
    static const char *const names[FP8Q_CPU_FEATURE_COUNT] = {"AVX2", "FMA",
                                                              "F16C"};
    return (unsigned)feature < FP8Q_CPU_FEATURE_COUNT ? names[feature]
                                                      : "unknown";
}

const char *fp8q_cpu_support_text(fp8q_cpu_support support)
{
    static const char *const texts[] = {
        "supported", "not built (non-x86)", "not reported by the CPU",
        "the OS has not enabled AVX state"};
    return (unsigned)support < sizeof texts / sizeof texts[0] ? texts[support]
                                                              : "unknown";
}

int fp8q_cpu_has_avx2(void)
{
    return fp8q_cpu_support_of(FP8Q_CPU_AVX2) == FP8Q_CPU_SUPPORTED &&
           fp8q_cpu_support_of(FP8Q_CPU_F16C) == FP8Q_CPU_SUPPORTED;
}

int fp8q_cpu_has_avx2_fma(void)
{
    return fp8q_cpu_has_avx2() &&
           fp8q_cpu_support_of(FP8Q_CPU_FMA) == FP8Q_CPU_SUPPORTED;
}

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
/* Interrupts (see platform.h): per thread, the interrupt its work polls and
 * the one it owns (checks), and the elements polled since the owner last
 * looked at the clock. */

enum { POLLED_SLOT, OWNED_SLOT, ELEMENTS_SLOT, N_SLOTS };

#if defined(_WIN32)
/* Win32 thread-local slots, on every Windows compiler alike: MinGW's GCC
 * compiles _Thread_local through libgcc's emulation, which would make the
 * module import libgcc_s_seh-1.dll. A slot that TlsAlloc could not give
 * reads as 0: no interrupt is polled on this thread then. */
static DWORD tls_slots[N_SLOTS];
static fp8q_once tls_once = FP8Q_ONCE_INIT;

static void allocate_tls_slots(void *unused)
{
    int slot;

    (void)unused;
    for (slot = 0; slot < N_SLOTS; slot++) {
        tls_slots[slot] = TlsAlloc();
    }
}

static void *thread_value(int slot)
{
    fp8q_once_run(&tls_once, allocate_tls_slots, NULL);
    return TlsGetValue(tls_slots[slot]);
}

static void set_thread_value(int slot, void *value)
{
    fp8q_once_run(&tls_once, allocate_tls_slots, NULL);
    (void)TlsSetValue(tls_slots[slot], value);
}
#else
static _Thread_local void *thread_values[N_SLOTS];

static void *thread_value(int slot)
{
    return thread_values[slot];
}

static void set_thread_value(int slot, void *value)
{
    thread_values[slot] = value;
}
#endif

#define polled_interrupt() ((fp8q_interrupt *)thread_value(POLLED_SLOT))
#define owned_interrupt() ((fp8q_interrupt *)thread_value(OWNED_SLOT))
/* Fewer than ELEMENTS_PER_CLOCK: a pointer holds it. */
#define elements_since_clock() ((int64_t)(intptr_t)thread_value(ELEMENTS_SLOT))

/* Elements between two looks at the clock (about a millisecond of work). */
#define ELEMENTS_PER_CLOCK ((int64_t)1 << 20)

int64_t fp8q_monotonic_ns(void)
{
#if defined(_WIN32)
    LARGE_INTEGER count;
    LARGE_INTEGER frequency;
    (void)QueryPerformanceCounter(&count);
    (void)QueryPerformanceFrequency(&frequency);
    return (int64_t)((double)count.QuadPart * 1e9 /
                     (double)frequency.QuadPart);
#else
    struct timespec now;
    (void)clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + (int64_t)now.tv_nsec;
#endif
}

void fp8q_interrupt_begin(fp8q_interrupt *interrupt,
                          fp8q_interrupt_check_fn check, void *context)
{
    interrupt->check = check;
    interrupt->context = context;
    interrupt->stopped = 0;
    interrupt->next_check_ns =
        fp8q_monotonic_ns() + (int64_t)FP8Q_INTERRUPT_CHECK_MS * 1000000;
    interrupt->previous = owned_interrupt();
    set_thread_value(OWNED_SLOT, interrupt);
    set_thread_value(POLLED_SLOT, interrupt);
}

int fp8q_interrupt_end(fp8q_interrupt *interrupt)
{
    set_thread_value(OWNED_SLOT, interrupt->previous);
    set_thread_value(POLLED_SLOT, interrupt->previous);
    return fp8q_atomic_load_i64(&interrupt->stopped) != 0;
}

/* The owner's check, when due; nonzero when the interrupt is stopped. */
static int check_owned(fp8q_interrupt *interrupt)
{
    const int64_t now = fp8q_monotonic_ns();

    if (now < interrupt->next_check_ns) {
        return 0;
    }
    interrupt->next_check_ns =
        now + (int64_t)FP8Q_INTERRUPT_CHECK_MS * 1000000;
    if (interrupt->check(interrupt->context) != 0) {
        fp8q_atomic_store_i64(&interrupt->stopped, 1);
        return 1;
    }
    return 0;
}

int fp8q_interrupt_poll(int64_t n_elements)
{
    fp8q_interrupt *interrupt = polled_interrupt();
    int64_t elements;

    if (interrupt == NULL) {
        return 0;
    }
    if (fp8q_atomic_load_i64(&interrupt->stopped) != 0) {
        return 1;
    }
    if (interrupt != owned_interrupt()) {
        return 0;
    }
    elements = elements_since_clock() + n_elements;
    if (elements < ELEMENTS_PER_CLOCK) {
        set_thread_value(ELEMENTS_SLOT, (void *)(intptr_t)elements);
        return 0;
    }
    set_thread_value(ELEMENTS_SLOT, NULL);
    return check_owned(interrupt);
}

/* ------------------------------------------------------------------------- */
/* Parallel loop                                                             */

/*
 * fp8q_parallel_for runs on a pool of worker threads started on first need
 * and kept for the life of the process, so a call costs a wake-up, not a
 * thread creation (which takes milliseconds on some virtual machines, longer
 * than a small product itself).
 *
 * A call posts its job with a number of open slots (the helpers it wants)
 * and signals that many workers. A worker claims a slot, runs tasks until
 * none is left, and reports back. When the caller has run out of tasks
 * itself it withdraws the slots no worker has claimed yet (a late worker
 * would find nothing to do), then waits only for the workers that are
 * running. One job at a time uses the pool: a call made while it is in use
 * (from another thread, or from inside a task) runs its tasks on the calling
 * thread alone. In a child process made by fork() the pool starts empty.
 */

/* What every participating thread shares: tasks are claimed one at a time
 * from next_task, so threads that finish early take more. */
typedef struct parallel_job {
    volatile int64_t next_task;
    int64_t n_tasks;
    fp8q_task_fn task;
    void *context;
    fp8q_interrupt *interrupt; /* the caller's, seen by the helpers */
} parallel_job;

/* Runs the job's tasks under its caller's interrupt (the helpers'
 * thread-local is set for the job, then cleared). An interrupted job's
 * remaining tasks are skipped. */
static void run_tasks(parallel_job *job)
{
    fp8q_interrupt *const own = polled_interrupt();

    set_thread_value(POLLED_SLOT, job->interrupt);
    for (;;) {
        const int64_t index = fp8q_atomic_fetch_add_i64(&job->next_task, 1);
        if (index >= job->n_tasks ||
            (job->interrupt != NULL &&
             fp8q_atomic_load_i64(&job->interrupt->stopped) != 0)) {
            break;
        }
        job->task(job->context, index);
    }
    set_thread_value(POLLED_SLOT, own);
}

/* Locks and condition variables that initialise statically (also used by
 * fp8q_once_run below). */
#if defined(_WIN32)
typedef SRWLOCK static_lock;
typedef CONDITION_VARIABLE pool_condition;
#define STATIC_LOCK_INIT SRWLOCK_INIT
#define POOL_CONDITION_INIT CONDITION_VARIABLE_INIT
#define static_lock_acquire(lock) AcquireSRWLockExclusive(lock)
#define static_lock_release(lock) ReleaseSRWLockExclusive(lock)
#define pool_wait(condition, lock) \
    ((void)SleepConditionVariableSRW(condition, lock, INFINITE, 0))
#define pool_signal(condition) WakeConditionVariable(condition)
#define pool_wait_ms(condition, lock, ms) \
    ((void)SleepConditionVariableSRW(condition, lock, ms, 0))
#else
typedef pthread_mutex_t static_lock;
typedef pthread_cond_t pool_condition;
#define STATIC_LOCK_INIT PTHREAD_MUTEX_INITIALIZER
#define POOL_CONDITION_INIT PTHREAD_COND_INITIALIZER
#define static_lock_acquire(lock) ((void)pthread_mutex_lock(lock))
#define static_lock_release(lock) ((void)pthread_mutex_unlock(lock))
#define pool_wait(condition, lock) ((void)pthread_cond_wait(condition, lock))
#define pool_signal(condition) ((void)pthread_cond_signal(condition))
/* Waits at most `ms` milliseconds (a timeout is no error). */
static void pool_wait_ms(pool_condition *condition, static_lock *lock, int ms)
{
    struct timespec until;
    (void)clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += (long)ms * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    (void)pthread_cond_timedwait(condition, lock, &until);
}
#endif

/* The pool; every field is guarded by `lock`. */
typedef struct worker_pool {
    static_lock lock;
    pool_condition job_posted; /* a slot was opened */
    pool_condition slot_done;  /* a worker finished its slot */
    int n_workers;             /* workers started (they never exit) */
    int in_use;                /* a call owns the pool */
    parallel_job *job;         /* the job of the call that owns it */
    int open_slots;            /* slots posted and not yet claimed */
    int running_slots;         /* slots claimed and not yet finished */
} worker_pool;

static worker_pool pool = {STATIC_LOCK_INIT, POOL_CONDITION_INIT,
                           POOL_CONDITION_INIT, 0, 0, NULL, 0, 0};

/* Jobs posted so far (written under the pool's lock, read without it). */
static volatile int64_t jobs_posted;

/* How many times a worker that has finished its slot checks for the next job
 * before it sleeps: about 0.1 ms of polling, so that a program calling fp8q
 * back to back (a model's layers) finds its workers running instead of
 * waking them, which can take longer than a small job on a virtual machine.
 * Kept short: a polling worker takes its processor from other programs. */
#define POLLS_BEFORE_SLEEP 4000

/* Returns when a job was posted after `seen`, or after the polls. */
static void poll_for_next_job(int64_t seen)
{
    int poll;
    for (poll = 0; poll < POLLS_BEFORE_SLEEP; poll++) {
        if (fp8q_atomic_load_i64(&jobs_posted) != seen) {
            return;
        }
        FP8Q_SPIN_PAUSE();
    }
}

static void worker_loop(void)
{
    static_lock_acquire(&pool.lock);
    for (;;) {
        parallel_job *job;
        int64_t seen;
        while (pool.open_slots == 0) {
            pool_wait(&pool.job_posted, &pool.lock);
        }
        pool.open_slots--;
        pool.running_slots++;
        job = pool.job;
        static_lock_release(&pool.lock);
        run_tasks(job);
        static_lock_acquire(&pool.lock);
        pool.running_slots--;
        if (pool.running_slots == 0) {
            pool_signal(&pool.slot_done);
        }
        seen = fp8q_atomic_load_i64(&jobs_posted);
        static_lock_release(&pool.lock);
        poll_for_next_job(seen);
        static_lock_acquire(&pool.lock);
    }
}

#if defined(_WIN32)

static unsigned __stdcall worker_main(void *unused)
{
    (void)unused;
    worker_loop();
    return 0;
}

/* Starts one detached worker; 0 when the system refuses. */
static int start_worker(void)
{
    const uintptr_t thread =
        _beginthreadex(NULL, 0, worker_main, NULL, 0, NULL);
    if (thread == 0) {
        return 0;
    }
    CloseHandle((HANDLE)thread);
    return 1;
}

#else

static void *worker_main(void *unused)
{
    (void)unused;
    worker_loop();
    return NULL;
}

/* Starts one detached worker; 0 when the system refuses. */
static int start_worker(void)
{
    pthread_t thread;
    if (pthread_create(&thread, NULL, worker_main, NULL) != 0) {
        return 0;
    }
    (void)pthread_detach(thread);
    return 1;
}

#endif

void fp8q_parallel_for(int64_t n_tasks, int n_threads, fp8q_task_fn task,
                       void *context)
{
    parallel_job job;
    fp8q_interrupt *owned;
    int64_t helpers = n_threads < 1 ? 0 : (int64_t)n_threads - 1;
    int index;

    if (n_tasks <= 0) {
        return;
    }
    job.next_task = 0;
    job.n_tasks = n_tasks;
    job.task = task;
    job.context = context;
    job.interrupt = polled_interrupt();
    if (helpers > n_tasks - 1) {
        helpers = n_tasks - 1;
    }

    static_lock_acquire(&pool.lock);
    if (helpers == 0 || pool.in_use) {
        static_lock_release(&pool.lock);
        run_tasks(&job);
        return;
    }
    pool.in_use = 1;
    /* Workers that cannot be started leave their share to the others. */
    while (pool.n_workers < helpers && start_worker()) {
        pool.n_workers++;
    }
    if (helpers > pool.n_workers) {
        helpers = pool.n_workers;
    }
    pool.job = &job;
    pool.open_slots = (int)helpers;
    (void)fp8q_atomic_fetch_add_i64(&jobs_posted, 1);
    for (index = 0; index < helpers; index++) {
        pool_signal(&pool.job_posted);
    }
    static_lock_release(&pool.lock);

    run_tasks(&job);

    owned = owned_interrupt();
    static_lock_acquire(&pool.lock);
    pool.open_slots = 0;
    while (pool.running_slots > 0) {
        if (owned == NULL || owned != job.interrupt) {
            pool_wait(&pool.slot_done, &pool.lock);
            continue;
        }
        /* The owner of an interrupt keeps checking while helpers run (its
         * check may take locks of its own: it runs without the pool's). */
        pool_wait_ms(&pool.slot_done, &pool.lock, FP8Q_INTERRUPT_CHECK_MS);
        if (pool.running_slots > 0 &&
            fp8q_atomic_load_i64(&owned->stopped) == 0) {
            static_lock_release(&pool.lock);
            (void)check_owned(owned);
            static_lock_acquire(&pool.lock);
        }
    }
    pool.job = NULL;
    pool.in_use = 0;
    static_lock_release(&pool.lock);
}

/* ------------------------------------------------------------------------- */
/* One-time initialisation                                                   */

/* The lock held while a once-function runs; it initialises statically, so
 * taking it needs no initialisation of its own. */
static static_lock once_lock = STATIC_LOCK_INIT;

void fp8q_once_run(fp8q_once *once, void (*function)(void *context),
                   void *context)
{
    if (fp8q_atomic_load_i64(&once->done) != 0) {
        return;
    }
    static_lock_acquire(&once_lock);
    /* Checked again under the lock: another thread may have run it while
     * this one waited. The store after the call publishes its results to
     * the lock-free fast path above (sequentially consistent atomics). */
    if (fp8q_atomic_load_i64(&once->done) == 0) {
        function(context);
        fp8q_atomic_store_i64(&once->done, 1);
    }
    static_lock_release(&once_lock);
}

/* ------------------------------------------------------------------------- */
/* Locks                                                                     */

struct fp8q_mutex {
    static_lock lock; /* taken as the static locks are */
#if !defined(_WIN32)
    fp8q_mutex *next; /* every mutex is listed, for the fork handlers */
#endif
};

#if !defined(_WIN32)
/* Every fp8q_mutex ever created, newest first; guarded by mutexes_lock. */
static fp8q_mutex *all_mutexes;
static static_lock mutexes_lock = STATIC_LOCK_INIT;
#endif

fp8q_mutex *fp8q_mutex_create(void)
{
    fp8q_mutex *mutex = (fp8q_mutex *)malloc(sizeof *mutex);
    if (mutex == NULL) {
        return NULL;
    }
#if defined(_WIN32)
    InitializeSRWLock(&mutex->lock);
#else
    if (pthread_mutex_init(&mutex->lock, NULL) != 0) {
        free(mutex);
        return NULL;
    }
    static_lock_acquire(&mutexes_lock);
    mutex->next = all_mutexes;
    all_mutexes = mutex;
    static_lock_release(&mutexes_lock);
#endif
    return mutex;
}

static void store_new_mutex(void *slot)
{
    *(fp8q_mutex **)slot = fp8q_mutex_create();
}

fp8q_mutex *fp8q_mutex_create_once(fp8q_once *once, fp8q_mutex **mutex)
{
    fp8q_once_run(once, store_new_mutex, mutex);
    return *mutex;
}

void fp8q_mutex_lock(fp8q_mutex *mutex)
{
    static_lock_acquire(&mutex->lock);
}

void fp8q_mutex_unlock(fp8q_mutex *mutex)
{
    static_lock_release(&mutex->lock);
}

/* ------------------------------------------------------------------------- */
/* A small cache of pointers                                                 */

/* The index of `key` among the first `count` keys of `table`, or -1. */
static int pointer_table_index(const fp8q_pointer_table *table, int count,
                               const void *key)
{
    int index;

    for (index = 0; index < count; index++) {
        if (table->keys[index] == key) {
            return index;
        }
    }
    return -1;
}

int fp8q_pointer_table_find(const fp8q_pointer_table *table,
                            const void *key, const void **value)
{
    const int index = pointer_table_index(
        table, (int)fp8q_atomic_load_i64(&table->count), key);

    *value = index >= 0 ? table->values[index] : NULL;
    return index >= 0;
}

int fp8q_pointer_table_add(fp8q_pointer_table *table, const void *key,
                           const void *value)
{
    int count, added = 0;

    if (fp8q_atomic_load_i64(&table->count) == FP8Q_POINTER_TABLE_SIZE ||
        fp8q_mutex_create_once(&table->lock_once, &table->lock) == NULL) {
        return 0; /* full (no lock taken then), or no memory for the lock */
    }
    fp8q_mutex_lock(table->lock);
    count = (int)fp8q_atomic_load_i64(&table->count);
    if (count < FP8Q_POINTER_TABLE_SIZE &&
        pointer_table_index(table, count, key) < 0) {
        table->keys[count] = key;
        table->values[count] = value;
        fp8q_atomic_store_i64(&table->count, count + 1);
        added = 1;
    }
    fp8q_mutex_unlock(table->lock);
    return added;
}

/* ------------------------------------------------------------------------- */
/* Fork                                                                      */

#if !defined(_WIN32)
/*
 * A child made by fork() has only the thread that forked. So that it never
 * inherits a lock that a thread it lacks was holding, nor a once-function
 * half run, fork() first takes every lock fp8q has (waiting for a running
 * once-function, a pool call's bookkeeping or a locked fp8q_mutex to end),
 * in the order code nests them: the once lock (a once-function may create
 * mutexes or run parallel loops), the mutex list, each fp8q_mutex (never
 * nested in one another), the pool's lock. Both processes then release them;
 * the child also forgets the parent's workers, which it does not have.
 */
static void lock_everything_before_fork(void)
{
    fp8q_mutex *mutex;

    static_lock_acquire(&once_lock);
    static_lock_acquire(&mutexes_lock);
    for (mutex = all_mutexes; mutex != NULL; mutex = mutex->next) {
        fp8q_mutex_lock(mutex);
    }
    static_lock_acquire(&pool.lock);
}

static void unlock_everything_after_fork(void)
{
    fp8q_mutex *mutex;

    static_lock_release(&pool.lock);
    for (mutex = all_mutexes; mutex != NULL; mutex = mutex->next) {
        fp8q_mutex_unlock(mutex);
    }
    static_lock_release(&mutexes_lock);
    static_lock_release(&once_lock);
}

static void forget_workers_in_child(void)
{
    /* Workers of the parent may have been waiting on the conditions. */
    (void)pthread_cond_init(&pool.job_posted, NULL);
    (void)pthread_cond_init(&pool.slot_done, NULL);
    pool.n_workers = 0;
    pool.in_use = 0;
    pool.job = NULL;
    pool.open_slots = 0;
    pool.running_slots = 0;
    unlock_everything_after_fork();
}

/* Runs when the library is loaded, before any of its locks can be used. */
__attribute__((constructor)) static void register_fork_handlers(void)
{
    (void)pthread_atfork(lock_everything_before_fork,
                         unlock_everything_after_fork,
                         forget_workers_in_child);
}
#endif

/* ------------------------------------------------------------------------- */
/* Environment and shared libraries                                          */

/* Copies `text` into `buffer` (size `size`), truncated and NUL-terminated. */
static void copy_text(char *buffer, size_t size, const char *text)
{
    if (size == 0) {
        return;
    }
    (void)snprintf(buffer, size, "%s", text);
}

#if defined(_WIN32)

/* `text` (UTF-8) as a new UTF-16 string (free it), or NULL. */
static wchar_t *utf8_to_wide(const char *text)
{
    wchar_t *wide;
    const int length = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS,
                                           text, -1, NULL, 0);
    if (length <= 0) {
        return NULL;
    }
    wide = (wchar_t *)malloc((size_t)length * sizeof *wide);
    if (wide == NULL) {
        return NULL;
    }
    if (MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, text, -1, wide,
                            length) != length) {
        free(wide);
        return NULL;
    }
    return wide;
}

/* The system's text for the error code `code`, with the code, in `buffer`
 * (UTF-8: the wide text is converted, since the ANSI code page's bytes
 * would not be valid UTF-8 in a Python exception message). */
static void describe_windows_error(DWORD code, char *buffer, size_t size)
{
    wchar_t wide[256];
    char message[768];
    DWORD length = FormatMessageW(
        FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL,
        code, MAKELANGID(LANG_ENGLISH, SUBLANG_DEFAULT), wide,
        (DWORD)(sizeof wide / sizeof wide[0]), NULL);
    if (length == 0) {
        length = FormatMessageW(
            FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL,
            code, 0, wide, (DWORD)(sizeof wide / sizeof wide[0]), NULL);
    }
    /* The system's text ends with ".\r\n": keep the sentence only. */
    while (length > 0 && (wide[length - 1] == L'\n' ||
                          wide[length - 1] == L'\r' ||
                          wide[length - 1] == L'.' ||
                          wide[length - 1] == L' ')) {
        length--;
    }
    message[0] = '\0';
    if (length > 0) {
        const int written =
            WideCharToMultiByte(CP_UTF8, 0, wide, (int)length, message,
                                (int)sizeof message - 1, NULL, NULL);
        message[written > 0 ? written : 0] = '\0';
    }
    if (size > 0) {
        (void)snprintf(buffer, size, "%s (Windows error %u)",
                       message[0] != '\0' ? message : "unknown error",
                       (unsigned)code);
    }
}

int fp8q_getenv_utf8(const char *name, char *value, size_t value_size)
{
    wchar_t wide_value[4096];
    wchar_t *wide_name = utf8_to_wide(name);
    DWORD length;
    int written;

    copy_text(value, value_size, "");
    if (wide_name == NULL) {
        return -1;
    }
    length = GetEnvironmentVariableW(
        wide_name, wide_value, (DWORD)(sizeof wide_value / sizeof wide_value[0]));
    free(wide_name);
    if (length == 0) {
        return 0;
    }
    if (length >= sizeof wide_value / sizeof wide_value[0] ||
        value_size == 0 || value_size > 0x7fffffff) {
        return -1;
    }
    /* WC_ERR_INVALID_CHARS: a lone surrogate fails rather than becoming
     * U+FFFD (a different path). */
    written = WideCharToMultiByte(CP_UTF8, WC_ERR_INVALID_CHARS, wide_value,
                                  -1, value, (int)value_size, NULL, NULL);
    if (written <= 0) {
        copy_text(value, value_size, "");
        return -1;
    }
    return 1;
}

/* The path `wide` (with / or \\ in it) as a new absolute path with
 * backslashes (free it), which LoadLibraryExW needs for
 * LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR; NULL with the error in `error_text`. */
static wchar_t *absolute_path(wchar_t *wide, char *error_text,
                              size_t error_size)
{
    wchar_t *cursor;
    wchar_t *absolute;
    DWORD length;

    for (cursor = wide; *cursor != L'\0'; cursor++) {
        if (*cursor == L'/') {
            *cursor = L'\\';
        }
    }
    length = GetFullPathNameW(wide, 0, NULL, NULL);
    absolute = length > 0 ? (wchar_t *)malloc(length * sizeof *absolute)
                          : NULL;
    if (absolute == NULL ||
        GetFullPathNameW(wide, length, absolute, NULL) >= length) {
        describe_windows_error(length > 0 && absolute == NULL
                                   ? ERROR_NOT_ENOUGH_MEMORY
                                   : GetLastError(),
                               error_text, error_size);
        free(absolute);
        return NULL;
    }
    return absolute;
}

fp8q_library *fp8q_library_open(const char *path_or_name, int system_only,
                                char *error_text, size_t error_size)
{
    HMODULE module = NULL;
    wchar_t *wide = utf8_to_wide(path_or_name);

    if (wide == NULL) {
        copy_text(error_text, error_size,
                  "the name is not valid UTF-8 (or out of memory)");
        return NULL;
    }
    if (system_only) {
        module = LoadLibraryExW(wide, NULL, LOAD_LIBRARY_SEARCH_SYSTEM32);
    }
    else if (wcspbrk(wide, L"/\\") == NULL) {
        /* A bare name: never the working directory nor PATH. */
        module = LoadLibraryExW(wide, NULL, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS);
    }
    else {
        /* A path: the DLLs it depends on are looked for beside it first. */
        wchar_t *absolute = absolute_path(wide, error_text, error_size);
        if (absolute == NULL) {
            free(wide);
            return NULL;
        }
        module = LoadLibraryExW(absolute, NULL,
                                LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR |
                                    LOAD_LIBRARY_SEARCH_DEFAULT_DIRS);
        free(absolute);
    }
    free(wide);
    if (module == NULL) {
        describe_windows_error(GetLastError(), error_text, error_size);
        return NULL;
    }
    return (fp8q_library *)module;
}

int fp8q_library_is_loaded(const char *name, fp8q_library **library)
{
    HMODULE module = NULL;
    wchar_t *wide = utf8_to_wide(name);
    /* Without ..._UNCHANGED_REFCOUNT the handle holds a new reference. */
    const DWORD flags = library != NULL
                            ? 0
                            : GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT;

    if (library != NULL) {
        *library = NULL;
    }
    if (wide == NULL) {
        return 0;
    }
    if (!GetModuleHandleExW(flags, wide, &module)) {
        module = NULL;
    }
    free(wide);
    if (module == NULL) {
        return 0;
    }
    if (library != NULL) {
        *library = (fp8q_library *)module;
    }
    return 1;
}

void *fp8q_library_symbol(fp8q_library *library, const char *name)
{
    /* FARPROC -> void *: the same size on every Windows target. */
    FARPROC address = GetProcAddress((HMODULE)library, name);
    void *pointer;
    memcpy(&pointer, &address, sizeof pointer);
    return pointer;
}

int fp8q_library_path(fp8q_library *library, char *path, size_t path_size)
{
    wchar_t wide[4096];
    const DWORD length = GetModuleFileNameW(
        (HMODULE)library, wide, (DWORD)(sizeof wide / sizeof wide[0]));
    int written;

    copy_text(path, path_size, "");
    if (length == 0 || length >= sizeof wide / sizeof wide[0] ||
        path_size == 0 || path_size > 0x7fffffff) {
        return -1;
    }
    written = WideCharToMultiByte(CP_UTF8, 0, wide, -1, path, (int)path_size,
                                  NULL, NULL);
    if (written <= 0) {
        path[0] = '\0';
        return -1;
    }
    return 0;
}

void fp8q_library_close(fp8q_library *library)
{
    if (library != NULL) {
        FreeLibrary((HMODULE)library);
    }
}

#else

int fp8q_getenv_utf8(const char *name, char *value, size_t value_size)
{
    const char *text = getenv(name);

    copy_text(value, value_size, "");
    if (text == NULL || text[0] == '\0') {
        return 0;
    }
    if (strlen(text) >= value_size) {
        return -1;
    }
    copy_text(value, value_size, text);
    return 1;
}

fp8q_library *fp8q_library_open(const char *path_or_name, int system_only,
                                char *error_text, size_t error_size)
{
    void *handle;

    (void)system_only;
    handle = dlopen(path_or_name, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *reason = dlerror();
        copy_text(error_text, error_size,
                  reason != NULL ? reason : "dlopen failed");
        return NULL;
    }
    return (fp8q_library *)handle;
}

int fp8q_library_is_loaded(const char *name, fp8q_library **library)
{
    void *handle = NULL;

    if (library != NULL) {
        *library = NULL;
    }
#if defined(RTLD_NOLOAD)
    handle = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
#else
    (void)name;
#endif
    if (handle == NULL) {
        return 0;
    }
    if (library != NULL) {
        *library = (fp8q_library *)handle;
    }
    else {
        dlclose(handle);
    }
    return 1;
}

void *fp8q_library_symbol(fp8q_library *library, const char *name)
{
    return dlsym((void *)library, name);
}

int fp8q_library_path(fp8q_library *library, char *path, size_t path_size)
{
#if defined(__linux__)
    struct link_map *map = NULL;

    if (dlinfo((void *)library, RTLD_DI_LINKMAP, &map) == 0 && map != NULL &&
        map->l_name != NULL && map->l_name[0] != '\0') {
        copy_text(path, path_size, map->l_name);
        return 0;
    }
#else
    (void)library;
#endif
    copy_text(path, path_size, "");
    return -1;
}

void fp8q_library_close(fp8q_library *library)
{
    if (library != NULL) {
        dlclose((void *)library);
    }
}

#endif

/* ------------------------------------------------------------------------- */
/* Files                                                                     */

/* `path` (UTF-8) opened for binary reading, or NULL with the C library's
 * text for the error in `error_text`. Windows: _wfopen_s (the narrow fopen
 * would take the ANSI code page; MSVC deprecates _wfopen and strerror). */
static FILE *open_for_reading(const char *path, char *error_text,
                              size_t error_size)
{
#if defined(_WIN32)
    FILE *file = NULL;
    wchar_t *wide = utf8_to_wide(path);
    errno_t error_number = EINVAL;
    if (wide != NULL) {
        error_number = _wfopen_s(&file, wide, L"rb");
        free(wide);
    }
    if (error_number != 0 || file == NULL) {
        if (error_size > 0 &&
            strerror_s(error_text, error_size, error_number) != 0) {
            copy_text(error_text, error_size, "cannot open it");
        }
        return NULL;
    }
    return file;
#else
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        copy_text(error_text, error_size, strerror(errno));
    }
    return file;
#endif
}

int fp8q_file_read(const char *path, unsigned char **data, size_t *size,
                   char *error_text, size_t error_size)
{
    FILE *file;
    long length;
    unsigned char *buffer;

    *data = NULL;
    *size = 0;
    file = open_for_reading(path, error_text, error_size);
    if (file == NULL) {
        return -1;
    }
    if (fseek(file, 0, SEEK_END) != 0 || (length = ftell(file)) < 0 ||
        fseek(file, 0, SEEK_SET) != 0) {
        copy_text(error_text, error_size, "cannot tell its size");
        (void)fclose(file);
        return -1;
    }
    buffer = (unsigned char *)fp8q_aligned_alloc((size_t)length);
    if (buffer == NULL) {
        copy_text(error_text, error_size, "out of memory");
        (void)fclose(file);
        return -1;
    }
    if (fread(buffer, 1, (size_t)length, file) != (size_t)length) {
        copy_text(error_text, error_size, "read error");
        fp8q_aligned_free(buffer);
        (void)fclose(file);
        return -1;
    }
    (void)fclose(file);
    *data = buffer;
    *size = (size_t)length;
    return 0;
}
