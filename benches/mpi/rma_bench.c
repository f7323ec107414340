/*
 * benches/mpi/rma_bench.c - the patterns of onesided-bench, written against
 * MPI-3 RMA, so MPICH and Open MPI can be measured beside onesided with the
 * same method and the same output (scripts/bench-vs-mpi.sh).
 *
 * 2 or more ranks: rank 0 is the origin and the only rank that times, rank 1
 * the target; ranks 2.. take part only in msg_rate (as targets) and fence. Every measurement is one step: rank 0 broadcasts (op, size,
 * iters), times the loop, and both enter MPI_Barrier (rank 1 waits there,
 * which drives target-side progress). Passive-target patterns run inside one
 * MPI_Win_lock_all epoch on a window from MPI_Win_allocate.
 *
 *   put_lat get_lat        one op + MPI_Win_flush(1), at every size
 *   put_bw get_bw          64 ops to offset 0, one flush, at every size
 *   acc_lat                MPI_Accumulate(SUM, 1 x MPI_DOUBLE) + flush
 *   acc_rate               1024 x that accumulate, one flush (million ops/s)
 *   fop_lat                MPI_Fetch_and_op(SUM, MPI_INT64_T) + flush
 *   cas_lat                MPI_Compare_and_swap(MPI_INT64_T) + flush
 *   msg_rate               max(64, n-1) x 8 B put round-robin over ranks 1..n-1,
 *                          MPI_Win_flush_all
 *   lock_unlock_lat        MPI_Win_lock(EXCLUSIVE, 1) + 8 B put + unlock
 *   fence_lat              fence + 8 B put + fence (both ranks)
 *   pscw_lat               start/8 B put/complete against post/wait
 *   halo_lat               one step of a 2-D halo exchange (every rank): each
 *                          rank owns a 1024 x 1024 f64 block in a row-major
 *                          1024 x 1026 window (a halo column on each side);
 *                          it puts its first and last interior columns
 *                          (MPI_Type_vector(1024, 1, 1026, MPI_DOUBLE), on
 *                          origin and target) into its ring neighbours'
 *                          halo columns, then MPI_Win_fence; "size" is the
 *                          grid side (1024)
 *
 * Method (as onesided-bench): warm-up, calibration (iterations x4 until one
 * call takes T/20), iters = min(N, T / time per iteration), at least 3;
 * R repetitions; median, fastest and slowest per-operation time.
 *
 * Checks (after the timing): the last get returns the stamped block; the
 * accumulate word holds exactly the number of accumulates; fetch-and-op
 * returned 0, 1, 2, ... in order; every compare-and-swap returned the value
 * it compared with and the word holds the count; after fence, PSCW and
 * lock/unlock the target holds the last value written; a 1 MiB put/get
 * round trip.
 *
 * Output (rank 0), one JSON object per line, the shape of onesided-bench
 * --json: {"type":"header",...}, {"type":"result","op":..,"mode":"mpi",
 * "size":..,"lat_us":..,"lat_min_us":..,"lat_max_us":..[,"bw_mbps"|"rate_mops"]},
 * {"type":"check","check":"ok"|"FAIL","checked":n,"failed":[..]}.
 *
 * Options: -o ops,.. (only these)  -x ops,.. (skip these)  -s sizes (8,1K,1M)
 *          -r reps  -T seconds per repetition  -N max iterations
 *          -l label (the header's "system" field)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PUT_LAT, GET_LAT, PUT_BW, GET_BW, ACC_LAT, ACC_RATE, FOP_LAT, CAS_LAT,
       MSG_RATE, LOCK_UNLOCK_LAT, FENCE_LAT, PSCW_LAT, HALO_LAT, NOPS };
static const char *names[NOPS] = {"put_lat", "get_lat", "put_bw", "get_bw", "acc_lat",
                                  "acc_rate", "fop_lat", "cas_lat", "msg_rate",
                                  "lock_unlock_lat", "fence_lat", "pscw_lat", "halo_lat"};
#define BW_WINDOW 64
#define ACC_BATCH 1024
#define RATE_BATCH 64
#define CHECK_BYTES (1 << 20)
#define MAX_SIZES 32
#define MAX_REPS 1000
/* The atomic words sit after the data area of the passive window. */
#define ATOMIC_AREA 64
/* halo_lat: the side of each rank's block; a row has HALO_N + 2 doubles. */
#define HALO_N 1024
#define HALO_W (HALO_N + 2)
enum { STEP = 1, STOP = 2 };

