/*
 * fi_rma_raw.c - minimal raw libfabric RMA/atomic microbenchmark between 2 processes on one host.
 *
 * Copied from /work/shared/peers/fi_rma_raw.c (our own reference code, see its README there) so
 * that scripts/bench-vs-mpi.sh does not depend on ../shared.  Changed here: ops whose atomic is
 * not valid on the provider (fi_*atomicvalid fails or gives count 0, e.g. `net` in libfabric 1.17)
 * are skipped with a "# skipped <ops>: <reason>" line instead of failing the whole run.
 *
 * The launcher forks two sibling processes (like an MPI launcher would): rank 0 = origin,
 * rank 1 = target.  Endpoint names, the target buffer address and its MR key are exchanged
 * through a MAP_SHARED anonymous page created before fork; the same page carries the
 * start/stop flags (barriers).  No libfabric traffic is used for control.
 * The target busy-polls its CQ (drives progress for FI_PROGRESS_MANUAL providers such as
 * tcp;ofi_rxm) until the origin is done.
 *
 * Patterns (origin side, each op waits for its completion unless stated):
 *   put_lat   fi_write  (FI_DELIVERY_COMPLETE by default, = MPI_Put+flush) sizes 8 64 1K 64K 1M
 *   get_lat   fi_read                                                    sizes 8 64 1K 64K 1M
 *   put_bw    64 x fi_write back to back, then wait for all 64            sizes 8 1K 64K 1M
 *   acc_lat   fi_atomic FI_SUM FI_DOUBLE, 1 element
 *   acc_bw    1024 x fi_atomic FI_SUM FI_DOUBLE, then wait for all
 *   fop_lat   fi_fetch_atomic FI_SUM FI_INT64
 *   cas_lat   fi_compare_atomic FI_CSWAP FI_INT64
 * Method: warm-up, calibration, iters = min(N, T/est) (T = 0.5 s, N = 10000), 5 repetitions,
 * median per-op time.  Output lines match mpi_rma_bench.c:
 *   op=<name> size=<bytes> iters=<n> lat_us=<median> bw_MBps=<..> rate_Mops=<..> lat_min_us lat_max_us reps
 *
 * Options: -p <provider> (else $FI_PROVIDER, else first RDM provider with FI_RMA|FI_ATOMIC)
 *          -c cq|cntr   completion via fi_cq_read (default) or fi_cntr_read
 *          -t           FI_TRANSMIT_COMPLETE instead of FI_DELIVERY_COMPLETE for writes/atomics
 *          -i           fi_inject_write for puts <= tx inject_size, completion by counter (implies -c cntr);
 *                       this is the small-put path MPICH ch4:ofi uses (fi_inject_write + counter flush)
 * A "visibility" check (2000 x 8-byte put, then the target reads the word without progressing
 * libfabric) reports whether origin-side completion really implied the data was in target memory.
 *          -T <sec> -r <reps> -N <max iters> -o <ops,..> -x <ops,..>  -B (no CPU pinning)
 *          -P manual|auto|unspec  requested data/control progress (default manual, as MPICH ch4:ofi
 *             asks for; falls back to the provider's default if refused).  With the sockets provider
 *             "auto" (its default) means a provider progress thread and ~10 ms per op here.
 *
 * Build: gcc -O2 -o fi_rma_raw fi_rma_raw.c -lfabric
 * Run:   FI_PROVIDER=tcp ./fi_rma_raw      (also sockets, shm, udp)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define MAXSZ (1 << 20)
#define BW_WINDOW 64
#define ACC_BW_N 1024
#define MAXREPS 64
#define OFF_ACC (MAXSZ + 0)
#define OFF_FOP (MAXSZ + 64)
#define OFF_CAS (MAXSZ + 128)
#define OFF_CHK (MAXSZ + 256)
#define WIN_BYTES (MAXSZ + 4096)
#define MAX_INFLIGHT 1024

struct ctl { /* shared between the two processes (MAP_SHARED before fork) */
    volatile int arrive[2];
    volatile int stop;
    volatile int fail;
    volatile int pattern_ready, pattern_ok;
    size_t addrlen[2];
    char addr[2][256];
    uint64_t win_addr, win_key;
    volatile int published;
    volatile long vis_seq, vis_ack, vis_stale; /* completion-implies-visibility probe */
};

