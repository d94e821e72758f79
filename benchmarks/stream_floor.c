/* The floor of the shm_stream protocol for a 2-rank allgather, without collops or Python.
 *
 * Two processes each write their block into their own ring of `chunks` slots of `chunk`
 * bytes in shared memory, read the peer's block out of the peer's ring into their output,
 * and copy their own block into the output in the same pass as their ring chunks (or between
 * chunks, when idle), as collops.shm._stream does, with the transport's own
 * `copy_bytes` and `copy_twice` (_shm_wait.h). Prints the mean time per call.
 *
 *   gcc -O2 -I src/collops/transport -o /tmp/stream_floor benchmarks/stream_floor.c
 *   /tmp/stream_floor 4194304 131072 8      # bytes per rank, chunk bytes, chunks
 *   /tmp/stream_floor 8388608 131072 8 two-passes   # the own block read apart, as before
 *
 * On the development VM (2026-11-25, evening): 1, 4, 8 and 16 MiB took 80, 364, 1202 and
 * 3072 µs here (1 MiB: 113 before the one pass for both copies; in a later run 4 and 8 MiB
 * took 453-480 and 1260-1289 µs in one pass against 527-553 and 1696-1750 in two); through
 * collops (`benchmarks/interleaved.py`) 121-125, 400-465, 1125-1211 and 2938-2984, against
 * MPICH's 144-148, 379-489, 1370-1401 and 3620-3704 in the same processes. So the two copies
 * through the ring, one on each core, with the input read once, beat the kernel's single
 * copy (`copy_rates.c`); at 4 MiB, where the buffers of both ranks still fit in the cache,
 * MPICH's calls in between cost the ring most, and without them (`benchmarks/variants.py`)
 * it took 420-444 µs against 487-534 by reference.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "_shm_wait.h" /* the transport's own copy_bytes */

#define LOAD(p) __atomic_load_n(p, __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n(p, v, __ATOMIC_RELEASE)

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && strcmp(argv[4], "two-passes") == 0)) {
        fprintf(stderr, "usage: %s bytes chunk_bytes chunks [two-passes]\n", argv[0]);
        return 2;
    }
    size_t n = strtoul(argv[1], NULL, 10), chunk = strtoul(argv[2], NULL, 10);
    uint64_t nchunks = strtoul(argv[3], NULL, 10);
    int one_pass = argc == 4;  /* "two-passes": the own block copied apart, as before */
    int iterations = 100, warmup = 10;
    size_t ring = nchunks * chunk;
    char *shm = mmap(NULL, 8192 + 2 * ring, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED || n == 0 || chunk == 0 || nchunks == 0)
        return 1;
    memset(shm, 0, 8192 + 2 * ring);
    uint64_t *filled[2] = {(uint64_t *)shm, (uint64_t *)(shm + 64)};
    uint64_t *drained[2] = {(uint64_t *)(shm + 128), (uint64_t *)(shm + 192)};
    uint64_t *barrier = (uint64_t *)(shm + 256);
    char *rings[2] = {shm + 8192, shm + 8192 + ring};
    pid_t child = fork();
    int me = child == 0, peer = 1 - me;
    /* 16 bytes into a page, as numpy's large arrays are */
    char *x = (char *)aligned_alloc(4096, n + 4096) + 16;
    char *out = (char *)aligned_alloc(4096, 2 * n + 4096) + 16;
    memset(x, me + 1, n);
    memset(out, 0, 2 * n);
    size_t per = (n + chunk - 1) / chunk;
    uint64_t written = 0, read = 0;
    double total = 0.0;
    for (int it = 0; it < iterations; it++) {
        __atomic_fetch_add(barrier, 1, __ATOMIC_SEQ_CST);
        while (LOAD(barrier) < (uint64_t)2 * (it + 1))
            ;
        double t = now();
        size_t w = 0, r = 0, self = 0;
        while (w < per || r < per || self < n) {
            int moved = 0;
            if (w < per && (written < nchunks || LOAD(drained[me]) >= written - nchunks + 1)) {
                size_t off = w * chunk, m = n - off < chunk ? n - off : chunk;
                char *slot = rings[me] + (written % nchunks) * chunk;
                if (self == off && one_pass) {  /* the own block's next piece too, in the same pass */
                    copy_twice(slot, out + me * n + off, x + off, m);
                    self += m;
                } else {
                    copy_bytes(slot, x + off, m);
                }
                STORE(filled[me], ++written);
                w++;
                moved = 1;
            }
            if (r < per && LOAD(filled[peer]) > read) {
                size_t off = r * chunk, m = n - off < chunk ? n - off : chunk;
                copy_bytes(out + peer * n + off, rings[peer] + (read % nchunks) * chunk, m);
                STORE(drained[peer], ++read);
                r++;
                moved = 1;
            }
            if (!moved && self < n) {
                size_t m = n - self < chunk ? n - self : chunk;
                copy_bytes(out + me * n + self, x + self, m);
                self += m;
            }
        }
        if (it >= warmup)
            total += now() - t;
    }
    if (me)
        _exit(0);
    waitpid(child, NULL, 0);
    printf("allgather of %zu bytes per rank, %llu x %zu-byte chunks, %s: %.1f us per call\n",
           n, (unsigned long long)nchunks, chunk, one_pass ? "one pass" : "two passes",
           total / (iterations - warmup) * 1e6);
    return 0;
}