static int rank, nranks;
static MPI_Win wp, wl, wa; /* passive, lock, active windows */
static char *pbase, *lbase, *abase;
static size_t data_bytes; /* data area of the passive window */
static char *obuf;
static MPI_Group g_origin, g_target;
static MPI_Win wh; /* halo window (only when halo_lat runs) */
static double *hbase;
static MPI_Datatype column;
static double opt_T = 0.5;
static int opt_reps = 5;
static long opt_max = 10000;
static const char *opt_only, *opt_skip, *opt_label = "mpi";
static size_t sizes[MAX_SIZES];
static int nsizes;
static int checked;
static char failed[8192];
static int64_t count; /* atomic operations since the last reset */
static long wrong_returns;
static char first_wrong[160];

static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && strncmp(p, name, n) == 0)
            return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

static void fail(const char *what)
{
    size_t used = strlen(failed);
    snprintf(failed + used, sizeof failed - used, "%s\"%s\"", used ? "," : "", what);
}

static int parse_sizes(const char *s)
{
    nsizes = 0;
    while (s && *s && nsizes < MAX_SIZES) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s)
            return -1;
        if (*end == 'K' || *end == 'k')
            v <<= 10, end++;
        else if (*end == 'M' || *end == 'm')
            v <<= 20, end++;
        if (v == 0 || v > (1ul << 30) || (*end && *end != ','))
            return -1;
        sizes[nsizes++] = v;
        s = *end ? end + 1 : end;
    }
    return nsizes > 0 ? 0 : -1;
}

static void stamp(size_t len, uint64_t v)
{
    memcpy(obuf, &v, len < 8 ? len : 8);
}

/* ---- one iteration of each pattern (rank 0) ---- */

static void reset_word(int off)
{
    int64_t zero = 0;
    MPI_Put(&zero, 1, MPI_INT64_T, 1, off, 1, MPI_INT64_T, wp);
    MPI_Win_flush(1, wp);
    count = 0;
    wrong_returns = 0;
    first_wrong[0] = 0;
}

static void returned(const char *what, int64_t old)
{
    if (old != count) {
        if (!wrong_returns++)
            snprintf(first_wrong, sizeof first_wrong, "%s number %lld returned %lld", what,
                     (long long)count, (long long)old);
    }
}

/* ---- halo_lat (every rank) ---- */

/* The value of interior point (r, c), 1 <= c <= HALO_N, of rank `owner`. */
static double halo_value(int owner, int r, int c)
{
    return owner * 1e7 + r * 1e3 + c;
}

static void halo_init(void)
{
    for (int r = 0; r < HALO_N; r++)
        for (int c = 0; c < HALO_W; c++)
            hbase[r * HALO_W + c] = c == 0 || c == HALO_N + 1 ? 0.0 : halo_value(rank, r, c);
}

/* iters exchanges: both boundary columns to the ring neighbours, fence. */
static void halo_run(long iters)
{
    int left = (rank + nranks - 1) % nranks, right = (rank + 1) % nranks;
    for (int r = 0; r < HALO_N; r++) /* empty the halos: the check sees fresh data */
        hbase[r * HALO_W] = hbase[r * HALO_W + HALO_N + 1] = 0.0;
    MPI_Win_fence(MPI_MODE_NOPRECEDE, wh);
    for (long i = 0; i < iters; i++) {
        MPI_Put(hbase + 1, 1, column, left, HALO_N + 1, 1, column, wh);
        MPI_Put(hbase + HALO_N, 1, column, right, 0, 1, column, wh);
        MPI_Win_fence(i + 1 == iters ? MPI_MODE_NOSUCCEED : 0, wh);
    }
}

/* Halo elements of this rank that do not hold the neighbours' boundary. */
static long halo_wrong(void)
{
    int left = (rank + nranks - 1) % nranks, right = (rank + 1) % nranks;
    long bad = 0;
    for (int r = 0; r < HALO_N; r++) {
        bad += hbase[r * HALO_W] != halo_value(left, r, HALO_N);
        bad += hbase[r * HALO_W + HALO_N + 1] != halo_value(right, r, 1);
    }
    return bad;
}

