/*
 * platform.c - the only OS-specific code in fp8q: aligned allocation, the
 * processor count, a fork-join parallel loop, 64-bit atomics, one-time
 * initialisation and shared libraries opened at run time.
 *
 * POSIX builds use posix_memalign, sysconf/sched_getaffinity, pthreads, the
 * GCC/clang __atomic builtins and dlopen; Windows builds use _aligned_malloc,
 * GetActiveProcessorCount, _beginthreadex, the Interlocked* functions, SRW
 * locks and LoadLibraryExW.
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    /* F16C */
    if ((registers[2] & (1 << 29)) == 0) {
        return 0;
    }
    __cpuidex(registers, 7, 0);
    return (registers[1] & (1 << 5)) != 0;
}

int fp8q_cpu_has_avx2_fma(void)
{
    int registers[4];
    if (!fp8q_cpu_has_avx2()) {
        return 0;
    }
    __cpuid(registers, 1);
    return (registers[2] & (1 << 12)) != 0;
}

#elif defined(__x86_64__) || defined(__i386__)

#include <cpuid.h> /* __get_cpuid */

int fp8q_cpu_has_avx2(void)
{
    unsigned int eax, ebx, ecx, edx;
    /* libgcc / compiler-rt check the OS support (XGETBV) as well; clang
     * names no "f16c" feature, so its bit (CPUID leaf 1, ECX bit 29) is
     * read directly. */
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0 &&
           __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
           (ecx & (1u << 29)) != 0;
}

int fp8q_cpu_has_avx2_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0 &&
           __builtin_cpu_supports("fma") != 0;
}

#else

int fp8q_cpu_has_avx2(void)
{
    return 0;
}

int fp8q_cpu_has_avx2_fma(void)
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

/* ------------------------------------------------------------------------- */
/* One-time initialisation                                                   */

/* The lock held while a once-function runs. Both kinds initialise
 * statically, so taking it needs no initialisation of its own. */
#if defined(_WIN32)
static SRWLOCK once_lock = SRWLOCK_INIT;
#define ONCE_LOCK() AcquireSRWLockExclusive(&once_lock)
#define ONCE_UNLOCK() ReleaseSRWLockExclusive(&once_lock)
#else
static pthread_mutex_t once_lock = PTHREAD_MUTEX_INITIALIZER;
#define ONCE_LOCK() pthread_mutex_lock(&once_lock)
#define ONCE_UNLOCK() pthread_mutex_unlock(&once_lock)
#endif

void fp8q_once_run(fp8q_once *once, void (*function)(void *context),
                   void *context)
{
    if (fp8q_atomic_load_i64(&once->done) != 0) {
        return;
    }
    ONCE_LOCK();
    /* Checked again under the lock: another thread may have run it while
     * this one waited. The store after the call publishes its results to
     * the lock-free fast path above (sequentially consistent atomics). */
    if (fp8q_atomic_load_i64(&once->done) == 0) {
        function(context);
        fp8q_atomic_store_i64(&once->done, 1);
    }
    ONCE_UNLOCK();
}

/* ------------------------------------------------------------------------- */
/* Locks                                                                     */

struct fp8q_mutex {
#if defined(_WIN32)
    SRWLOCK lock;
#else
    pthread_mutex_t lock;
#endif
};

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
#endif
    return mutex;
}

void fp8q_mutex_lock(fp8q_mutex *mutex)
{
#if defined(_WIN32)
    AcquireSRWLockExclusive(&mutex->lock);
#else
    (void)pthread_mutex_lock(&mutex->lock);
#endif
}

void fp8q_mutex_unlock(fp8q_mutex *mutex)
{
#if defined(_WIN32)
    ReleaseSRWLockExclusive(&mutex->lock);
#else
    (void)pthread_mutex_unlock(&mutex->lock);
#endif
}

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

fp8q_library *fp8q_library_open(const char *path_or_name, int system_only,
                                char *error_text, size_t error_size)
{
    HMODULE module;
    wchar_t *wide = utf8_to_wide(path_or_name);

    if (wide == NULL) {
        copy_text(error_text, error_size,
                  "the name is not valid UTF-8 (or out of memory)");
        return NULL;
    }
    module = LoadLibraryExW(wide, NULL,
                            system_only ? LOAD_LIBRARY_SEARCH_SYSTEM32 : 0);
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
