/* What one copy of a large block costs on this machine, by the ways a collective can copy it:
 * glibc's memcpy, `rep movsb`, non-temporal stores, and the kernel's single copy between
 * processes (`process_vm_readv`, here from this process itself, which costs what a read from
 * a peer costs), on 4 KiB pages and on transparent huge pages.
 *
 *   gcc -O2 -I src/collops/transport -o /tmp/copy_rates benchmarks/copy_rates.c
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
 * not free: `stream_floor.c` puts that protocol's floor at 4 MiB at MPICH's time, and below
 * it up to 2 MiB.
 *
 * Then "aliased": copies whose destination sits 16 bytes past the source modulo 4 KiB (a
 * numpy array's data against a ring slot at a page), by glibc's memcpy, by 2 KiB pieces of a
 * fixed-bound memcpy (which gcc inlines as `rep movsq`) and by the transport's `copy_bytes`
 * (_shm_wait.h). On the development VM (2026-11-25, evening): 128 KiB 43 / 7.9 / 2.7 µs,
 * against 2.7 unaliased; at 1 MiB glibc no longer uses `rep movsb` and the case costs nothing.
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

#include "_shm_wait.h" /* the transport's copy_bytes */


static void copy_memcpy(void *d, const void *s, size_t n) { memcpy(d, s, n); }

static void copy_movsb(void *d, const void *s, size_t n) {
    __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
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

/* 2 KiB pieces of a memcpy whose bound gcc knows: inlined as `rep movsq` */
static void copy_inlined_pieces(void *d, const void *s, size_t n) {
    for (size_t q = 0; q < n; q += 2048)
        memcpy((char *)d + q, (const char *)s + q, n - q < 2048 ? n - q : 2048);
}

static void aliased_rows(void) {
    const size_t sizes[] = {128 << 10, 1 << 20};
    const char *names[] = {"memcpy", "inlined pieces", "copy_bytes", "memcpy unaliased"};
    void (*copies[])(void *, const void *, size_t) = {copy_memcpy, copy_inlined_pieces,
                                                      copy_bytes, copy_memcpy};
    printf("\naliased (destination 16 bytes past the source, modulo 4 KiB)\n");
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k];
        char *src = buffer(n, 0) - 16, *dst = buffer(n + 64, 0) - 16;
        for (int c = 0; c < 4; c++) {
            double best = 1e9;
            char *to = dst + (c == 3 ? 0 : 16);
            for (int i = 0; i < 30; i++) {
                double t = now();
                copies[c](to, src, n);
                t = now() - t;
                best = t < best ? t : best;
            }
            printf("%-6zu %-5s %-17s %9.1f %7.1f\n", n >> 10, "4K", names[c], best * 1e6,
                   n / best / 1e9);
        }
    }
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
    aliased_rows();
    return 0;
}
