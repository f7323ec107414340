/*
 * halo_copy: the copy of one intra-node 2-D halo step without onesided or
 * MPI, in the orders a library can choose (docs/performance.md, "Halo
 * columns written at the epoch's end").
 *
 * Two processes (pinned to CPUs 0 and 1) share two windows of 1024 x 1026
 * doubles (memfd, 4 KiB pages). Each step, each process copies column 1 of
 * its origin into the peer's column 1025 and column 1024 into the peer's
 * column 0, then both meet at a spinning barrier. Every block is on its
 * own page, so the copy costs page walks, not bytes.
 *
 *   cc -O2 -o halo_copy benches/raw/halo_copy.c && ./halo_copy MODE [STEPS]
 *
 * MODE 0: block by block, origin to peer (what onesided did before)
 *      1: per column, pack into a buffer, then write the column
 *      2: pack both columns, then write both (onesided now: `deferred.rs`)
 *      3: pack both columns into shared memory; each process unpacks the
 *         peer's into its own window (MPICH's active-message path)
 * MODE + 10: the origin is a private malloc'd copy of the grid (as in
 *      onesided-bench's halo_lat), not the process's own window (as in
 *      benches/mpi/rma_bench.c).
 * Prints rank 0's microseconds per step.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N 1024
#define W (N + 2)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODE [STEPS]\n", argv[0]);
        return 2;
    }
    int mode = atoi(argv[1]);
    long steps = argc > 2 ? atol(argv[2]) : 20000;
    size_t bytes = (size_t)N * W * sizeof(double);
    size_t bounce_bytes = 4 * N * sizeof(double);
    int fd = memfd_create("halo_copy", 0);
    if (fd < 0 || ftruncate(fd, 2 * bytes + bounce_bytes + 4096) != 0) {
        perror("memfd");
        return 1;
    }
    double *win[2];
    for (int i = 0; i < 2; i++) {
        win[i] = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, bytes * i);
        if (win[i] == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
    }
    double *bounce = mmap(0, bounce_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 2 * bytes);
    _Atomic long *bar = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 2 * bytes + bounce_bytes);
    if (bounce == MAP_FAILED || bar == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    pid_t child = fork();
    int me = child == 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(me, &set);
    sched_setaffinity(0, sizeof set, &set);
    double *org = win[me], *peer = win[1 - me], *mine = win[me];
    if (mode >= 10) {
        org = malloc(bytes);
        if (!org)
            return 1;
    }
    for (size_t i = 0; i < (size_t)N * W; i++)
        org[i] = (double)i + me * 1e7;
    static double pk[2 * N];
    long gen = 0;
#define BARRIER()                                                                                  \
    do {                                                                                           \
        gen++;                                                                                     \
        atomic_fetch_add(&bar[0], 1);                                                              \
        while (atomic_load(&bar[0]) < 2 * gen)                                                     \
            ;                                                                                      \
    } while (0)
    BARRIER();
    double t0 = now();
    for (long k = 0; k < steps; k++) {
        switch (mode % 10) {
        case 0:
            for (int r = 0; r < N; r++)
                peer[r * W + N + 1] = org[r * W + 1];
            for (int r = 0; r < N; r++)
                peer[r * W] = org[r * W + N];
            break;
        case 1:
            for (int c = 0; c < 2; c++) {
                double *o = org + (c ? N : 1), *t = peer + (c ? 0 : N + 1);
                for (int r = 0; r < N; r++)
                    pk[r] = o[r * W];
                __asm__ volatile("" ::"r"(pk) : "memory");
                for (int r = 0; r < N; r++)
                    t[r * W] = pk[r];
            }
            break;
        case 2:
            for (int r = 0; r < N; r++)
                pk[r] = org[r * W + 1];
            for (int r = 0; r < N; r++)
                pk[N + r] = org[r * W + N];
            __asm__ volatile("" ::"r"(pk) : "memory");
            for (int r = 0; r < N; r++)
                peer[r * W + N + 1] = pk[r];
            for (int r = 0; r < N; r++)
                peer[r * W] = pk[N + r];
            break;
        default: {
            double *out = bounce + me * 2 * N, *in = bounce + (1 - me) * 2 * N;
            for (int r = 0; r < N; r++)
                out[r] = org[r * W + 1];
            for (int r = 0; r < N; r++)
                out[N + r] = org[r * W + N];
            BARRIER();
            for (int r = 0; r < N; r++)
                mine[r * W + N + 1] = in[r];
            for (int r = 0; r < N; r++)
                mine[r * W] = in[N + r];
        }
        }
        BARRIER();
    }
    double dt = now() - t0;
    /* Check the last step: the peer's columns arrived. */
    long bad = 0;
    double *src = mode >= 10 ? NULL : win[1 - me];
    if (src)
        for (int r = 0; r < N; r++)
            bad += mine[r * W + N + 1] != src[r * W + 1] || mine[r * W] != src[r * W + N];
    if (!me) {
        printf("mode %d: %.2f us/step%s\n", mode, dt / steps * 1e6, bad ? " (WRONG DATA)" : "");
        waitpid(child, NULL, 0);
    }
    return bad != 0;
}
