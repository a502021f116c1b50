/*
 * platform.h - the only OS- and compiler-specific interface in fp8q.
 *
 * Everything outside csrc/platform.{h,c} is the C11 subset that gcc, clang and
 * MSVC (/std:c11) all compile. What differs between them (inline and restrict
 * spellings, aligned allocation, threads, processor features, atomics,
 * one-time initialisation, locks and the small pointer cache built on them,
 * loading shared libraries at run time) is hidden
 * behind the macros and functions below. This header includes no OS
 * header, so it is safe to include from anywhere, .cu files included.
 */
#ifndef FP8Q_PLATFORM_H
#define FP8Q_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------- */
/* Compiler spellings                                                        */

#if defined(_MSC_VER) && !defined(__clang__)
#define FP8Q_RESTRICT __restrict
#define FP8Q_FORCE_INLINE static __forceinline
#elif defined(__GNUC__)
#define FP8Q_RESTRICT restrict
#define FP8Q_FORCE_INLINE static inline __attribute__((always_inline))
#else
#define FP8Q_RESTRICT restrict
#define FP8Q_FORCE_INLINE static inline
#endif

#define FP8Q_INLINE static inline

/* Before a loop whose narrowest elements are bytes (the FP8 encode): asks
 * clang to vectorise it 32 lanes wide, a full AVX2 register of bytes, which
 * gcc chooses by itself from the narrowest type; clang's cost model takes 8
 * lanes of the widest type (the float32 inputs) and packs every 8 codes on
 * their own, which made the AVX2 float32 -> e4m3fn loop twice as slow as
 * gcc's (16 ms against 8 on 16M elements, docs/benchmarks.md). Nothing
 * with other compilers. */
#if defined(__clang__)
#define FP8Q_VECTORIZE_BYTES _Pragma("clang loop vectorize_width(32)")
#else
#define FP8Q_VECTORIZE_BYTES
#endif

/* ------------------------------------------------------------------------- */
/* Memory                                                                    */

/* The alignment of every buffer fp8q allocates (a cache line, and enough for
 * any vector load). */
#define FP8Q_ALIGNMENT 64

/* Allocates `size` bytes aligned to FP8Q_ALIGNMENT; NULL on failure. A zero
 * size allocates a valid, unique, minimal block. Free with fp8q_aligned_free. */
void *fp8q_aligned_alloc(size_t size);
void fp8q_aligned_free(void *pointer);

/* ------------------------------------------------------------------------- */
/* Threads                                                                   */

/* Number of logical processors available to this process (at least 1). */
int fp8q_cpu_count(void);

/* A unit of parallel work: called once for every task index. */
typedef void (*fp8q_task_fn)(void *context, int64_t task_index);

/*
 * Runs task(context, i) for every i in [0, n_tasks), spread over at most
 * n_threads threads (the calling thread is one of them), and returns when all
 * tasks have finished. Tasks are handed out dynamically, so they may take
 * different times. The other threads come from a pool started on first need
 * and kept for the life of the process. One call uses the pool at a time: a
 * call made while it is busy (from another thread, or from inside a task)
 * runs its tasks on the calling thread alone, as does any call when worker
 * threads cannot be created: this function never fails.
 */
void fp8q_parallel_for(int64_t n_tasks, int n_threads, fp8q_task_fn task,
                       void *context);

/* ------------------------------------------------------------------------- */
/* Processor features                                                        */

/* The x86 instruction-set extensions that fp8q has code for. */
typedef enum fp8q_cpu_feature {
    FP8Q_CPU_AVX2, /* 256-bit integer and float vectors (AVX2, with AVX) */
    FP8Q_CPU_FMA,  /* fused multiply-add (FMA3) */
    FP8Q_CPU_F16C  /* float16 <-> float32 vector conversions */
} fp8q_cpu_feature;

#define FP8Q_CPU_FEATURE_COUNT 3