static struct ctl *ctl;
static int rank;
static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_ep *ep;
static struct fid_cq *cq;
static struct fid_cntr *cntr;
static struct fid_mr *mr_win, *mr_loc;
static fi_addr_t peer;
static char *win, *loc; /* win: exposed (target); loc: local buffers (origin) */
static void *loc_desc;
static uint64_t rbase, rkey; /* remote address base (VA or 0) and key */
static uint64_t op_flags = FI_DELIVERY_COMPLETE;
static int use_cntr = 0;
static int use_inject = 0; /* -i: fi_inject_write for puts <= inject_size (needs -c cntr), as MPICH does */
static size_t inject_max = 0;
static uint64_t cntr_expected = 0;
static double opt_T = 0.5;
static int opt_reps = 5;
static long opt_maxiter = 10000;
static const char *opt_ops, *opt_skip, *opt_prov;
static int opt_bind = 1;
static const char *opt_progress = "manual"; /* -P manual|auto|unspec: requested data/control progress */
static struct fi_context ctxs[MAX_INFLIGHT];

/* local buffer layout */
#define L_OBUF 0
#define L_RBUF MAXSZ
#define L_SMALL (2 * MAXSZ)
#define LOC_BYTES (2 * MAXSZ + 4096)

#define CHK(x)                                                                                          \
    do {                                                                                                \
        int _r = (int)(x);                                                                              \
        if (_r) {                                                                                       \
            fprintf(stderr, "rank %d: %s failed: %d (%s) at line %d\n", rank, #x, _r, fi_strerror(-_r), \
                    __LINE__);                                                                          \
            ctl->fail = 1;                                                                              \
            exit(2);                                                                                    \
        }                                                                                               \
    } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    const char *p = list;
    while (p && *p) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && strncmp(p, name, n) == 0) return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}
static int want(const char *name)
{
    if (opt_ops && !in_list(opt_ops, name)) return 0;
    if (opt_skip && in_list(opt_skip, name)) return 0;
    return 1;
}

/* ---- completion handling ---- */
static void cq_error(void)
{
    struct fi_cq_err_entry err;
    memset(&err, 0, sizeof err);
    fi_cq_readerr(cq, &err, 0);
    fprintf(stderr, "rank %d: cq error: %s (prov_errno %d: %s)\n", rank, fi_strerror(err.err), err.prov_errno,
            fi_cq_strerror(cq, err.prov_errno, err.err_data, NULL, 0));
    ctl->fail = 1;
    exit(3);
}

/* progress once; returns number of completions reaped (cq mode) */
static long progress(void)
{
    if (use_cntr) {
        fi_cntr_read(cntr); /* drives progress for manual-progress providers */
        return 0;
    }
    struct fi_cq_entry ent[64];
    ssize_t n = fi_cq_read(cq, ent, 64);
    if (n > 0) return n;
    if (n == -FI_EAGAIN) return 0;
    if (n == -FI_EAVAIL) cq_error();
    fprintf(stderr, "rank %d: fi_cq_read: %zd %s\n", rank, n, fi_strerror((int)-n));
    exit(3);
}

/* wait until `n` more operations have completed */
static long outstanding_done; /* completions reaped but not yet consumed (cq mode) */
static void wait_n(long n)
{
    if (use_cntr) {
        cntr_expected += n;
        for (;;) {
            uint64_t v = fi_cntr_read(cntr);
            if (v >= cntr_expected) return;
            if (fi_cntr_readerr(cntr)) {
                fprintf(stderr, "rank %d: counter error\n", rank);
                ctl->fail = 1;
                exit(3);
            }
        }
    }
    while (outstanding_done < n) outstanding_done += progress();
    outstanding_done -= n;
}