static void run(int op, size_t size, long iters, uint64_t *seq)
{
    if (op == HALO_LAT) {
        halo_run(iters);
        return;
    }
    MPI_Aint acc = data_bytes, fop = data_bytes + 8, cas = data_bytes + 16;
    double one = 1.0;
    int64_t inc = 1, old;
    for (long i = 0; i < iters; i++) {
        switch (op) {
        case PUT_LAT:
            stamp(size, ++*seq);
            MPI_Put(obuf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, wp);
            MPI_Win_flush(1, wp);
            break;
        case GET_LAT:
            MPI_Get(obuf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, wp);
            MPI_Win_flush(1, wp);
            break;
        case PUT_BW:
            for (int k = 0; k < BW_WINDOW; k++)
                MPI_Put(obuf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, wp);
            MPI_Win_flush(1, wp);
            break;
        case GET_BW:
            for (int k = 0; k < BW_WINDOW; k++)
                MPI_Get(obuf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, wp);
            MPI_Win_flush(1, wp);
            break;
        case ACC_LAT:
        case ACC_RATE: {
            int n = op == ACC_LAT ? 1 : ACC_BATCH;
            for (int k = 0; k < n; k++)
                MPI_Accumulate(&one, 1, MPI_DOUBLE, 1, acc, 1, MPI_DOUBLE, MPI_SUM, wp);
            MPI_Win_flush(1, wp);
            count += n;
            break;
        }
        case FOP_LAT:
            MPI_Fetch_and_op(&inc, &old, MPI_INT64_T, 1, fop, MPI_SUM, wp);
            MPI_Win_flush(1, wp);
            returned("fetch_and_op", old);
            count++;
            break;
        case CAS_LAT: {
            int64_t cmp = count, swap = count + 1;
            MPI_Compare_and_swap(&swap, &cmp, &old, MPI_INT64_T, 1, cas, wp);
            MPI_Win_flush(1, wp);
            returned("compare_and_swap", old);
            count++;
            break;
        }
        case MSG_RATE: {
            int puts = RATE_BATCH > nranks - 1 ? RATE_BATCH : nranks - 1;
            for (int k = 0; k < puts; k++)
                MPI_Put(obuf, 8, MPI_BYTE, 1 + k % (nranks - 1), 0, 8, MPI_BYTE, wp);
            MPI_Win_flush_all(wp);
            break;
        }
        case LOCK_UNLOCK_LAT: {
            int64_t v = i + 1;
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, wl);
            MPI_Put(&v, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, wl);
            MPI_Win_unlock(1, wl);
            break;
        }
        case FENCE_LAT: {
            int64_t v = i + 1;
            MPI_Win_fence(MPI_MODE_NOPRECEDE, wa);
            MPI_Put(&v, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, wa);
            MPI_Win_fence(MPI_MODE_NOSUCCEED, wa);
            break;
        }
        case PSCW_LAT: {
            int64_t v = i + 1;
            MPI_Win_start(g_target, 0, wa);
            MPI_Put(&v, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, wa);
            MPI_Win_complete(wa);
            break;
        }
        }
    }
}

/* Rank 1's part of a step; returns 1 if the value left by rank 0 is wrong. */
static int target_step(int op, long iters)
{
    int64_t v = -1;
    if (op == PSCW_LAT && rank != 1)
        return 0; /* only rank 1 is in the exposure group */
    if (op == HALO_LAT) {
        halo_run(iters);
        long bad = halo_wrong();
        if (bad)
            fprintf(stderr, "rank %d: after halo_lat: %ld halo elements wrong\n", rank, bad);
        return bad != 0;
    }
    if (op == FENCE_LAT || op == PSCW_LAT) {
        for (long i = 0; i < iters; i++) {
            if (op == FENCE_LAT) {
                MPI_Win_fence(MPI_MODE_NOPRECEDE, wa);
                MPI_Win_fence(MPI_MODE_NOSUCCEED, wa);
            } else {
                MPI_Win_post(g_origin, 0, wa);
                MPI_Win_wait(wa);
            }
        }
        memcpy(&v, abase, 8); /* local access after the epoch closed */
        return rank == 1 && v != iters;
    }
    return 0;
}

