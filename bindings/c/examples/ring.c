/* A ring over the onesided C API: every rank puts a block to its right
 * neighbour and gets one from its left (fence epochs), every rank adds to
 * a counter on rank 0 (accumulate, fetch_and_op, lock_all), and ranks take
 * an exclusive lock on rank 0 in turn to append to a log (lock/unlock,
 * compare_and_swap), each rank puts to its right neighbour in a
 * post/start/complete/wait epoch, and broadcast, allreduce and allgather
 * are checked, then a window over the program's own memory and a dynamic
 * window, request-based rput/rget/raccumulate and a node-shared window
 * read through its pointers, a halo exchange of strided columns with
 * layouts (MPI's derived datatypes), from memory of onesided_alloc_mem and
 * from the window itself, window hints and attributes,
 * rget_accumulate with request sets (waitany/testany/testall/waitall) and
 * get_accumulate with layouts, put_signal/wait_until, then groups: the ranks split by parity, each
 * half sums its ranks and runs a ring of puts over a window of its own,
 * and the even ranks form a subgroup from a rank list. Every byte is
 * checked; exit status 0 means it all
 * held. Error paths a C caller meets are checked too (wrong datatype,
 * NULL buffer, out of window, stale handle), each followed by a correct
 * call that must still work.
 *
 * With RING_ABORT set, it only shows onesided_abort (MPI_Abort): rank 1
 * ends the whole job with exit status 5 while the others wait in a
 * barrier, which must never return.
 *
 *   cc ring.c $(pkg-config --cflags --libs onesided) -o ring
 *   onesided-run -n 4 ./ring
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onesided.h"

#define N 1024 /* elements per block */

static size_t me, n;

static void check(int rc, const char *what, int line)
{
    if (rc != ONESIDED_SUCCESS) {
        char msg[512];
        onesided_last_error(msg, sizeof msg);
        fprintf(stderr, "[%zu] line %d: %s failed: %s: %s\n", me, line, what,
                onesided_error_name(rc), msg);
        exit(1);
    }
}
#define CHECK(call) check((call), #call, __LINE__)

static void expect(int rc, int want, const char *what, int line)
{
    if (rc != want) {
        fprintf(stderr, "[%zu] line %d: %s returned %s, expected %s\n", me, line,
                what, onesided_error_name(rc), onesided_error_name(want));
        exit(1);
    }
}
#define EXPECT(call, want) expect((call), (want), #call, __LINE__)

static uint64_t value(size_t origin, size_t i) { return (uint64_t)origin * 1000003u + i * 7u + 1u; }

