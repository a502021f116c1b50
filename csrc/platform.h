/*
 * platform.h - the only OS- and compiler-specific interface in fp8q.
 *
 * Everything outside csrc/platform.{h,c} is the C11 subset that gcc, clang and
 * MSVC (/std:c11) all compile. What differs between them (inline and restrict
 * spellings, aligned allocation, threads, atomics, thread-local storage) is
 * hidden behind the macros and functions below. This header includes no OS
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
 * different times. If worker threads cannot be created the remaining tasks run
 * on the calling thread: this function never fails.
 */
void fp8q_parallel_for(int64_t n_tasks, int n_threads, fp8q_task_fn task,
                       void *context);

/* ------------------------------------------------------------------------- */
/* Processor features                                                        */

/* Nonzero when the processor and the OS support AVX2 (x86 only; 0 on other
 * processors). Core code compiled for AVX2 runs only when this says so. */
int fp8q_cpu_has_avx2(void);

/* ------------------------------------------------------------------------- */
/* Atomics (sequentially consistent)                                         */

int64_t fp8q_atomic_load_i64(const volatile int64_t *address);
void fp8q_atomic_store_i64(volatile int64_t *address, int64_t value);
/* Adds `delta` and returns the value before the addition. */
int64_t fp8q_atomic_fetch_add_i64(volatile int64_t *address, int64_t delta);

#endif /* FP8Q_PLATFORM_H */
