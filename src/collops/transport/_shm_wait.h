/* What both compiled pieces of the shared-memory transport (_direct.c, _stream.c) need to
 * share words with other processes: acquire loads and release stores of the 64-bit words of
 * the job segment, the CPU's spin-wait hint, and a monotonic clock in seconds. */
#ifndef COLLOPS_SHM_WAIT_H
#define COLLOPS_SHM_WAIT_H

#include <stdint.h>
#include <time.h>

/* Word `index` of the segment mapped at `base`. */
static inline uint64_t *shm_word(char *base, int64_t index) {
    return (uint64_t *)(base + 8 * index);
}

static inline uint64_t shm_load(char *base, int64_t index) {
    return __atomic_load_n(shm_word(base, index), __ATOMIC_ACQUIRE);
}

static inline uint64_t shm_load_relaxed(char *base, int64_t index) {
    return __atomic_load_n(shm_word(base, index), __ATOMIC_RELAXED);
}

static inline void shm_store(char *base, int64_t index, uint64_t value) {
    __atomic_store_n(shm_word(base, index), value, __ATOMIC_RELEASE);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