/* post with retry on -FI_EAGAIN */
#define POST(call)                                                                                  \
    do {                                                                                            \
        ssize_t _r;                                                                                 \
        while ((_r = (call)) == -FI_EAGAIN) outstanding_done += progress();                         \
        if (_r) {                                                                                   \
            fprintf(stderr, "rank %d: %s: %zd (%s)\n", rank, #call, _r, fi_strerror((int)-_r));      \
            ctl->fail = 1;                                                                          \
            exit(4);                                                                                \
        }                                                                                           \
    } while (0)

static ssize_t do_write(void *buf, size_t len, uint64_t roff, void *ctx)
{
    if (use_inject && len <= inject_max)
        return fi_inject_write(ep, buf, len, peer, rbase + roff, rkey);
    struct iovec iov = {buf, len};
    struct fi_rma_iov riov = {rbase + roff, len, rkey};
    struct fi_msg_rma msg = {&iov, &loc_desc, 1, peer, &riov, 1, ctx, 0};
    return fi_writemsg(ep, &msg, op_flags | (use_cntr ? 0 : FI_COMPLETION));
}
static ssize_t do_read(void *buf, size_t len, uint64_t roff, void *ctx)
{
    return fi_read(ep, buf, len, loc_desc, peer, rbase + roff, rkey, ctx);
}
static ssize_t do_atomic(void *buf, enum fi_datatype dt, enum fi_op op, uint64_t roff, void *ctx)
{
    struct fi_ioc ioc = {buf, 1};
    struct fi_rma_ioc rioc = {rbase + roff, 1, rkey};
    struct fi_msg_atomic msg = {&ioc, &loc_desc, 1, peer, &rioc, 1, dt, op, ctx, 0};
    return fi_atomicmsg(ep, &msg, op_flags | (use_cntr ? 0 : FI_COMPLETION));
}

/* ---- shared-memory barrier (progresses the endpoint while waiting) ---- */
static void barrier(void)
{
    int me = __atomic_add_fetch(&ctl->arrive[rank], 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&ctl->arrive[1 - rank], __ATOMIC_SEQ_CST) < me) {
        if (ctl->fail) exit(5);
        progress();
    }
}

/* ---- tests (origin only) ---- */
typedef double (*testfn)(long iters, int size);