/* Whether this process can run a feature's instructions, or why not. */
typedef enum fp8q_cpu_support {
    FP8Q_CPU_SUPPORTED,      /* the processor reports it and the OS has
                                enabled the AVX registers */
    FP8Q_CPU_NOT_X86,        /* fp8q was built for another processor
                                family, so it has no code for it */
    FP8Q_CPU_NOT_REPORTED,   /* CPUID reports no such feature (or no AVX,
                                which all three need) */
    FP8Q_CPU_NO_OS_AVX_STATE /* the processor has it, but the OS does not
                                save the AVX registers (CPUID's OSXSAVE is
                                0, or XGETBV's XCR0 lacks the SSE and AVX
                                state bits) */
} fp8q_cpu_support;

/*
 * Whether `feature` can run here, read once per process from the CPUID and
 * XGETBV instructions themselves, with the same code for every compiler
 * (never a compiler runtime's __builtin_cpu_supports, which zig's runtime
 * answers with "no feature").
 */
fp8q_cpu_support fp8q_cpu_support_of(fp8q_cpu_feature feature);

/* The feature's usual name: "AVX2", "FMA" or "F16C". */
const char *fp8q_cpu_feature_name(fp8q_cpu_feature feature);

/* `support` in words: "supported", "not built (non-x86)", "not reported by
 * the CPU" or "the OS has not enabled AVX state". */
const char *fp8q_cpu_support_text(fp8q_cpu_support support);

/* Nonzero when AVX2 and F16C are both supported (every processor with AVX2
 * has F16C). Core code compiled for AVX2 (with F16C) runs only when this
 * says so. */
int fp8q_cpu_has_avx2(void);

/* Nonzero when fp8q_cpu_has_avx2() and FMA is supported as well. Core code
 * compiled for AVX2 + FMA runs only when this says so. */
int fp8q_cpu_has_avx2_fma(void);

/* ------------------------------------------------------------------------- */
/* Atomics (sequentially consistent)                                         */

int64_t fp8q_atomic_load_i64(const volatile int64_t *address);
void fp8q_atomic_store_i64(volatile int64_t *address, int64_t value);
/* Adds `delta` and returns the value before the addition. */
int64_t fp8q_atomic_fetch_add_i64(volatile int64_t *address, int64_t delta);

/* ------------------------------------------------------------------------- */
/* Interrupting long loops                                                   */

/*
 * A thread that starts a long operation may install an interrupt: a check
 * that only this thread calls (the owner's; e.g. one that looks for a
 * pending Ctrl-C), from fp8q_interrupt_poll, at most every
 * FP8Q_INTERRUPT_CHECK_MS milliseconds. Once a check returns nonzero the
 * interrupt is stopped for good, and fp8q_interrupt_poll returns nonzero on
 * every thread working for the operation: fp8q_parallel_for runs its
 * helpers' tasks under the caller's interrupt, and the caller keeps checking
 * while it waits for them. Loops that poll return early; what they leave in
 * their outputs is unspecified, so the owner discards it. Interrupts nest
 * (an inner one hides the outer one until it ends). Without an interrupt,
 * polling costs one thread-local read.
 */
typedef int (*fp8q_interrupt_check_fn)(void *context);

typedef struct fp8q_interrupt {
    fp8q_interrupt_check_fn check;
    void *context;
    volatile int64_t stopped;        /* set once, read by every thread */
    int64_t next_check_ns;           /* the owner's; fp8q_monotonic_ns */
    struct fp8q_interrupt *previous; /* the one it hides on its thread */
} fp8q_interrupt;

#define FP8Q_INTERRUPT_CHECK_MS 50

/* Installs `interrupt` on the calling thread (its owner): its first check
 * comes FP8Q_INTERRUPT_CHECK_MS after this call. */
void fp8q_interrupt_begin(fp8q_interrupt *interrupt,
                          fp8q_interrupt_check_fn check, void *context);
/* Removes it from the calling thread (restoring the one it hid); returns
 * whether it was stopped. */
