/* What one copy of a large block costs on this machine, by the ways a collective can copy it:
 * glibc's memcpy, `rep movsb`, non-temporal stores, and the kernel's single copy between
 * processes (`process_vm_readv`, here from this process itself, which costs what a read from
 * a peer costs), on 4 KiB pages and on transparent huge pages.
 *
 *   gcc -O2 -o /tmp/copy_rates benchmarks/copy_rates.c
 *   /tmp/copy_rates            # best of 30 per row
 *
 * Source and destination start 16 bytes into a page, as numpy's large arrays do. On the
 * development VM (2026-11-25): memcpy 29-36 GB/s at 1-4 MiB, 15-17 at 16 MiB (beyond the
 * 32 MiB L3 with the other buffers); process_vm_readv 11 GB/s on 4 KiB pages (6.6 at 16 MiB:
 * the kernel pins every page of the source), 26 GB/s at 4 MiB and 13 at 16 MiB on huge pages
 * (numpy asks for them for arrays of 4 MiB and more). That is the floor of a 2-rank allgather
 * by reference: each rank copies its own block (memcpy) and reads the peer's (one
 * process_vm_readv), which is exactly what MPICH does. Two memcpys through shared memory
 * instead of the single copy would be cheaper on paper, but they run on two cores, the
 * reader's loads miss on lines the other core just wrote, and the ring's synchronisation is
 * not free: `stream_floor.c` puts that protocol's floor at 4 MiB above MPICH's time.
 */
#define _GNU_SOURCE
#include <emmintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void copy_memcpy(void *d, const void *s, size_t n) { memcpy(d, s, n); }

static void copy_movsb(void *d, const void *s, size_t n) {
    __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

static void copy_streaming(void *dst, const void *src, size_t n) {
    char *d = dst;
    const char *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    for (size_t i = 0; i < n / 64; i++, d += 64, s += 64)
        for (int q = 0; q < 64; q += 16)
            _mm_stream_si128((__m128i *)(d + q), _mm_loadu_si128((const __m128i *)(s + q)));
    memcpy(d, s, n % 64);
    _mm_sfence();
}

static void copy_kernel(void *d, const void *s, size_t n) {
    struct iovec local = {d, n}, remote = {(void *)s, n};
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)n)
        perror("process_vm_readv");
}

/* n bytes starting 16 bytes into a page of a 2 MiB-aligned mapping (huge pages if asked) */
static char *buffer(size_t n, int huge) {
    size_t span = n + (4 << 20);
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    p = (char *)(((uintptr_t)p + (2 << 20) - 1) & ~(uintptr_t)((2 << 20) - 1));
    if (huge)
        madvise(p, n + 4096, MADV_HUGEPAGE);
    memset(p, 1, n + 4096);
    return p + 16;
}

int main(void) {
    const size_t sizes[] = {1 << 20, 4 << 20, 16 << 20};
    const char *names[] = {"memcpy", "rep movsb", "streaming", "process_vm_readv"};
    void (*copies[])(void *, const void *, size_t) = {copy_memcpy, copy_movsb, copy_streaming,
                                                      copy_kernel};
    printf("%-6s %-5s %-17s %9s %7s\n", "KiB", "pages", "copy", "µs", "GB/s");
    for (int huge = 0; huge < 2; huge++) {
        for (int k = 0; k < 3; k++) {
            size_t n = sizes[k];
            char *src = buffer(n, huge), *dst = buffer(n, huge);
            for (int c = 0; c < 4; c++) {
                double best = 1e9;
                for (int i = 0; i < 30; i++) {
                    double t = now();
                    copies[c](dst, src, n);
                    t = now() - t;
                    best = t < best ? t : best;
                }
                printf("%-6zu %-5s %-17s %9.1f %7.1f\n", n >> 10, huge ? "2M" : "4K", names[c],
                       best * 1e6, n / best / 1e9);
            }
        }
    }
    return 0;
}