static double t_put_lat(long iters, int size)
{
    double t0 = now();
    for (long i = 0; i < iters; i++) {
        POST(do_write(loc + L_OBUF, size, 0, &ctxs[0]));
        wait_n(1);
    }
    return now() - t0;
}
static double t_get_lat(long iters, int size)
{
    double t0 = now();
    for (long i = 0; i < iters; i++) {
        POST(do_read(loc + L_RBUF, size, 0, &ctxs[0]));
        wait_n(1);
    }
    return now() - t0;
}
static double t_put_bw(long iters, int size)
{
    double t0 = now();
    for (long i = 0; i < iters; i++) {
        for (int w = 0; w < BW_WINDOW; w++) POST(do_write(loc + L_OBUF, size, 0, &ctxs[w]));
        wait_n(BW_WINDOW);
    }
    return now() - t0;
}
static double t_acc_lat(long iters, int size)
{
    (void)size;
    double *one = (double *)(loc + L_SMALL);
    *one = 1.0;
    double t0 = now();
    for (long i = 0; i < iters; i++) {
        POST(do_atomic(one, FI_DOUBLE, FI_SUM, OFF_ACC, &ctxs[0]));
        wait_n(1);
    }
    return now() - t0;
}
static double t_acc_bw(long iters, int size)
{
    (void)size;
    double *one = (double *)(loc + L_SMALL);
    *one = 1.0;
    double t0 = now();
    for (long i = 0; i < iters; i++) {
        for (int k = 0; k < ACC_BW_N; k++) POST(do_atomic(one, FI_DOUBLE, FI_SUM, OFF_ACC, &ctxs[k]));
        wait_n(ACC_BW_N);
    }
    return now() - t0;
}
static double t_fop_lat(long iters, int size)
{
    (void)size;
    int64_t *one = (int64_t *)(loc + L_SMALL + 8), *res = (int64_t *)(loc + L_SMALL + 16);
    *one = 1;
    double t0 = now();
    for (long i = 0; i < iters; i++) {
        POST(fi_fetch_atomic(ep, one, 1, loc_desc, res, loc_desc, peer, rbase + OFF_FOP, rkey, FI_INT64, FI_SUM,
                             &ctxs[0]));
        wait_n(1);
    }
    return now() - t0;
}
static double t_cas_lat(long iters, int size)
{
    (void)size;
    int64_t *val = (int64_t *)(loc + L_SMALL + 24), *cmp = (int64_t *)(loc + L_SMALL + 32),
            *res = (int64_t *)(loc + L_SMALL + 40);
    *cmp = 0;
    double t0 = now();
    for (long i = 0; i < iters; i++) {
        *val = i + 1;
        POST(fi_compare_atomic(ep, val, 1, loc_desc, cmp, loc_desc, res, loc_desc, peer, rbase + OFF_CAS, rkey,
                               FI_INT64, FI_CSWAP, &ctxs[0]));
        wait_n(1);
        *cmp = (*res == *cmp) ? *val : *res;
    }
    return now() - t0;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void run_test(const char *name, testfn fn, int size, int ops_per_iter, int bytes_per_op)
{
    if (!want(name)) return;
    long warm = size >= 65536 ? 4 : 50;
    if (ops_per_iter > 1) warm = size >= 65536 ? 2 : 5;
    fn(warm, size);
    long c = 1;
    double t;
    for (;;) {
        t = fn(c, size);
        if (t > 0.02 || c >= opt_maxiter) break;
        c = c * 4 > opt_maxiter ? opt_maxiter : c * 4;
    }
    double per = t / (double)c;
    long iters = per > 0 ? (long)(opt_T / per) : opt_maxiter;
    if (iters > opt_maxiter) iters = opt_maxiter;
    if (iters < 3) iters = 3;
    double s[MAXREPS];
    for (int r = 0; r < opt_reps; r++) s[r] = fn(iters, size) / ((double)iters * ops_per_iter);
    qsort(s, opt_reps, sizeof(double), cmpd);
    double med = (opt_reps % 2) ? s[opt_reps / 2] : 0.5 * (s[opt_reps / 2 - 1] + s[opt_reps / 2]);
    printf("op=%s size=%d iters=%ld lat_us=%.3f bw_MBps=%.2f rate_Mops=%.4f lat_min_us=%.3f lat_max_us=%.3f reps=%d\n",
           name, size, iters, med * 1e6, (double)bytes_per_op / med / 1e6, 1e-6 / med, s[0] * 1e6,
           s[opt_reps - 1] * 1e6, opt_reps);
    fflush(stdout);
}

static char checks[128];
static int check(char *why, size_t whylen)
{
    int ok = 1;
    if (want("put_lat") || want("get_lat") || want("put_bw")) {
        strcat(checks, "putget,");
        for (int i = 0; i < MAXSZ; i++) loc[L_OBUF + i] = (char)(i * 7 + 3);
        POST(do_write(loc + L_OBUF, MAXSZ, 0, &ctxs[0]));
        wait_n(1);
        /* with FI_DELIVERY_COMPLETE the data must already be visible at the target */
        __atomic_store_n(&ctl->pattern_ready, 1, __ATOMIC_SEQ_CST);
        while (!__atomic_load_n(&ctl->pattern_ok, __ATOMIC_SEQ_CST)) progress();
        if (ctl->pattern_ok != 1) { ok = 0; snprintf(why, whylen, "target-side 1MiB pattern mismatch after completion"); }
        memset(loc + L_RBUF, 0, MAXSZ);
        POST(do_read(loc + L_RBUF, MAXSZ, 0, &ctxs[0]));
        wait_n(1);
        if (memcmp(loc + L_OBUF, loc + L_RBUF, MAXSZ)) { ok = 0; snprintf(why, whylen, "put/get 1MiB mismatch"); }
    }
    if (want("put_lat")) {
        /* After a put's completion, is the data already in target memory?  The target reads it
         * without driving any libfabric progress in between; "stale" counts reads that saw old data. */
        strcat(checks, "visibility,");
        int64_t *v = (int64_t *)(loc + L_SMALL + 256);
        const long NV = 2000;
        for (long k = 1; k <= NV; k++) {
            *v = k;
            POST(do_write(v, 8, OFF_CHK + 64, &ctxs[0]));
            wait_n(1);
            __atomic_store_n(&ctl->vis_seq, k, __ATOMIC_SEQ_CST);
            while (__atomic_load_n(&ctl->vis_ack, __ATOMIC_SEQ_CST) != k) progress();
        }
        printf("# visibility probe: %ld of %ld 8-byte puts not yet visible at target right after origin "
               "completion (%s%s)\n", ctl->vis_stale, NV, use_inject ? "fi_inject_write+" : "fi_writemsg+",
               use_cntr ? "cntr" : "cq");
        if (ctl->vis_stale) { ok = 0; snprintf(why, whylen, "put completion before remote visibility (%ld/%ld)", ctl->vis_stale, NV); }
    }
    const int N = 1000;
    int64_t *i64 = (int64_t *)(loc + L_SMALL + 64); /* [0]=operand [1]=compare [2]=result */
    double *d = (double *)(loc + L_SMALL + 128);    /* [0]=operand [1]=result */
    if (want("acc_lat") || want("acc_bw")) {
        strcat(checks, "acc,");
        d[0] = 0.0;
        POST(do_write(&d[0], 8, OFF_CHK, &ctxs[0]));
        wait_n(1);
        d[0] = 1.0;
        for (int i = 0; i < N; i++) POST(do_atomic(&d[0], FI_DOUBLE, FI_SUM, OFF_CHK, &ctxs[i % MAX_INFLIGHT]));
        wait_n(N);
        d[1] = -1;
        POST(fi_fetch_atomic(ep, &d[0], 1, loc_desc, &d[1], loc_desc, peer, rbase + OFF_CHK, rkey, FI_DOUBLE,
                             FI_ATOMIC_READ, &ctxs[0]));
        wait_n(1);
        if (d[1] != (double)N) { ok = 0; snprintf(why, whylen, "acc: got %g want %d", d[1], N); }
    }
    if (want("fop_lat")) {
        strcat(checks, "fop,");
        i64[0] = 0;
        POST(do_write(&i64[0], 8, OFF_CHK + 8, &ctxs[0]));
        wait_n(1);
        i64[0] = 1;
        for (int i = 0; i < N; i++) {
            POST(fi_fetch_atomic(ep, &i64[0], 1, loc_desc, &i64[2], loc_desc, peer, rbase + OFF_CHK + 8, rkey,
                                 FI_INT64, FI_SUM, &ctxs[0]));
            wait_n(1);
            if (i64[2] != i) { ok = 0; snprintf(why, whylen, "fop step %d got %" PRId64, i, i64[2]); break; }
        }
        POST(fi_fetch_atomic(ep, &i64[0], 1, loc_desc, &i64[2], loc_desc, peer, rbase + OFF_CHK + 8, rkey, FI_INT64,
                             FI_ATOMIC_READ, &ctxs[0]));
        wait_n(1);
        if (i64[2] != N) { ok = 0; snprintf(why, whylen, "fop final %" PRId64, i64[2]); }
    }
    if (want("cas_lat")) {
        strcat(checks, "cas,");
        i64[0] = 5;
        POST(do_write(&i64[0], 8, OFF_CHK + 16, &ctxs[0]));
        wait_n(1);
        int64_t expect[2] = {5, 7}, swapv[2] = {7, 9};
        for (int k = 0; k < 2; k++) {
            i64[0] = swapv[k];
            i64[1] = 5;
            POST(fi_compare_atomic(ep, &i64[0], 1, loc_desc, &i64[1], loc_desc, &i64[2], loc_desc, peer,
                                   rbase + OFF_CHK + 16, rkey, FI_INT64, FI_CSWAP, &ctxs[0]));
            wait_n(1);
            if (i64[2] != expect[k]) { ok = 0; snprintf(why, whylen, "cas%d got %" PRId64, k, i64[2]); }
        }
    }
    size_t l = strlen(checks);
    if (l) checks[l - 1] = 0;
    return ok;
}

/* ---- setup ---- */
static void setup(void)
{
    struct fi_info *hints = fi_allocinfo();
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    hints->mode = FI_CONTEXT;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->tx_attr->op_flags = op_flags;
    const char *prov = opt_prov ? opt_prov : getenv("FI_PROVIDER");
    if (prov) hints->fabric_attr->prov_name = strdup(prov);
    enum fi_progress pm = FI_PROGRESS_UNSPEC;
    if (!strcmp(opt_progress, "manual")) pm = FI_PROGRESS_MANUAL;
    else if (!strcmp(opt_progress, "auto")) pm = FI_PROGRESS_AUTO;
    hints->domain_attr->data_progress = pm;
    hints->domain_attr->control_progress = pm;
    int r = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
    if (r && pm != FI_PROGRESS_UNSPEC) { /* provider cannot do the requested mode: take what it offers */
        hints->domain_attr->data_progress = FI_PROGRESS_UNSPEC;
        hints->domain_attr->control_progress = FI_PROGRESS_UNSPEC;
        r = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
    }
    if (r) {
        fprintf(stderr, "rank %d: fi_getinfo(prov=%s): %d %s\n", rank, prov ? prov : "(any)", r, fi_strerror(-r));
        ctl->fail = 1;
        exit(2);
    }
    fi_freeinfo(hints);
    inject_max = info->tx_attr->inject_size;
    CHK(fi_fabric(info->fabric_attr, &fabric, NULL));
    CHK(fi_domain(fabric, info, &domain, NULL));
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    CHK(fi_av_open(domain, &av_attr, &av, NULL));
    CHK(fi_endpoint(domain, info, &ep, NULL));
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT, .size = 4096, .wait_obj = FI_WAIT_NONE};
    CHK(fi_cq_open(domain, &cq_attr, &cq, NULL));
    CHK(fi_ep_bind(ep, &av->fid, 0));
    CHK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV | (use_cntr ? FI_SELECTIVE_COMPLETION : 0)));
    if (use_cntr) {
        struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
        CHK(fi_cntr_open(domain, &ca, &cntr, NULL));
        CHK(fi_ep_bind(ep, &cntr->fid, FI_WRITE | FI_READ));
    }
    CHK(fi_enable(ep));

    uint64_t mrm = info->domain_attr->mr_mode;
    win = aligned_alloc(4096, WIN_BYTES);
    loc = aligned_alloc(4096, LOC_BYTES);
    memset(win, 0, WIN_BYTES);
    memset(loc, 1, LOC_BYTES);
    CHK(fi_mr_reg(domain, win, WIN_BYTES, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1 + rank * 2, 0, &mr_win, NULL));
    CHK(fi_mr_reg(domain, loc, LOC_BYTES, FI_READ | FI_WRITE, 0, 2 + rank * 2, 0, &mr_loc, NULL));
    if (mrm & FI_MR_ENDPOINT) {
        CHK(fi_mr_bind(mr_win, &ep->fid, 0));
        CHK(fi_mr_enable(mr_win));
        CHK(fi_mr_bind(mr_loc, &ep->fid, 0));
        CHK(fi_mr_enable(mr_loc));
    }
    loc_desc = fi_mr_desc(mr_loc);

    size_t len = sizeof ctl->addr[0];
    CHK(fi_getname(&ep->fid, ctl->addr[rank], &len));
    ctl->addrlen[rank] = len;
    if (rank == 1) {
        ctl->win_addr = (mrm & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)win : 0;
        ctl->win_key = fi_mr_key(mr_win);
    }
    __atomic_add_fetch(&ctl->published, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&ctl->published, __ATOMIC_SEQ_CST) < 2)
        if (ctl->fail) exit(5);
    if (fi_av_insert(av, ctl->addr[1 - rank], 1, &peer, 0, NULL) != 1) {
        fprintf(stderr, "rank %d: fi_av_insert failed\n", rank);
        ctl->fail = 1;
        exit(2);
    }
    rbase = ctl->win_addr;
    rkey = ctl->win_key;
}