int fp8q_interrupt_end(fp8q_interrupt *interrupt);
/* For loops, after `n_elements` more elements of work: nonzero when the
 * operation this thread works for was stopped (the caller returns early).
 * On the owner, checks when at least 2**20 elements were polled since the
 * last look at the clock and the check is due. */
int fp8q_interrupt_poll(int64_t n_elements);

/* A monotonic clock in nanoseconds (an arbitrary origin). */
int64_t fp8q_monotonic_ns(void);

/* ------------------------------------------------------------------------- */
/* One-time initialisation                                                   */

/* A flag for fp8q_once_run; define it static, initialised to FP8Q_ONCE_INIT. */
typedef struct fp8q_once {
    volatile int64_t done;
} fp8q_once;

#define FP8Q_ONCE_INIT {0}

/*
 * Runs function(context) exactly once per flag, however many threads call
 * this at the same time: the first caller runs it, the others wait until it
 * has returned; every call returns only after it has run. Later calls return
 * at once (one atomic load). Different flags share one process-wide lock
 * while their function runs, so `function` must not call fp8q_once_run with
 * a flag that has not completed (it would wait for itself), nor fork().
 *
 * fork() (POSIX) waits while a once-function runs, an fp8q_mutex is held or
 * the pool's bookkeeping is busy, so a child process never inherits a lock
 * held by a thread it lacks nor a half-run once-function: every flag, mutex
 * and fp8q_parallel_for (with a fresh, empty pool) works in the child.
 */
void fp8q_once_run(fp8q_once *once, void (*function)(void *context),
                   void *context);

/* ------------------------------------------------------------------------- */
/* Locks                                                                     */

/* A mutual-exclusion lock (a pthread mutex or an SRWLOCK), for state that
 * lives as long as the process: there is no destroy. Never hold two at once
 * (fork() takes them all, in one order), nor one while calling
 * fp8q_once_run on a flag that may not have completed. */
typedef struct fp8q_mutex fp8q_mutex;

/* A new unlocked mutex, or NULL when memory runs out. */
fp8q_mutex *fp8q_mutex_create(void);

/* A mutex made at its first use: *mutex = fp8q_mutex_create() run once per
 * `once` (fp8q_once_run, so never while holding a mutex), then *mutex, which
 * is NULL for good when memory ran out at that first call. */
fp8q_mutex *fp8q_mutex_create_once(fp8q_once *once, fp8q_mutex **mutex);

void fp8q_mutex_lock(fp8q_mutex *mutex);
void fp8q_mutex_unlock(fp8q_mutex *mutex);

/* ------------------------------------------------------------------------- */
/* A small cache of pointers                                                 */

/* A table from pointers to pointers that only grows, for a per-process
 * cache of up to FP8Q_POINTER_TABLE_SIZE entries (later ones are not kept):
 * define it static, initialised to FP8Q_POINTER_TABLE_INIT. Lookups take no
 * lock (an entry is complete before the count includes it, and is never
 * written again); additions take a mutex made at the first one, so two
 * threads never fill one slot. Keys are compared, never dereferenced: the
 * object behind a key must live as long as the table, so that its address
 * never comes to mean another object. */
#define FP8Q_POINTER_TABLE_SIZE 8

typedef struct fp8q_pointer_table {
    const void *keys[FP8Q_POINTER_TABLE_SIZE];
    const void *values[FP8Q_POINTER_TABLE_SIZE];
    volatile int64_t count;
    fp8q_once lock_once;
    fp8q_mutex *lock;
} fp8q_pointer_table;

#define FP8Q_POINTER_TABLE_INIT {{NULL}, {NULL}, 0, FP8Q_ONCE_INIT, NULL}

/* 1 and *value (which may be NULL) when `key` is in `table`; 0 and *value
 * NULL when it is not. */
int fp8q_pointer_table_find(const fp8q_pointer_table *table,
                            const void *key, const void **value);

/* Adds key -> value: 1 when this call added it; 0 when `key` was there
 * already, the table is full, or there was no memory for its lock. */
