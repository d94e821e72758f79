/* An alltoall of MPI_Isend/MPI_Irecv with at most W sends in flight per rank, for SMPI.
 *
 * Usage: smpi_alltoall_window ORDERS_FILE WINDOW BYTES
 * ORDERS_FILE has one line per rank: the ranks it sends to, in order (written by
 * benchmarks/smpi_crosscheck.py from collops' own `linear` orders, so both simulators see the
 * same destinations). Every receive is posted first; a rank then keeps WINDOW sends in flight
 * (0: all of them), issuing its next send in order when one completes (MPI_Waitany). Rank 0
 * prints "time_s <seconds>": the latest end minus the earliest start over the ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int read_order(const char *path, int rank, int size, int *dest) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    for (int r = 0; r <= rank; ++r)
        for (int k = 0; k < size - 1; ++k)
            if (fscanf(f, "%d", &dest[k]) != 1) { fclose(f); return -1; }
    fclose(f);
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: %s ORDERS_FILE WINDOW BYTES\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int window = atoi(argv[2]);
    long bytes = atol(argv[3]);
    int n = size - 1;
    int *dest = malloc(sizeof(int) * (size_t)n);
    if (read_order(argv[1], rank, size, dest) != 0) {
        fprintf(stderr, "rank %d: cannot read its order from %s\n", rank, argv[1]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (window <= 0 || window > n) window = n;
    char *sendbuf = calloc((size_t)bytes, 1);
    char *recvbuf = calloc((size_t)bytes * (size_t)size, 1);
    MPI_Request *recvs = malloc(sizeof(MPI_Request) * (size_t)n);
    MPI_Request *sends = malloc(sizeof(MPI_Request) * (size_t)window);

    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int k = 1, i = 0; k < size; ++k, ++i) {
        int src = (rank - k + size) % size;
        MPI_Irecv(recvbuf + (size_t)src * (size_t)bytes, (int)bytes, MPI_BYTE, src, 0,
                  MPI_COMM_WORLD, &recvs[i]);
    }
    int issued = 0;
    for (; issued < window; ++issued)
        MPI_Isend(sendbuf, (int)bytes, MPI_BYTE, dest[issued], 0, MPI_COMM_WORLD,
                  &sends[issued]);
    while (issued < n) {
        int slot;
        MPI_Waitany(window, sends, &slot, MPI_STATUS_IGNORE);
        MPI_Isend(sendbuf, (int)bytes, MPI_BYTE, dest[issued], 0, MPI_COMM_WORLD, &sends[slot]);
        ++issued;
    }
    MPI_Waitall(window, sends, MPI_STATUSES_IGNORE);
    MPI_Waitall(n, recvs, MPI_STATUSES_IGNORE);
    double end = MPI_Wtime();

    double first, last;
    MPI_Reduce(&start, &first, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&end, &last, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("time_s %.9e\n", last - first);
    free(dest); free(sendbuf); free(recvbuf); free(recvs); free(sends);
    MPI_Finalize();
    return 0;
}