/* Skip list extended with the ops whose atomic the provider cannot do. */
static char skip_buf[512];
static void skip_ops(const char *ops, const char *what, int r)
{
    printf("# skipped %s: %s = %d %s (provider %s)\n", ops, what, r, r ? fi_strerror(-r) : "count 0",
           info->fabric_attr->prov_name);
    snprintf(skip_buf + strlen(skip_buf), sizeof skip_buf - strlen(skip_buf), "%s%s",
             skip_buf[0] ? "," : "", ops);
}

static void check_atomic_valid(void)
{
    size_t cnt;
    int r;
    if (opt_skip) snprintf(skip_buf, sizeof skip_buf, "%s", opt_skip);
    if ((r = fi_atomicvalid(ep, FI_DOUBLE, FI_SUM, &cnt)) || cnt == 0)
        skip_ops("acc_lat,acc_bw", "fi_atomicvalid(FI_DOUBLE,FI_SUM)", r);
    if ((r = fi_fetch_atomicvalid(ep, FI_INT64, FI_SUM, &cnt)) || cnt == 0)
        skip_ops("fop_lat", "fi_fetch_atomicvalid(FI_INT64,FI_SUM)", r);
    if ((r = fi_compare_atomicvalid(ep, FI_INT64, FI_CSWAP, &cnt)) || cnt == 0)
        skip_ops("cas_lat", "fi_compare_atomicvalid(FI_INT64,FI_CSWAP)", r);
    if (skip_buf[0]) opt_skip = skip_buf;
}