int main(void)
{
    onesided_world_t world = 0;
    CHECK(onesided_init(&world));
    CHECK(onesided_rank(world, &me));
    CHECK(onesided_size(world, &n));
    size_t right = (me + 1) % n, left = (me + n - 1) % n;

    if (getenv("RING_ABORT")) {
        CHECK(onesided_barrier(world));
        if (me == 1)
            onesided_abort(world, 5); /* does not return */
        int rc = onesided_barrier(world);
        printf("[%zu] was not ended by the abort (barrier: %s)\n", me, onesided_error_name(rc));
        return 1;
    }

    /* 1. put to the right neighbour, get from the left one: fences. */
    onesided_win_t win = 0;
    CHECK(onesided_win_allocate(world, ONESIDED_UINT64, 2 * N, &win));
    uint64_t *mine = malloc(N * sizeof *mine), *got = malloc(N * sizeof *got);
    if (!mine || !got)
        return 2;
    for (size_t i = 0; i < N; i++)
        mine[i] = value(me, i);
    CHECK(onesided_win_write_local(win, ONESIDED_UINT64, N, mine, N));
    CHECK(onesided_fence(win, ONESIDED_MODE_NOPRECEDE));
    CHECK(onesided_put(win, ONESIDED_UINT64, mine, N, right, 0));
    CHECK(onesided_get(win, ONESIDED_UINT64, got, N, left, N));
    CHECK(onesided_fence(win, ONESIDED_MODE_NOSUCCEED));
    for (size_t i = 0; i < N; i++) {
        if (got[i] != value(left, i)) {
            fprintf(stderr, "[%zu] get from %zu: element %zu is %" PRIu64 "\n", me, left, i, got[i]);
            return 1;
        }
    }
    memset(got, 0, N * sizeof *got);
    CHECK(onesided_win_read_local(win, ONESIDED_UINT64, 0, got, N));
    for (size_t i = 0; i < N; i++) {
        if (got[i] != value(left, i)) {
            fprintf(stderr, "[%zu] put from %zu: element %zu is %" PRIu64 "\n", me, left, i, got[i]);
            return 1;
        }
    }

    /* Mistakes get an error code and lose nothing. */
    CHECK(onesided_lock_all(win, 0));
    EXPECT(onesided_put(win, ONESIDED_DOUBLE, mine, 1, right, 0), ONESIDED_ERR_TYPE);
    EXPECT(onesided_put(win, ONESIDED_UINT64, NULL, 1, right, 0), ONESIDED_ERR_ARG);
    EXPECT(onesided_put(win, ONESIDED_UINT64, mine, 2, right, 2 * N - 1), ONESIDED_ERR_OUT_OF_WINDOW);
    EXPECT(onesided_put(win, ONESIDED_UINT64, mine, 1, n, 0), ONESIDED_ERR_ARG);
    EXPECT(onesided_win_free(win), ONESIDED_ERR_EPOCH);
    uint64_t probe = 0;
    CHECK(onesided_get(win, ONESIDED_UINT64, &probe, 1, right, N));
    if (probe != value(right, 0)) {
        fprintf(stderr, "[%zu] get after errors: %" PRIu64 "\n", me, probe);
        return 1;
    }
    CHECK(onesided_unlock_all(win));
    CHECK(onesided_win_free(win));
    EXPECT(onesided_flush(win, 0), ONESIDED_ERR_HANDLE);

    /* 2. a counter on rank 0: accumulate and fetch_and_op in lock_all. */
    onesided_win_t ctr = 0;
    CHECK(onesided_win_allocate(world, ONESIDED_INT64, 2, &ctr));
    CHECK(onesided_barrier(world));
    CHECK(onesided_lock_all(ctr, 0));
    const int64_t one = 1;
    int64_t old = -1;
    for (int k = 0; k < 100; k++) {
        CHECK(onesided_accumulate(ctr, ONESIDED_INT64, &one, 1, 0, 0, ONESIDED_SUM));
        CHECK(onesided_fetch_and_op(ctr, ONESIDED_INT64, &one, &old, 0, 1, ONESIDED_SUM));
        if (old < 0 || old >= (int64_t)(100 * n)) {
            fprintf(stderr, "[%zu] fetch_and_op returned %" PRId64 "\n", me, old);
            return 1;
        }
    }
    CHECK(onesided_unlock_all(ctr));
    CHECK(onesided_barrier(world));
    if (me == 0) {
        int64_t c[2];
        CHECK(onesided_win_read_local(ctr, ONESIDED_INT64, 0, c, 2));
        if (c[0] != 100 * (int64_t)n || c[1] != 100 * (int64_t)n) {
            fprintf(stderr, "[0] counters %" PRId64 " %" PRId64 ", want %zu\n", c[0], c[1], 100 * n);
            return 1;
        }
    }
    CHECK(onesided_win_free(ctr));

    /* 3. a log on rank 0 under exclusive locks: slot 0 is the next free
     * index, claimed by compare_and_swap; each rank appends its rank. */
    onesided_win_t log = 0;
    CHECK(onesided_win_allocate(world, ONESIDED_INT32, 1 + 4 * n, &log));
    CHECK(onesided_barrier(world));
    for (int k = 0; k < 4; k++) {
        CHECK(onesided_lock(log, ONESIDED_LOCK_EXCLUSIVE, 0, 0));
        int32_t next = 0, prev = -1;
        CHECK(onesided_get(log, ONESIDED_INT32, &next, 1, 0, 0));
        CHECK(onesided_flush(log, 0));
        int32_t bumped = next + 1;
        CHECK(onesided_compare_and_swap(log, ONESIDED_INT32, &next, &bumped, &prev, 0, 0));
        if (prev != next) {
            fprintf(stderr, "[%zu] lock not exclusive: slot moved %d -> %d\n", me, next, prev);
            return 1;
        }
        int32_t who = (int32_t)me;
        CHECK(onesided_put(log, ONESIDED_INT32, &who, 1, 0, 1 + (size_t)next));
        CHECK(onesided_unlock(log, 0));
    }
    CHECK(onesided_barrier(world));
    if (me == 0) {
        int32_t *entries = calloc(1 + 4 * n, sizeof *entries);
        size_t *seen = calloc(n, sizeof *seen);
        if (!entries || !seen)
            return 2;
        CHECK(onesided_win_read_local(log, ONESIDED_INT32, 0, entries, 1 + 4 * n));
        if (entries[0] != 4 * (int32_t)n) {
            fprintf(stderr, "[0] log has %d entries, want %zu\n", entries[0], 4 * n);
            return 1;
        }
        for (size_t i = 1; i <= 4 * n; i++) {
            if (entries[i] < 0 || (size_t)entries[i] >= n) {
                fprintf(stderr, "[0] log entry %zu is %d\n", i, entries[i]);
                return 1;
            }
            seen[entries[i]]++;
        }
        for (size_t r = 0; r < n; r++) {
            if (seen[r] != 4) {
                fprintf(stderr, "[0] rank %zu appended %zu times, want 4\n", r, seen[r]);
                return 1;
            }
        }
        free(entries);
        free(seen);
    }
    CHECK(onesided_win_free(log));

    /* 4. post/start/complete/wait: each rank exposes its window to its
     * left neighbour, which puts its rank there; onesided_win_test
     * polls until the epoch is done. */
    onesided_win_t pw = 0;
    CHECK(onesided_win_allocate(world, ONESIDED_INT64, 2, &pw));
    CHECK(onesided_win_post(pw, &left, 1, 0));
    CHECK(onesided_win_start(pw, &right, 1, 0));
    int64_t stamp[2] = {(int64_t)me + 500, -(int64_t)me};
    CHECK(onesided_put(pw, ONESIDED_INT64, stamp, 2, right, 0));
    CHECK(onesided_win_complete(pw));
    int flag = 0;
    while (!flag)
        CHECK(onesided_win_test(pw, &flag));
    int64_t from_left[2] = {0, 0};
    CHECK(onesided_win_read_local(pw, ONESIDED_INT64, 0, from_left, 2));
    if (from_left[0] != (int64_t)left + 500 || from_left[1] != -(int64_t)left) {
        fprintf(stderr, "[%zu] PSCW: got %" PRId64 ",%" PRId64 " from rank %zu\n", me,
                from_left[0], from_left[1], left);
        return 1;
    }
    EXPECT(onesided_win_post(pw, NULL, 1, 0), ONESIDED_ERR_ARG);
    EXPECT(onesided_win_complete(pw), ONESIDED_ERR_EPOCH); /* no access epoch */
    CHECK(onesided_win_post(pw, &left, 1, 0));
    CHECK(onesided_win_start(pw, &right, 1, 0));
    CHECK(onesided_win_complete(pw));
    CHECK(onesided_win_wait(pw));
    CHECK(onesided_win_free(pw));

    /* 5. collectives: broadcast from the last rank, allreduce, allgather. */
    double b[3] = {0, 0, 0};
    if (me == n - 1) {
        b[0] = 1.5;
        b[1] = -2.25;
        b[2] = 1e300;
    }
    CHECK(onesided_broadcast(world, n - 1, ONESIDED_DOUBLE, b, 3));
    if (b[0] != 1.5 || b[1] != -2.25 || b[2] != 1e300) {
        fprintf(stderr, "[%zu] broadcast: %g %g %g\n", me, b[0], b[1], b[2]);
        return 1;
    }
    int32_t red[2] = {(int32_t)me + 1, -(int32_t)me};
    CHECK(onesided_allreduce(world, ONESIDED_INT32, ONESIDED_SUM, red, 2));
    if (red[0] != (int32_t)(n * (n + 1) / 2) || red[1] != -(int32_t)(n * (n - 1) / 2)) {
        fprintf(stderr, "[%zu] allreduce sum: %d %d\n", me, red[0], red[1]);
        return 1;
    }
    uint16_t mx = (uint16_t)(me * 3);
    CHECK(onesided_allreduce(world, ONESIDED_UINT16, ONESIDED_MAX, &mx, 1));
    if (mx != (uint16_t)((n - 1) * 3)) {
        fprintf(stderr, "[%zu] allreduce max: %u\n", me, mx);
        return 1;
    }
    uint64_t pair[2] = {me, me * me}, *all = calloc(2 * n, sizeof *all);
    if (!all)
        return 2;
    CHECK(onesided_allgather(world, ONESIDED_UINT64, pair, 2, all));
    for (size_t r = 0; r < n; r++) {
        if (all[2 * r] != r || all[2 * r + 1] != r * r) {
            fprintf(stderr, "[%zu] allgather: rank %zu gave %" PRIu64 ",%" PRIu64 "\n", me, r,
                    all[2 * r], all[2 * r + 1]);
            return 1;
        }
    }
    free(all);
    EXPECT(onesided_allreduce(world, 99, ONESIDED_SUM, red, 2), ONESIDED_ERR_ARG);
    EXPECT(onesided_allreduce(world, ONESIDED_DOUBLE, ONESIDED_BAND, b, 3), ONESIDED_ERR_ARG);
    CHECK(onesided_barrier(world));

    /* 6. a window over the program's own memory (MPI_Win_create): puts
     * from the left neighbour land in `buf`, read directly after the
     * closing fence. */
    int64_t *buf = calloc(8, sizeof *buf);
    if (!buf)
        return 2;
    onesided_win_t cw = 0;
    EXPECT(onesided_win_create(world, ONESIDED_INT64, NULL, 8, &cw), ONESIDED_ERR_ARG);
    CHECK(onesided_win_create(world, ONESIDED_INT64, buf, 8, &cw));
    CHECK(onesided_fence(cw, 0));
    int64_t row[8];
    for (int i = 0; i < 8; i++)
        row[i] = (int64_t)me * 100 + i;
    CHECK(onesided_put(cw, ONESIDED_INT64, row, 8, right, 0));
    CHECK(onesided_fence(cw, 0));
    for (int i = 0; i < 8; i++) {
        if (buf[i] != (int64_t)left * 100 + i) {
            fprintf(stderr, "[%zu] create: buf[%d] = %" PRId64 "\n", me, i, buf[i]);
            return 1;
        }
    }
    CHECK(onesided_win_free(cw));
    free(buf);

    /* 7. a dynamic window: each rank attaches a region, the displacements
     * are exchanged by allgather, the left neighbour writes into it. */
    onesided_win_t dw = 0;
    CHECK(onesided_win_create_dynamic(world, ONESIDED_UINT32, &dw));
    size_t disp = 0;
    CHECK(onesided_win_attach(dw, ONESIDED_UINT32, 16, &disp));
    EXPECT(onesided_win_attach(dw, ONESIDED_INT32, 16, &disp), ONESIDED_ERR_TYPE);
    uint64_t mydisp = disp, *disps = calloc(n, sizeof *disps);
    if (!disps)
        return 2;
    CHECK(onesided_allgather(world, ONESIDED_UINT64, &mydisp, 1, disps));
    CHECK(onesided_lock_all(dw, 0));
    uint32_t words[16];
    for (int i = 0; i < 16; i++)
        words[i] = (uint32_t)(me * 16 + i);
    CHECK(onesided_put(dw, ONESIDED_UINT32, words, 16, right, (size_t)disps[right]));
    CHECK(onesided_flush(dw, right));
    CHECK(onesided_unlock_all(dw));
    CHECK(onesided_barrier(world));
    uint32_t back[16];
    CHECK(onesided_win_read_local(dw, ONESIDED_UINT32, disp, back, 16));
    for (int i = 0; i < 16; i++) {
        if (back[i] != (uint32_t)(left * 16 + i)) {
            fprintf(stderr, "[%zu] dynamic: word %d = %u\n", me, i, back[i]);
            return 1;
        }
    }
    CHECK(onesided_barrier(world));
    CHECK(onesided_win_detach(dw, disp));
    EXPECT(onesided_win_detach(dw, disp), ONESIDED_ERR_ARG);
    CHECK(onesided_win_free(dw));
    free(disps);

    /* 8. request-based calls: rput to the right neighbour (the window
     * cannot be freed before it is waited for), rget from the left one
     * polled with onesided_test, raccumulate to a counter on rank 0. */
    onesided_win_t rw = 0;
    CHECK(onesided_win_allocate(world, ONESIDED_UINT64, N + 1, &rw));
    CHECK(onesided_fence(rw, 0));
    for (size_t i = 0; i < N; i++)
        mine[i] = value(me, i) ^ 0x5555;
    onesided_request_t rq = 0;
    CHECK(onesided_rput(rw, ONESIDED_UINT64, mine, N, right, 0, &rq));
    memset(mine, 0, N * sizeof *mine); /* the origin may be reused at once */
    EXPECT(onesided_win_free(rw), ONESIDED_ERR_BUSY);
    CHECK(onesided_wait(rq));
    EXPECT(onesided_wait(rq), ONESIDED_ERR_HANDLE);
    uint64_t inc = 1;
    CHECK(onesided_raccumulate(rw, ONESIDED_UINT64, &inc, 1, 0, N, ONESIDED_SUM, &rq));
    CHECK(onesided_wait(rq));
    CHECK(onesided_fence(rw, 0));
    memset(got, 0, N * sizeof *got);
    CHECK(onesided_rget(rw, ONESIDED_UINT64, got, N, left, 0, &rq));
    int done = 0;
    while (!done)
        CHECK(onesided_test(rq, &done));
    /* rank `left` holds what its own left neighbour put */
    size_t leftleft = (left + n - 1) % n;
    for (size_t i = 0; i < N; i++) {
        if (got[i] != (value(leftleft, i) ^ 0x5555)) {
            fprintf(stderr, "[%zu] rget: element %zu is %" PRIu64 "\n", me, i, got[i]);
            return 1;
        }
    }
    EXPECT(onesided_rget(rw, ONESIDED_UINT64, NULL, N, left, 0, &rq), ONESIDED_ERR_ARG);
    EXPECT(onesided_rput(rw, ONESIDED_UINT64, mine, N + 2, right, 0, &rq),
           ONESIDED_ERR_OUT_OF_WINDOW);
    CHECK(onesided_fence(rw, 0));
    if (me == 0) {
        uint64_t count = 0;
        CHECK(onesided_win_read_local(rw, ONESIDED_UINT64, N, &count, 1));
        if (count != n) {
            fprintf(stderr, "[0] raccumulate counter is %" PRIu64 ", want %zu\n", count, n);
            return 1;
        }
    }
    CHECK(onesided_win_free(rw));

    /* 9. a node-shared window: each rank stores into its own segment,
     * then after a fence reads its right neighbour's segment through the
     * pointer onesided_win_shared_query gives (contiguous in rank order). */
    onesided_win_t sw = 0;
    CHECK(onesided_win_allocate_shared(world, ONESIDED_INT64, 4, &sw));
    size_t scount = 0, rcount = 0;
    void *sbase = NULL, *rbase = NULL;
    CHECK(onesided_win_shared_query(sw, me, &scount, &sbase));
    CHECK(onesided_win_shared_query(sw, right, &rcount, &rbase));
    if (scount != 4 || rcount != 4 || !sbase || !rbase) {
        fprintf(stderr, "[%zu] shared_query: %zu/%zu elements\n", me, scount, rcount);
        return 1;
    }
    if (right == me + 1 && (int64_t *)rbase != (int64_t *)sbase + 4) {
        fprintf(stderr, "[%zu] shared segments are not contiguous\n", me);
        return 1;
    }
    CHECK(onesided_fence(sw, 0));
    for (int i = 0; i < 4; i++)
        ((int64_t *)sbase)[i] = (int64_t)me * 10 + i;
    CHECK(onesided_fence(sw, 0));
    for (int i = 0; i < 4; i++) {
        if (((int64_t *)rbase)[i] != (int64_t)right * 10 + i) {
            fprintf(stderr, "[%zu] shared: rank %zu's element %d is %" PRId64 "\n", me, right,
                    i, ((int64_t *)rbase)[i]);
            return 1;
        }
    }
    EXPECT(onesided_win_shared_query(sw, n, &rcount, &rbase), ONESIDED_ERR_ARG);
    CHECK(onesided_fence(sw, 0));
    CHECK(onesided_win_free(sw));

    /* Layouts: a ROWS x COLS grid per rank; column 1 goes to the right
     * neighbour's column 0 and column COLS-2 to the left neighbour's
     * column COLS-1 (strided on both sides). */
    enum { ROWS = 40, COLS = 6 };
    /* The origin grid from onesided_alloc_mem (MPI_Alloc_mem). */
    int64_t *grid = NULL;
    CHECK(onesided_alloc_mem(world, ROWS * COLS * sizeof(int64_t), (void **)&grid));
    for (int i = 0; i < ROWS * COLS; i++)
        grid[i] = (int64_t)me * 100000 + i;
    onesided_win_t hw = 0;
    CHECK(onesided_win_allocate(world, ONESIDED_INT64, ROWS * COLS, &hw));
    onesided_layout_t column = 0, c1 = 0, clast = 0;
    CHECK(onesided_layout_vector(ROWS, 1, COLS, &column));
    size_t shape[2] = {ROWS, COLS}, part[2] = {ROWS, 1}, at1[2] = {0, 1},
           atl[2] = {0, COLS - 2};
    CHECK(onesided_layout_subarray(2, shape, part, at1, &c1));
    CHECK(onesided_layout_subarray(2, shape, part, atl, &clast));
    CHECK(onesided_fence(hw, 0));
    CHECK(onesided_put_layout(hw, ONESIDED_INT64, grid, ROWS * COLS, c1, right, 0, column));
    CHECK(onesided_put_layout(hw, ONESIDED_INT64, grid, ROWS * COLS, clast, left, COLS - 1,
                              column));
    EXPECT(onesided_put_layout(hw, ONESIDED_INT64, grid, ROWS * COLS, c1, right, COLS, column),
           ONESIDED_ERR_OUT_OF_WINDOW);
    CHECK(onesided_fence(hw, 0));
    int64_t halo[ROWS * COLS];
    /* Round 0 puts from the grid; round 1 from the window itself (the
     * grid copied in first), as MPI halo codes put from their window. */
    for (int round = 0; round < 2; round++) {
        CHECK(onesided_win_read_local(hw, ONESIDED_INT64, 0, halo, ROWS * COLS));
        for (int r = 0; r < ROWS; r++) {
            int64_t wl = (int64_t)left * 100000 + r * COLS + 1;
            int64_t wr = (int64_t)right * 100000 + r * COLS + COLS - 2;
            if (halo[r * COLS] != wl || halo[r * COLS + COLS - 1] != wr) {
                fprintf(stderr, "[%zu] halo round %d, row %d: %" PRId64 ", %" PRId64 "\n", me,
                        round, r, halo[r * COLS], halo[r * COLS + COLS - 1]);
                return 1;
            }
        }
        CHECK(onesided_fence(hw, 0));
        if (round == 1)
            break;
        CHECK(onesided_win_write_local(hw, ONESIDED_INT64, 0, grid, ROWS * COLS));
        CHECK(onesided_fence(hw, 0));
        CHECK(onesided_put_layout_from_window(hw, ONESIDED_INT64, 0, c1, right, 0, column));
        CHECK(onesided_put_layout_from_window(hw, ONESIDED_INT64, 0, clast, left, COLS - 1,
                                              column));
        EXPECT(onesided_put_layout_from_window(hw, ONESIDED_INT64, 2, clast, left, 0, column),
               ONESIDED_ERR_OUT_OF_WINDOW);
        CHECK(onesided_fence(hw, 0));
    }
    CHECK(onesided_free_mem(grid));
    EXPECT(onesided_free_mem(grid), ONESIDED_ERR_ARG);
    CHECK(onesided_layout_free(column));
    CHECK(onesided_layout_free(c1));
    CHECK(onesided_layout_free(clast));
    EXPECT(onesided_layout_free(c1), ONESIDED_ERR_HANDLE);
    CHECK(onesided_win_free(hw));

    /* 10. hints, attributes, rget_accumulate with request sets,
     * get_accumulate with layouts. A window of 9 + me elements (uneven
     * sizes) with accumulate_ordering=none. */
    onesided_info_t info = ONESIDED_INFO_NULL;
    CHECK(onesided_info_create(&info));
    CHECK(onesided_info_set(info, "accumulate_ordering", "none"));
    CHECK(onesided_info_set(info, "some_other_mpi_hint", "ignored"));
    EXPECT(onesided_info_set(info, "accumulate_ops", "sometimes"), ONESIDED_ERR_ARG);
    EXPECT(onesided_info_set(info, NULL, "none"), ONESIDED_ERR_ARG);
    onesided_win_t aw = 0, bad = 0;
    CHECK(onesided_win_allocate_with_info(world, ONESIDED_INT64, 9 + me, info, &aw));
    CHECK(onesided_info_free(info)); /* the window has its own copy */
    EXPECT(onesided_win_allocate_with_info(world, ONESIDED_INT64, 9, info, &bad),
           ONESIDED_ERR_HANDLE);
    onesided_info_t inuse = ONESIDED_INFO_NULL;
    CHECK(onesided_win_get_info(aw, &inuse));
    char val[ONESIDED_MAX_INFO_VAL];
    flag = 0;
    const char *want_hints[][2] = {{"accumulate_ordering", "none"},
                                   {"accumulate_ops", "same_op_no_op"},
                                   {"no_locks", "false"},
                                   {"same_size", n == 1 ? "true" : "false"},
                                   {"same_disp_unit", "true"}};
    for (size_t i = 0; i < sizeof want_hints / sizeof want_hints[0]; i++) {
        flag = 0;
        CHECK(onesided_info_get(inuse, want_hints[i][0], val, sizeof val, &flag));
        if (!flag || strcmp(val, want_hints[i][1]) != 0) {
            fprintf(stderr, "[%zu] hint %s: flag %d, \"%s\" (want \"%s\")\n", me,
                    want_hints[i][0], flag, flag ? val : "", want_hints[i][1]);
            return 1;
        }
    }
    CHECK(onesided_info_get(inuse, "some_other_mpi_hint", val, sizeof val, &flag));
    if (flag != 0) {
        fprintf(stderr, "[%zu] an unknown hint was kept\n", me);
        return 1;
    }
    EXPECT(onesided_info_get(inuse, "accumulate_ops", val, 4, &flag), ONESIDED_ERR_ARG);
    CHECK(onesided_info_free(inuse));
    EXPECT(onesided_info_get(inuse, "no_locks", val, sizeof val, &flag), ONESIDED_ERR_HANDLE);
    EXPECT(onesided_win_get_info(aw, NULL), ONESIDED_ERR_ARG);

    /* Attributes: every rank's size (uneven), the unit, base, flavour. */
    for (size_t r = 0; r < n; r++) {
        size_t bytes = 0;
        CHECK(onesided_win_size(aw, r, &bytes));
        if (bytes != (9 + r) * sizeof(int64_t)) {
            fprintf(stderr, "[%zu] win_size of rank %zu: %zu bytes\n", me, r, bytes);
            return 1;
        }
    }
    size_t unit = 0, bytes = 0;
    EXPECT(onesided_win_size(aw, n, &bytes), ONESIDED_ERR_ARG);
    CHECK(onesided_win_disp_unit(aw, &unit));
    void *abase = NULL;
    CHECK(onesided_win_base(aw, &abase));
    int flavor = 0;
    CHECK(onesided_win_flavor(aw, &flavor));
    if (unit != sizeof(int64_t) || !abase || flavor != ONESIDED_FLAVOR_ALLOCATE) {
        fprintf(stderr, "[%zu] disp unit %zu, base %p, flavour %d\n", me, unit, abase, flavor);
        return 1;
    }
    EXPECT(onesided_win_base(aw, NULL), ONESIDED_ERR_ARG);

    int64_t init[9 + 64];
    for (size_t i = 0; i < 9 + me && i < 9 + 64; i++)
        init[i] = 1000 * (int64_t)me + (int64_t)i;
    CHECK(onesided_win_write_local(aw, ONESIDED_INT64, 0, init, 9 + me < 73 ? 9 + me : 73));
    CHECK(onesided_barrier(world));
    /* Four requests to the right neighbour, one entry left null: a SUM on
     * elements 0-3, a REPLACE on 4-7, an atomic read (NO_OP, no origin)
     * of element 8, each fetching the previous values. */
    CHECK(onesided_lock_all(aw, 0));
    int64_t add[4], repl[4], prev_add[4], prev_repl[4], prev8 = -1;
    for (int i = 0; i < 4; i++) {
        add[i] = ((int64_t)me + 1) * (i + 1);
        repl[i] = -((int64_t)me * 100 + i);
        prev_add[i] = prev_repl[i] = -1;
    }
    onesided_request_t set[4] = {0};
    CHECK(onesided_rget_accumulate(aw, ONESIDED_INT64, add, prev_add, 4, right, 0, ONESIDED_SUM,
                                   &set[0]));
    CHECK(onesided_rget_accumulate(aw, ONESIDED_INT64, repl, prev_repl, 4, right, 4,
                                   ONESIDED_REPLACE, &set[1]));
    CHECK(onesided_rget_accumulate(aw, ONESIDED_INT64, NULL, &prev8, 1, right, 8, ONESIDED_NO_OP,
                                   &set[3]));
    onesided_request_t unused = 0;
    EXPECT(onesided_rget_accumulate(aw, ONESIDED_DOUBLE, add, prev_add, 4, right, 0,
                                    ONESIDED_SUM, &unused),
           ONESIDED_ERR_TYPE);
    EXPECT(onesided_rget_accumulate(aw, ONESIDED_INT64, add, NULL, 4, right, 0, ONESIDED_SUM,
                                    &unused),
           ONESIDED_ERR_ARG);
    EXPECT(onesided_rget_accumulate(aw, ONESIDED_INT64, add, prev_add, 4, right, 9 + right,
                                    ONESIDED_SUM, &unused),
           ONESIDED_ERR_OUT_OF_WINDOW);
    EXPECT(onesided_win_free(aw), ONESIDED_ERR_BUSY);
    int index = -1;
    EXPECT(onesided_waitany(4, set, NULL), ONESIDED_ERR_ARG);
    CHECK(onesided_waitany(4, set, &index));
    if (index < 0 || index == 2 || index > 3 || set[index] != 0) {
        fprintf(stderr, "[%zu] waitany: index %d\n", me, index);
        return 1;
    }
    EXPECT(onesided_testany(4, set, &index, NULL), ONESIDED_ERR_ARG);
    for (flag = 0; !flag;)
        CHECK(onesided_testany(4, set, &index, &flag));
    if (index < 0 || index == 2 || index > 3 || set[index] != 0) {
        fprintf(stderr, "[%zu] testany: index %d\n", me, index);
        return 1;
    }
    onesided_request_t twice[2] = {set[0] ? set[0] : set[1] ? set[1] : set[3], 0};
    twice[1] = twice[0];
    EXPECT(onesided_testall(2, twice, &flag), ONESIDED_ERR_ARG);
    EXPECT(onesided_testall(4, set, NULL), ONESIDED_ERR_ARG);
    CHECK(onesided_testall(4, set, &flag)); /* either answer; finishes all when 1 */
    CHECK(onesided_waitall(4, set));
    for (int i = 0; i < 4; i++) {
        if (set[i] != ONESIDED_REQUEST_NULL) {
            fprintf(stderr, "[%zu] waitall left request %d\n", me, i);
            return 1;
        }
    }
    onesided_request_t stale[1] = {twice[0]};
    EXPECT(onesided_waitall(1, stale), ONESIDED_ERR_HANDLE);
    EXPECT(onesided_waitall(1, NULL), ONESIDED_ERR_ARG);
    CHECK(onesided_flush_local(aw, right));
    CHECK(onesided_flush_local_all(aw));
    EXPECT(onesided_flush_local(aw, n), ONESIDED_ERR_ARG);
    CHECK(onesided_unlock_all(aw));
    EXPECT(onesided_flush_local_all(aw), ONESIDED_ERR_EPOCH);
    for (int i = 0; i < 4; i++) {
        if (prev_add[i] != 1000 * (int64_t)right + i || prev_repl[i] != 1000 * (int64_t)right + 4 + i) {
            fprintf(stderr, "[%zu] rget_accumulate: previous values %" PRId64 ", %" PRId64 "\n", me,
                    prev_add[i], prev_repl[i]);
            return 1;
        }
    }
    if (prev8 != 1000 * (int64_t)right + 8) {
        fprintf(stderr, "[%zu] NO_OP read %" PRId64 "\n", me, prev8);
        return 1;
    }
    CHECK(onesided_barrier(world));
    int64_t now[9];
    CHECK(onesided_win_read_local(aw, ONESIDED_INT64, 0, now, 9));
    for (int i = 0; i < 9; i++) {
        int64_t want = 1000 * (int64_t)me + i;
        if (i < 4)
            want += ((int64_t)left + 1) * (i + 1);
        else if (i < 8)
            want = -((int64_t)left * 100 + (i - 4));
        if (now[i] != want) {
            fprintf(stderr, "[%zu] after rget_accumulate: element %d = %" PRId64 ", want %" PRId64
                            "\n", me, i, now[i], want);
            return 1;
        }
    }
    CHECK(onesided_barrier(world));

    /* get_accumulate with layouts: elements 0, 3, 6 of the right
     * neighbour (a vector) get a dense origin added, and their previous
     * values land at result elements 0, 2, 4 (another vector). */
    onesided_layout_t every3 = 0, dense3 = 0, every2 = 0;
    CHECK(onesided_layout_vector(3, 1, 3, &every3));
    CHECK(onesided_layout_vector(1, 3, 3, &dense3));
    CHECK(onesided_layout_vector(3, 1, 2, &every2));
    int64_t big[3], res[5];
    for (int i = 0; i < 3; i++)
        big[i] = ((int64_t)me + 1) * 1000000 * (i + 1);
    for (int i = 0; i < 5; i++)
        res[i] = -7;
    CHECK(onesided_lock_all(aw, 0));
    CHECK(onesided_get_accumulate_layout(aw, ONESIDED_INT64, big, 3, dense3, res, 5, every2, right,
                                         0, every3, ONESIDED_SUM));
    EXPECT(onesided_get_accumulate_layout(aw, ONESIDED_UINT64, big, 3, dense3, res, 5, every2,
                                          right, 0, every3, ONESIDED_SUM),
           ONESIDED_ERR_TYPE);
    EXPECT(onesided_get_accumulate_layout(aw, ONESIDED_INT64, big, 3, dense3, big, 3, dense3,
                                          right, 0, every3, ONESIDED_SUM),
           ONESIDED_ERR_ARG); /* origin and result overlap */
    EXPECT(onesided_get_accumulate_layout(aw, ONESIDED_INT64, big, 3, dense3, res, 5, every2,
                                          right, 3 + right, every3, ONESIDED_SUM),
           ONESIDED_ERR_OUT_OF_WINDOW);
    CHECK(onesided_unlock_all(aw));
    /* The right neighbour's elements 0, 3 and 6 as phase one left them. */
    int64_t want_res[5] = {1000 * (int64_t)right + 0 + ((int64_t)me + 1) * 1, -7,
                           1000 * (int64_t)right + 3 + ((int64_t)me + 1) * 4, -7,
                           -((int64_t)me * 100 + 2)};
    for (int i = 0; i < 5; i++) {
        if (res[i] != want_res[i]) {
            fprintf(stderr, "[%zu] get_accumulate_layout: result %d = %" PRId64 ", want %" PRId64
                            "\n", me, i, res[i], want_res[i]);
            return 1;
        }
    }
    CHECK(onesided_layout_free(every2));
    EXPECT(onesided_get_accumulate_layout(aw, ONESIDED_INT64, big, 3, dense3, res, 5, every2, right,
                                          0, every3, ONESIDED_SUM),
           ONESIDED_ERR_HANDLE);
    CHECK(onesided_barrier(world));
    int64_t after[9];
    CHECK(onesided_win_read_local(aw, ONESIDED_INT64, 0, after, 9));
    for (int i = 0; i < 9; i++) {
        int64_t want = now[i];
        if (i % 3 == 0 && i < 9)
            want += ((int64_t)left + 1) * 1000000 * (i / 3 + 1);
        if (after[i] != want) {
            fprintf(stderr, "[%zu] after get_accumulate_layout: element %d = %" PRId64
                            ", want %" PRId64 "\n", me, i, after[i], want);
            return 1;
        }
    }
    CHECK(onesided_layout_free(every3));
    CHECK(onesided_layout_free(dense3));
    CHECK(onesided_barrier(world));
    CHECK(onesided_win_free(aw));
    EXPECT(onesided_win_size(aw, 0, &bytes), ONESIDED_ERR_HANDLE);
    EXPECT(onesided_win_flavor(aw, &flavor), ONESIDED_ERR_HANDLE);
    EXPECT(onesided_win_disp_unit(aw, &unit), ONESIDED_ERR_HANDLE);
    EXPECT(onesided_win_base(aw, &abase), ONESIDED_ERR_HANDLE);
    EXPECT(onesided_flush_local(aw, 0), ONESIDED_ERR_HANDLE);
    EXPECT(onesided_rget_accumulate(aw, ONESIDED_INT64, add, prev_add, 4, right, 0, ONESIDED_SUM,
                                    &unused),
           ONESIDED_ERR_HANDLE);

    /* 11. put_signal / wait_until: each rank puts 4 elements to its
     * right neighbour with a signal (ADD 1) on element 4, then waits for
     * its own signal and checks the data from its left neighbour. */
    onesided_win_t sg = 0;
    CHECK(onesided_win_allocate(world, ONESIDED_INT64, 5, &sg));
    CHECK(onesided_lock_all(sg, 0));
    int64_t payload[4], sig_one = 1, sig_seen = 0;
    for (int i = 0; i < 4; i++)
        payload[i] = (int64_t)value(me, (size_t)i);
    EXPECT(onesided_put_signal(sg, ONESIDED_INT64, payload, 4, right, 0, 5, &sig_one,
                               ONESIDED_SIGNAL_ADD),
           ONESIDED_ERR_OUT_OF_WINDOW); /* nothing sent */
    EXPECT(onesided_put_signal(sg, ONESIDED_INT64, payload, 4, right, 0, 4, &sig_one, 0),
           ONESIDED_ERR_ARG);
    EXPECT(onesided_put_signal(sg, ONESIDED_INT64, payload, 4, right, 0, 4, NULL,
                               ONESIDED_SIGNAL_ADD),
           ONESIDED_ERR_ARG);
    CHECK(onesided_put_signal(sg, ONESIDED_INT64, payload, 4, right, 0, 4, &sig_one,
                              ONESIDED_SIGNAL_ADD));
    EXPECT(onesided_wait_until(sg, ONESIDED_INT64, 4, 99, &sig_one, &sig_seen), ONESIDED_ERR_ARG);
    EXPECT(onesided_wait_until(sg, ONESIDED_UINT64, 4, ONESIDED_CMP_GE, &sig_one, &sig_seen),
           ONESIDED_ERR_TYPE);
    CHECK(onesided_wait_until(sg, ONESIDED_INT64, 4, ONESIDED_CMP_GE, &sig_one, &sig_seen));
    if (sig_seen != 1) {
        fprintf(stderr, "[%zu] wait_until saw signal %" PRId64 "\n", me, sig_seen);
        return 1;
    }
    int64_t landed[4];
    CHECK(onesided_win_read_local(sg, ONESIDED_INT64, 0, landed, 4));
    for (int i = 0; i < 4; i++) {
        if (landed[i] != (int64_t)value(left, (size_t)i)) {
            fprintf(stderr, "[%zu] put_signal: element %d = %" PRId64 "\n", me, i, landed[i]);
            return 1;
        }
    }
    CHECK(onesided_unlock_all(sg));
    CHECK(onesided_barrier(world));
    CHECK(onesided_win_free(sg));
    EXPECT(onesided_wait_until(sg, ONESIDED_INT64, 4, ONESIDED_CMP_GE, &sig_one, NULL),
           ONESIDED_ERR_HANDLE);
    EXPECT(onesided_put_signal(sg, ONESIDED_INT64, payload, 4, right, 0, 4, &sig_one,
                               ONESIDED_SIGNAL_ADD),
           ONESIDED_ERR_HANDLE);

    /* Groups: split by parity, ranked by descending world rank. */
    onesided_world_t half = 0;
    CHECK(onesided_split(world, (int)(me % 2), -(int64_t)me, &half));
    size_t hr, hn;
    CHECK(onesided_rank(half, &hr));
    CHECK(onesided_size(half, &hn));
    if (hn != (n - me % 2 + 1) / 2) {
        fprintf(stderr, "[%zu] parity group of %zu ranks\n", me, hn);
        return 1;
    }
    int64_t members = (int64_t)me;
    CHECK(onesided_allreduce(half, ONESIDED_INT64, ONESIDED_SUM, &members, 1));
    int64_t want_sum = 0;
    for (size_t r = me % 2; r < n; r += 2)
        want_sum += (int64_t)r;
    if (members != want_sum) {
        fprintf(stderr, "[%zu] parity group sum %" PRId64 ", expected %" PRId64 "\n", me,
                members, want_sum);
        return 1;
    }
    /* A ring inside the group: group rank r puts its world rank to r + 1. */
    onesided_win_t gw = 0;
    CHECK(onesided_win_allocate(half, ONESIDED_UINT64, 2, &gw));
    CHECK(onesided_fence(gw, 0));
    uint64_t mine_id[2] = {me, hr};
    CHECK(onesided_put(gw, ONESIDED_UINT64, mine_id, 2, (hr + 1) % hn, 0));
    EXPECT(onesided_put(gw, ONESIDED_UINT64, mine_id, 2, hn, 0), ONESIDED_ERR_ARG);
    CHECK(onesided_fence(gw, 0));
    uint64_t from[2];
    CHECK(onesided_win_read_local(gw, ONESIDED_UINT64, 0, from, 2));
    /* Group rank hr - 1 is world rank me + 2 (descending keys), wrapping
     * to the lowest rank of this parity. */
    size_t prev = (hr + hn - 1) % hn;
    size_t want_from = hr == 0 ? me % 2 : me + 2;
    if (from[0] != want_from || from[1] != prev) {
        fprintf(stderr, "[%zu] group ring: got (%" PRIu64 ", %" PRIu64 "), expected (%zu, %zu)\n",
                me, from[0], from[1], want_from, prev);
        return 1;
    }
    EXPECT(onesided_group_free(half), ONESIDED_ERR_BUSY);
    CHECK(onesided_win_free(gw));
    CHECK(onesided_group_free(half));
    EXPECT(onesided_barrier(half), ONESIDED_ERR_HANDLE);
    /* The even ranks from a list; the others get no group. */
    size_t evens[64], ne = 0;
    for (size_t r = 0; r < n && ne < 64; r += 2)
        evens[ne++] = r;
    onesided_world_t even = 0;
    CHECK(onesided_subgroup(world, evens, ne, &even));
    if ((me % 2 == 0) != (even != 0)) {
        fprintf(stderr, "[%zu] subgroup handle %" PRIu64 "\n", me, even);
        return 1;
    }
    if (even) {
        uint64_t b = me == 0 ? 4242 : 0;
        CHECK(onesided_broadcast(even, 0, ONESIDED_UINT64, &b, 1));
        if (b != 4242) {
            fprintf(stderr, "[%zu] subgroup broadcast gave %" PRIu64 "\n", me, b);
            return 1;
        }
        CHECK(onesided_group_free(even));
    }

    CHECK(onesided_finalize(world));
    EXPECT(onesided_barrier(world), ONESIDED_ERR_HANDLE);
    printf("[%zu] ring of %zu ranks: every check passed\n", me, n);
    free(mine);
    free(got);
    return 0;
}