static int step(int op, size_t size, long iters, uint64_t *seq, double *secs)
{
    long cmd[4] = {STEP, op, (long)size, iters};
    MPI_Bcast(cmd, 4, MPI_LONG, 0, MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    run(op, size, iters, seq);
    *secs = MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int per_iter(int op)
{
    switch (op) {
    case PUT_BW:
    case GET_BW:
        return BW_WINDOW;
    case ACC_RATE:
        return ACC_BATCH;
    case MSG_RATE:
        return RATE_BATCH > nranks - 1 ? RATE_BATCH : nranks - 1;
    default:
        return 1;
    }
}

static void measure(int op, size_t size, uint64_t *seq)
{
    double t, per_op[MAX_REPS];
    int ops = per_iter(op);
    long warm = size * ops >= (1u << 22) ? 1 : (opt_max < 10 ? opt_max : 10);
    step(op, size, warm, seq, &t);
    long it = 1;
    double per;
    for (;;) {
        step(op, size, it, seq, &t);
        if (t >= opt_T / 20 || it >= opt_max) {
            per = t / it;
            break;
        }
        it = it * 4 < opt_max ? it * 4 : opt_max;
    }
    double want = per > 0 ? opt_T / per : (double)opt_max;
    long iters = want > opt_max ? opt_max : (long)want;
    if (iters < 3)
        iters = 3;
    for (int r = 0; r < opt_reps; r++) {
        step(op, size, iters, seq, &t);
        per_op[r] = t * 1e6 / ((double)iters * ops);
    }
    qsort(per_op, opt_reps, sizeof(double), cmp_double);
    double med = opt_reps % 2 ? per_op[opt_reps / 2]
                              : (per_op[opt_reps / 2 - 1] + per_op[opt_reps / 2]) / 2;
    printf("{\"type\":\"result\",\"op\":\"%s\",\"mode\":\"mpi\",\"size\":%zu,\"iters\":%ld,"
           "\"ops_per_iter\":%d,\"reps\":%d,\"lat_us\":%.6g,\"lat_min_us\":%.6g,"
           "\"lat_max_us\":%.6g",
           names[op], size, iters, ops, opt_reps, med, per_op[0], per_op[opt_reps - 1]);
    if (op == PUT_BW || op == GET_BW)
        printf(",\"bw_mbps\":%.6g", size / med);
    if (op == ACC_RATE || op == MSG_RATE)
        printf(",\"rate_mops\":%.6g", 1.0 / med);
    printf("}\n");
    fflush(stdout);
}

/* The checks of rank 0 after a pattern. */
static void check_after(int op, size_t size, const char *want)
{
    char label[200];
    snprintf(label, sizeof label, "%s %zu mpi", names[op], size);
    if (op == GET_LAT || op == GET_BW) {
        if (memcmp(obuf, want, size) == 0)
            checked++;
        else {
            strcat(label, ": last get returned wrong data");
            fail(label);
        }
    } else if (op == ACC_LAT || op == ACC_RATE || op == FOP_LAT || op == CAS_LAT) {
        MPI_Aint off = data_bytes + (op == FOP_LAT ? 8 : op == CAS_LAT ? 16 : 0);
        char have[8];
        int64_t dummy = 0;
        MPI_Datatype ty = op == FOP_LAT || op == CAS_LAT ? MPI_INT64_T : MPI_DOUBLE;
        MPI_Fetch_and_op(&dummy, have, ty, 1, off, MPI_NO_OP, wp);
        MPI_Win_flush(1, wp);
        double d;
        int64_t v;
        memcpy(&d, have, 8);
        memcpy(&v, have, 8);
        int ok = ty == MPI_DOUBLE ? d == (double)count : v == count;
        if (ok)
            checked++;
        else {
            char m[300];
            snprintf(m, sizeof m, "%s: target word is not the operation count %lld", label,
                     (long long)count);
            fail(m);
        }
        if (wrong_returns) {
            char m[400];
            snprintf(m, sizeof m, "%s: %ld wrong return values, first: %s", label,
                     wrong_returns, first_wrong);
            fail(m);
        } else if (op == FOP_LAT || op == CAS_LAT)
            checked++;
    } else if (op == LOCK_UNLOCK_LAT) {
        checked++; /* rank 1 checks at STOP */
    } else if (op == HALO_LAT) {
        long bad = halo_wrong(); /* the other ranks check theirs after each step */
        if (bad) {
            char m[300];
            snprintf(m, sizeof m, "%s: %ld of rank 0's %d halo elements wrong", label, bad,
                     2 * HALO_N);
            fail(m);
        } else
            checked++;
    }
}

static void origin(const int *ops_sel, int nops)
{
    uint64_t seq = 0;
    char *want = malloc(CHECK_BYTES);
    MPI_Win_lock_all(0, wp);
    for (int k = 0; k < nops; k++) {
        int op = ops_sel[k];
        int sized = op <= GET_BW;
        for (int s = 0; s < (sized ? nsizes : 1); s++) {
            size_t size = sized ? sizes[s] : op == HALO_LAT ? HALO_N : 8;
            if (op == GET_LAT || op == GET_BW) {
                stamp(size, ++seq);
                MPI_Put(obuf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, wp);
                MPI_Win_flush(1, wp);
                memcpy(want, obuf, size);
                memset(obuf, 0, size);
            }
            if (op == ACC_LAT || op == ACC_RATE)
                reset_word((int)data_bytes);
            if (op == FOP_LAT)
                reset_word((int)data_bytes + 8);
            if (op == CAS_LAT)
                reset_word((int)data_bytes + 16);
            measure(op, size, &seq);
            check_after(op, size, want);
        }
    }
    /* 1 MiB round trip */
    for (size_t i = 0; i < CHECK_BYTES; i++)
        obuf[i] = (char)(i * 7 + 3);
    memcpy(want, obuf, CHECK_BYTES);
    MPI_Put(obuf, CHECK_BYTES, MPI_BYTE, 1, 0, CHECK_BYTES, MPI_BYTE, wp);
    MPI_Win_flush(1, wp);
    memset(obuf, 0, CHECK_BYTES);
    MPI_Get(obuf, CHECK_BYTES, MPI_BYTE, 1, 0, CHECK_BYTES, MPI_BYTE, wp);
    MPI_Win_flush(1, wp);
    if (memcmp(obuf, want, CHECK_BYTES) == 0)
        checked++;
    else
        fail("1MiB put/get round trip");
    MPI_Win_unlock_all(wp);
    long cmd[4] = {STOP, 0, 0, 0};
    MPI_Bcast(cmd, 4, MPI_LONG, 0, MPI_COMM_WORLD);
    free(want);
}

/* Rank 1: follows the steps; returns the number of failed checks. */
static long target(void)
{
    long failures = 0, last_lock = 0;
    for (;;) {
        long cmd[4];
        MPI_Bcast(cmd, 4, MPI_LONG, 0, MPI_COMM_WORLD);
        if (cmd[0] == STOP)
            break;
        if (target_step((int)cmd[1], cmd[3])) {
            fprintf(stderr, "rank %d: after %s: wrong last value\n", rank, names[cmd[1]]);
            failures++;
        }
        if (cmd[1] == LOCK_UNLOCK_LAT)
            last_lock = cmd[3];
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (last_lock && rank == 1) {
        int64_t v;
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, wl);
        memcpy(&v, lbase, 8);
        MPI_Win_unlock(1, wl);
        if (v != last_lock) {
            fprintf(stderr, "rank 1: after lock_unlock_lat: holds %lld, expected %ld\n",
                    (long long)v, last_lock);
            failures++;
        }
    }
    return failures;
}

static void header(int nops)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(lib, &len);
    for (char *p = lib; *p; p++)
        if (*p == '\n' || *p == '"' || *p == '\\' || *p == '\t')
            *p = *p == '\n' ? 0 : ' ';
    char load[64] = "unknown";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        double a, b, c;
        if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
            snprintf(load, sizeof load, "%.2f %.2f %.2f", a, b, c);
        fclose(f);
    }
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    printf("{\"type\":\"header\",\"header\":{\"system\":\"%s\",\"provider\":\"%s\","
           "\"ranks\":2,\"date\":\"%s\",\"loadavg\":\"%s\",\"reps\":%d,\"time_s\":%g,"
           "\"max_iters\":%ld,\"ops\":%d}}\n",
           opt_label, lib, date, load, opt_reps, opt_T, opt_max, nops);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    nranks = n;
    parse_sizes("8,1K,64K,1M");
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            bad = 1;
            break;
        }
        if (!strcmp(a, "-o"))
            opt_only = v;
        else if (!strcmp(a, "-x"))
            opt_skip = v;
        else if (!strcmp(a, "-s"))
            bad |= parse_sizes(v) != 0;
        else if (!strcmp(a, "-r"))
            opt_reps = atoi(v), bad |= opt_reps < 1 || opt_reps > MAX_REPS;
        else if (!strcmp(a, "-T"))
            opt_T = atof(v), bad |= !(opt_T > 0);
        else if (!strcmp(a, "-N"))
            opt_max = atol(v), bad |= opt_max < 1;
        else if (!strcmp(a, "-l"))
            opt_label = v;
        else
            bad = 1;
        i++;
    }
    if (bad || n < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -n 2 %s [-o ops] [-x ops] [-s 8,1K,1M] [-r reps] "
                            "[-T secs] [-N max_iters] [-l label]  (2 or more ranks)\n",
                    argv[0]);
        MPI_Finalize();
        return 2;
    }
    int sel[NOPS];
    int nops = 0;
    for (int op = 0; op < NOPS; op++)
        if ((!opt_only || listed(opt_only, names[op])) && !listed(opt_skip, names[op]))
            sel[nops++] = op;
    size_t maxsz = CHECK_BYTES;
    for (int s = 0; s < nsizes; s++)
        if (sizes[s] > maxsz)
            maxsz = sizes[s];
    data_bytes = (maxsz + 63) / 64 * 64;
    /* On a page boundary, as onesided-bench's and fi_rma_raw's origin
     * buffers: a malloc'd block starts 16 bytes past a page, and kernel
     * copies (CMA) of a misaligned buffer are measurably slower. */
    void *ob = NULL;
    if (posix_memalign(&ob, 4096, maxsz) != 0) {
        fprintf(stderr, "rma_bench: allocating %zu bytes failed\n", maxsz);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    obuf = ob;
    memset(obuf, 0x5a, maxsz);
    MPI_Win_allocate(data_bytes + ATOMIC_AREA, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &pbase, &wp);
    MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &lbase, &wl);
    MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &abase, &wa);
    int halo = 0;
    for (int k = 0; k < nops; k++)
        halo |= sel[k] == HALO_LAT;
    if (halo) {
        MPI_Type_vector(HALO_N, 1, HALO_W, MPI_DOUBLE, &column);
        MPI_Type_commit(&column);
        MPI_Win_allocate((MPI_Aint)HALO_N * HALO_W * sizeof(double), sizeof(double),
                         MPI_INFO_NULL, MPI_COMM_WORLD, &hbase, &wh);
        halo_init();
    }
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int r0 = 0, r1 = 1;
    MPI_Group_incl(world, 1, &r0, &g_origin);
    MPI_Group_incl(world, 1, &r1, &g_target);
    MPI_Barrier(MPI_COMM_WORLD);
    long failures = 0, all = 0;
    if (rank == 0) {
        header(nops);
        origin(sel, nops);
    } else {
        failures = target();
    }
    MPI_Reduce(&failures, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all)
            fail("target-side checks (fence/pscw/lock last value): see rank 1's stderr");
        printf("{\"type\":\"check\",\"check\":\"%s\",\"checked\":%d,\"failed\":[%s]}\n",
               failed[0] ? "FAIL" : "ok", checked, failed);
    }
    MPI_Group_free(&g_origin);
    MPI_Group_free(&g_target);
    MPI_Group_free(&world);
    if (halo) {
        MPI_Win_free(&wh);
        MPI_Type_free(&column);
    }
    MPI_Win_free(&wa);
    MPI_Win_free(&wl);
    MPI_Win_free(&wp);
    free(obuf);
    int rc = failed[0] ? 1 : 0;
    MPI_Finalize();
    return rc;
}