static int child(int r)
{
    rank = r;
    if (opt_bind) {
        cpu_set_t set;
        CPU_ZERO(&set);
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        CPU_SET(ncpu > 1 ? r : 0, &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    setup();
    if (rank == 0) {
        printf("# fi_rma_raw prov=%s fabric=%s domain=%s mr_mode=0x%" PRIx64 " data_progress=%d ctrl_progress=%d (requested %s) "
               "completion=%s%s inject_size=%zu op_flags=%s T=%.2f reps=%d maxiter=%ld bind=%d libfabric=%u.%u\n",
               info->fabric_attr->prov_name, info->fabric_attr->name, info->domain_attr->name,
               (uint64_t)info->domain_attr->mr_mode, info->domain_attr->data_progress,
               info->domain_attr->control_progress, opt_progress, use_cntr ? "cntr" : "cq",
               use_inject ? "+inject_write" : "", inject_max,
               (op_flags & FI_DELIVERY_COMPLETE) ? "FI_DELIVERY_COMPLETE" : "FI_TRANSMIT_COMPLETE", opt_T, opt_reps,
               opt_maxiter, opt_bind, FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
        check_atomic_valid();
        fflush(stdout);
    }
    barrier();
    if (rank == 0) {
        const int lat_sizes[] = {8, 64, 1024, 65536, 1 << 20};
        const int bw_sizes[] = {8, 1024, 65536, 1 << 20};
        for (int i = 0; i < 5; i++) run_test("put_lat", t_put_lat, lat_sizes[i], 1, lat_sizes[i]);
        for (int i = 0; i < 5; i++) run_test("get_lat", t_get_lat, lat_sizes[i], 1, lat_sizes[i]);
        for (int i = 0; i < 4; i++) run_test("put_bw", t_put_bw, bw_sizes[i], BW_WINDOW, bw_sizes[i]);
        run_test("acc_lat", t_acc_lat, 8, 1, 8);
        run_test("acc_bw", t_acc_bw, 8, ACC_BW_N, 8);
        run_test("fop_lat", t_fop_lat, 8, 1, 8);
        run_test("cas_lat", t_cas_lat, 8, 1, 8);
        char why[256] = "";
        int ok = check(why, sizeof why);
        printf("check=%s checked=%s%s%s\n", ok ? "ok" : "FAIL", checks[0] ? checks : "none", ok ? "" : " why=",
               ok ? "" : why);
        fflush(stdout);
        __atomic_store_n(&ctl->stop, 1, __ATOMIC_SEQ_CST);
    } else {
        /* target: drive progress until told to stop; verify the pattern when asked */
        while (!__atomic_load_n(&ctl->stop, __ATOMIC_SEQ_CST)) {
            if (ctl->fail) exit(5);
            progress();
            long vs = __atomic_load_n(&ctl->vis_seq, __ATOMIC_SEQ_CST);
            if (vs != ctl->vis_ack) {
                int64_t seen = *(volatile int64_t *)(win + OFF_CHK + 64);
                if (seen != vs) ctl->vis_stale++;
                __atomic_store_n(&ctl->vis_ack, vs, __ATOMIC_SEQ_CST);
            }
            if (__atomic_load_n(&ctl->pattern_ready, __ATOMIC_SEQ_CST) == 1) {
                int good = 1;
                for (int i = 0; i < MAXSZ; i++)
                    if (win[i] != (char)(i * 7 + 3)) { good = 0; break; }
                ctl->pattern_ready = 2;
                __atomic_store_n(&ctl->pattern_ok, good ? 1 : 2, __ATOMIC_SEQ_CST);
            }
        }
    }
    barrier();
    fi_close(&mr_loc->fid);
    fi_close(&mr_win->fid);
    fi_close(&ep->fid);
    if (cntr) fi_close(&cntr->fid);
    fi_close(&cq->fid);
    fi_close(&av->fid);
    fi_close(&domain->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(info);
    return 0;
}

int main(int argc, char **argv)
{
    int c;
    while ((c = getopt(argc, argv, "p:c:itT:r:N:o:x:BP:h")) != -1) {
        switch (c) {
        case 'p': opt_prov = optarg; break;
        case 'c': use_cntr = strcmp(optarg, "cntr") == 0; break;
        case 't': op_flags = FI_TRANSMIT_COMPLETE; break;
        case 'i': use_inject = 1; use_cntr = 1; break;
        case 'T': opt_T = atof(optarg); break;
        case 'r': opt_reps = atoi(optarg); break;
        case 'N': opt_maxiter = atol(optarg); break;
        case 'o': opt_ops = optarg; break;
        case 'x': opt_skip = optarg; break;
        case 'B': opt_bind = 0; break;
        case 'P': opt_progress = optarg; break;
        default:
            fprintf(stderr, "usage: %s [-p prov] [-c cq|cntr] [-i] [-t] [-T sec] [-r reps] [-N iters] [-o ops] [-x ops] [-B] [-P manual|auto|unspec]\n",
                    argv[0]);
            return 1;
        }
    }
    if (opt_reps < 1) opt_reps = 1;
    if (opt_reps > MAXREPS) opt_reps = MAXREPS;
    ctl = mmap(NULL, sizeof *ctl, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ctl == MAP_FAILED) { perror("mmap"); return 1; }
    memset(ctl, 0, sizeof *ctl);
    fflush(stdout);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] == 0) _exit(child(r));
        if (pids[r] < 0) { perror("fork"); return 1; }
    }
    int rc = 0;
    for (int r = 0; r < 2; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) {
            fprintf(stderr, "rank %d exited abnormally (status 0x%x)\n", r, st);
            ctl->fail = 1;
            rc = 1;
        }
    }
    return rc;
}
