/* What both compiled pieces of the shared-memory transport (_direct*.c, _stream.c) need to
 * share words with other processes: acquire loads and release stores of the 64-bit words of
 * the job segment, the CPU's spin-wait hint, a monotonic clock in seconds, the compiled
 * stages of the one wait (`shm_spin_over`, `shm_wait_until`; include Python.h first), a memcpy that
 * avoids the copy's slow case (`copy_bytes`) and one that bypasses the cache
 * (`copy_streaming`). */
#ifndef COLLOPS_SHM_WAIT_H
#define COLLOPS_SHM_WAIT_H

#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

/* The spin stage of the one wait (`collops.shm.waiting`), for loops that poll: call after
 * each round that found nothing; 1 once such rounds have gone on for `spin` seconds (the
 * clock is read every 32 rounds). Start with `shm_spin s = {0.0, 0}` and reset it the same
 * way when something moves. */
typedef struct {
    double stop;
    unsigned idle;
} shm_spin;

static inline int shm_spin_over(shm_spin *s, double spin) {
    if (spin <= 0.0)
        return 1;  /* no spin (a peer waited for shares this core): yield at once */
    cpu_relax();
    if ((++s->idle & 31) != 0)
        return 0;
    double t = now();
    if (s->stop == 0.0)
        s->stop = t + spin;
    return t >= s->stop;
}

/* The compiled stages of the one wait: poll `ready(ctx)` for `spin` seconds, then with
 * sched_yield between polls for `yield_seconds`, the GIL released (so `ready` may read
 * shared words only, never Python objects): a peer waiting for this core gets it at once.
 * 1 once ready; 0 if not by then (Python goes on with the sleep stage, `Ladder.wait`). */
static inline int shm_wait_until(int (*ready)(void *), void *ctx, double spin,
                                 double yield_seconds) {
    shm_spin s = {0.0, 0};
    while (!ready(ctx))
        if (shm_spin_over(&s, spin))
            goto yield;
    return 1;
yield:
    if (yield_seconds <= 0.0)
        return 0;
    int arrived = 0;
    Py_BEGIN_ALLOW_THREADS
    double until = now() + yield_seconds;
    while (!(arrived = ready(ctx)) && now() <= until)
        sched_yield();
    Py_END_ALLOW_THREADS
    return arrived;
}

/* Distances (destination - source, modulo 4 KiB) at which a copy is aliased. */
#define COPY_ALIAS_BYTES 64
/* Bytes below which an aliased copy costs too little to matter: memcpy's own. */
#define COPY_ALIAS_FROM 2048
/* Bytes from which glibc no longer copies with `rep movsb`, so the aliased case costs nothing
 * (docs/performance.md, "4 KiB aliasing"). */
#define COPY_WHOLE_FROM (1024 * 1024)

/* Whether a copy of `n` bytes from `src` to `dst` is in the 4 KiB-aliasing slow case (see
 * `copy_bytes`), for glibc's memcpy and the kernel's copy alike (`kernel.aliased` in
 * Python). */
static inline int aliased(uintptr_t dst, uintptr_t src, size_t n) {
    uintptr_t delta = (dst - src) & 4095;
    return n > COPY_ALIAS_FROM && delta != 0 && delta < COPY_ALIAS_BYTES;
}

#if defined(__SSE2__)
/* One 64-byte line in four 16-byte registers: the unit of the vector copies below, written
 * out because gcc -O2 does not unroll a loop over the four (half the speed). */
typedef struct {
    __m128i q[4];
} line_t;

static inline line_t load_line(const char *s) {
    line_t l = {{_mm_loadu_si128((const __m128i *)s), _mm_loadu_si128((const __m128i *)(s + 16)),
                 _mm_loadu_si128((const __m128i *)(s + 32)),
                 _mm_loadu_si128((const __m128i *)(s + 48))}};
    return l;
}

static inline void store_line(char *d, line_t l) {
    _mm_storeu_si128((__m128i *)d, l.q[0]);
    _mm_storeu_si128((__m128i *)(d + 16), l.q[1]);
    _mm_storeu_si128((__m128i *)(d + 32), l.q[2]);
    _mm_storeu_si128((__m128i *)(d + 48), l.q[3]);
}