int fp8q_pointer_table_add(fp8q_pointer_table *table, const void *key,
                           const void *value);

/* ------------------------------------------------------------------------- */
/* Environment                                                               */

/*
 * Reads the environment variable `name` as UTF-8 (on Windows from the
 * UTF-16 environment, so paths with any characters survive). Returns 1 with
 * the value in `value` (NUL-terminated), 0 when the variable is not set or
 * empty (`value` is then ""), -1 when the value needs more than `value_size`
 * bytes or cannot be converted (`value` is then "").
 */
int fp8q_getenv_utf8(const char *name, char *value, size_t value_size);

/* ------------------------------------------------------------------------- */
/* Shared libraries loaded at run time                                       */

/* An open shared library (a dlopen handle or an HMODULE). */
typedef struct fp8q_library fp8q_library;

/*
 * Opens the shared library `path_or_name` (UTF-8): a path, or a bare file
 * name that the system's loader searches for. POSIX: dlopen with RTLD_NOW |
 * RTLD_LOCAL (the default search: LD_LIBRARY_PATH, the ld.so cache, ...).
 * Windows: LoadLibraryExW, never searching the working directory or PATH,
 * so a DLL planted there is never picked up:
 *   - `system_only` nonzero: System32 alone (LOAD_LIBRARY_SEARCH_SYSTEM32);
 *   - a bare name: the application's folder, System32 and the folders added
 *     by AddDllDirectory (Python's os.add_dll_directory)
 *     (LOAD_LIBRARY_SEARCH_DEFAULT_DIRS);
 *   - a path (with / or \, which are the same here; a relative one is taken
 *     from the working directory): made absolute with backslashes, and the
 *     DLLs it depends on are looked for in its folder, then as for a bare
 *     name (LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR | ..._DEFAULT_DIRS).
 * POSIX ignores `system_only`. Returns the library, or NULL with the
 * loader's reason (dlerror, or the Windows error text and code) written into
 * `error_text` (always NUL-terminated, truncated to `error_size` bytes).
 * Close with fp8q_library_close.
 */
fp8q_library *fp8q_library_open(const char *path_or_name, int system_only,
                                char *error_text, size_t error_size);

/*
 * Nonzero when a library named `name` (UTF-8; a bare file name such as
 * "libcublasLt.so.13" or "cublasLt64_13.dll", or a path) is already loaded in
 * this process; never loads it (dlopen RTLD_NOLOAD / GetModuleHandleExW).
 * When it is, and `library` is not NULL, *library receives a new reference
 * to it (close it with fp8q_library_close); otherwise *library is NULL.
 */
int fp8q_library_is_loaded(const char *name, fp8q_library **library);

/* The address of the exported symbol `name` in `library`, or NULL when it
 * does not export it. Cast it to the function pointer type it has. */
void *fp8q_library_symbol(fp8q_library *library, const char *name);

/* Writes the path of the file `library` was loaded from (UTF-8) into `path`
 * (always NUL-terminated, truncated to `path_size` bytes); returns 0, or -1
 * when the system cannot tell (`path` is then ""). */
int fp8q_library_path(fp8q_library *library, char *path, size_t path_size);

/* Releases one reference to `library` (NULL is allowed); the library is
 * unloaded when no reference is left. */
void fp8q_library_close(fp8q_library *library);

/* ------------------------------------------------------------------------- */
/* Files                                                                     */

/*
 * Reads the whole file at `path` (UTF-8; on Windows opened through its
 * UTF-16 form, so any characters work) into a new FP8Q_ALIGNMENT-aligned
 * block: 0 with *data (free it with fp8q_aligned_free) and *size, or -1
 * with *data NULL and the reason (the C library's text for errno, e.g. "No
 * such file or directory") in `error_text`, truncated to `error_size`.
 */
int fp8q_file_read(const char *path, unsigned char **data, size_t *size,
                   char *error_text, size_t error_size);

#endif /* FP8Q_PLATFORM_H */