/* A non-temporal store: `d` 16-byte aligned; weakly ordered (an sfence after the last). */
static inline void stream_line(char *d, line_t l) {
    _mm_stream_si128((__m128i *)d, l.q[0]);
    _mm_stream_si128((__m128i *)(d + 16), l.q[1]);
    _mm_stream_si128((__m128i *)(d + 32), l.q[2]);
    _mm_stream_si128((__m128i *)(d + 48), l.q[3]);
}
#endif

/* memcpy, around its slow case: `rep movsb`/`rep movsq` run an order of magnitude slower when
 * the destination sits 1-63 bytes past the source modulo 4 KiB (4 KiB aliasing), which is
 * the common case (numpy's large arrays start 16 bytes into a page, the segment's chunks at
 * one). Such copies go through 16-byte vector loads and stores (SSE2, in every x86-64);
 * others through memcpy in 2 KiB pieces. Figures: docs/performance.md, "4 KiB aliasing",
 * and `benchmarks/copy_rates.c`. */
static inline void copy_bytes(void *dst, const void *src, size_t n) {
    if (n >= COPY_WHOLE_FROM || !aliased((uintptr_t)dst, (uintptr_t)src, n)) {
        memcpy(dst, src, n);
        return;
    }
    char *d = dst;
    const char *s = src;
#if defined(__SSE2__)
    size_t lines = n / 64;
    for (size_t i = 0; i < lines; i++, d += 64, s += 64)
        store_line(d, load_line(s));
    memcpy(d, s, n - 64 * lines);
#else
    void *(*volatile copy)(void *, const void *, size_t) = memcpy;  /* not inlined */
    for (size_t done = 0; done < n; done += COPY_ALIAS_FROM)
        copy(d + done, s + done, n - done < COPY_ALIAS_FROM ? n - done : COPY_ALIAS_FROM);
#endif
}

/* `n` bytes from `src` to both `dst` and `also`, reading the source once: a writer's ring
 * chunk and its own block's copy in the receive buffer, when they are the same bytes (an
 * allgather's). Two memcpys read the source twice, and beyond the cache it comes from
 * memory both times: the ring protocol of a 2-rank 8 MiB allgather in plain C took
 * 1.26-1.29 ms so against 1.70-1.75 in two passes (`benchmarks/stream_floor.c 8388608
 * 131072 8 [two-passes]`). */
static inline void copy_twice(void *dst, void *also, const void *src, size_t n) {
#if defined(__SSE2__)
    char *d = dst, *a = also;
    const char *s = src;
    size_t lines = n / 64;
    for (size_t i = 0; i < lines; i++, d += 64, a += 64, s += 64) {
        line_t l = load_line(s);
        store_line(d, l);
        store_line(a, l);
    }
    memcpy(d, s, n - 64 * lines);
    memcpy(a, s, n - 64 * lines);
#else
    copy_bytes(dst, src, n);
    copy_bytes(also, src, n);
#endif
}

/* A copy with non-temporal stores (SSE2; elsewhere `copy_bytes`), for destinations too large
 * to stay in the cache: the stores skip it, so the line is not first read from memory
 * (read for ownership) and nothing the copy will need is evicted. Measured on 2 ranks
 * streaming 16 MiB: bcast 1.6 -> 0.8 ms, allgather 4.3 -> 3.6 ms; below ~8 MiB the cache
 * wins (4 MiB allgather 0.75 -> 0.88 ms), hence the caller's threshold. */
static inline void copy_streaming(void *dst, const void *src, size_t n) {
#if defined(__SSE2__)
    char *d = dst;
    const char *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > n)
        head = n;
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    size_t lines = n / 64;
    for (size_t i = 0; i < lines; i++, d += 64, s += 64)
        stream_line(d, load_line(s));
    memcpy(d, s, n - 64 * lines);
    _mm_sfence();  /* the streaming stores are weakly ordered: done before anything after */
#else
    copy_bytes(dst, src, n);
#endif
}

#endif
