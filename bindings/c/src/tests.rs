//! The C API from Rust, in one process (a singleton job): every error path
//! a C caller can reach. The multi-process C program is run by the main
//! crate's `tests/c_api.rs`.

// Every pointer passed below points to a live local of the length the
// call states: the C API's contract, for each call.
#![allow(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_void, CStr};

use super::*;

fn last() -> String {
    let mut buf = vec![0 as c_char; 512];
    let n = unsafe { onesided_last_error(buf.as_mut_ptr(), buf.len()) };
    assert!(n >= 1);
    // SAFETY: `onesided_last_error` NUL-terminated the buffer.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn singleton_job_and_every_error_code() {
    unsafe { singleton_job() }
}

#[allow(unsafe_op_in_unsafe_fn)] // the whole body calls the C API
unsafe fn singleton_job() {
    let mut world: onesided_world_t = 0;
    assert_eq!(onesided_init(std::ptr::null_mut()), ONESIDED_ERR_ARG);
    assert!(last().contains("NULL"), "{}", last());
    assert_eq!(onesided_init(&mut world), ONESIDED_SUCCESS, "{}", last());
    let (mut rank, mut size) = (9usize, 0usize);
    assert_eq!(onesided_rank(world, &mut rank), ONESIDED_SUCCESS);
    assert_eq!(onesided_size(world, &mut size), ONESIDED_SUCCESS);
    assert_eq!((rank, size), (0, 1));
    assert_eq!(onesided_rank(world, std::ptr::null_mut()), ONESIDED_ERR_ARG);
    assert_eq!(
        onesided_rank(world ^ (7 << 32), &mut rank),
        ONESIDED_ERR_HANDLE
    );
    assert_eq!(onesided_rank(0, &mut rank), ONESIDED_ERR_HANDLE);

    let mut win: onesided_win_t = 0;
    assert_eq!(
        onesided_win_allocate(world, 99, 8, &mut win),
        ONESIDED_ERR_ARG
    );
    assert!(last().contains("unknown datatype 99"), "{}", last());
    assert_eq!(
        onesided_win_allocate(world, ONESIDED_INT64, 8, &mut win),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    let mut count = 0usize;
    assert_eq!(onesided_win_count(win, &mut count), ONESIDED_SUCCESS);
    assert_eq!(count, 8);
    // Finalizing with a window left is refused; the world stays usable.
    assert_eq!(onesided_finalize(world), ONESIDED_ERR_BUSY);
    assert_eq!(onesided_barrier(world), ONESIDED_SUCCESS);

    let data: [i64; 4] = [1, 2, 3, 4];
    let src = data.as_ptr().cast::<c_void>();
    // No epoch yet.
    assert_eq!(
        onesided_put(win, ONESIDED_INT64, src, 4, 0, 0),
        ONESIDED_ERR_EPOCH
    );
    assert_eq!(onesided_lock_all(win, 0), ONESIDED_SUCCESS, "{}", last());
    assert_eq!(
        onesided_put(win, ONESIDED_INT64, src, 4, 0, 2),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    // Wrong datatype, NULL, misaligned, overflowing, out of the window.
    assert_eq!(
        onesided_put(win, ONESIDED_DOUBLE, src, 4, 0, 0),
        ONESIDED_ERR_TYPE
    );
    assert!(last().contains("ONESIDED_INT64"), "{}", last());
    assert_eq!(
        onesided_put(win, ONESIDED_INT64, std::ptr::null(), 4, 0, 0),
        ONESIDED_ERR_ARG
    );
    let bytes = [0u8; 64];
    let odd = bytes
        .as_ptr()
        .wrapping_add(1 + (bytes.as_ptr() as usize & 7 == 7) as usize);
    assert_eq!(
        onesided_put(win, ONESIDED_INT64, odd.cast(), 1, 0, 0),
        ONESIDED_ERR_ARG
    );
    assert!(last().contains("aligned"), "{}", last());
    assert_eq!(
        onesided_put(win, ONESIDED_INT64, src, usize::MAX / 4, 0, 0),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        onesided_put(win, ONESIDED_INT64, src, 4, 0, 6),
        ONESIDED_ERR_OUT_OF_WINDOW
    );
    assert_eq!(
        onesided_put(win, ONESIDED_INT64, src, 4, 1, 0),
        ONESIDED_ERR_ARG
    );
    // A count of 0 with NULL is a no-op.
    assert_eq!(
        onesided_put(win, ONESIDED_INT64, std::ptr::null(), 0, 0, 0),
        ONESIDED_SUCCESS
    );

    let one: i64 = 10;
    assert_eq!(
        onesided_accumulate(
            win,
            ONESIDED_INT64,
            (&one as *const i64).cast(),
            1,
            0,
            2,
            ONESIDED_SUM
        ),
        ONESIDED_SUCCESS
    );
    assert_eq!(
        onesided_accumulate(
            win,
            ONESIDED_INT64,
            (&one as *const i64).cast(),
            1,
            0,
            2,
            77
        ),
        ONESIDED_ERR_ARG
    );
    let mut old: i64 = 0;
    assert_eq!(
        onesided_fetch_and_op(
            win,
            ONESIDED_INT64,
            (&one as *const i64).cast(),
            (&mut old as *mut i64).cast(),
            0,
            3,
            ONESIDED_SUM
        ),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(old, 2);
    let (cmp, swp) = (12i64, 100i64);
    assert_eq!(
        onesided_compare_and_swap(
            win,
            ONESIDED_INT64,
            (&cmp as *const i64).cast(),
            (&swp as *const i64).cast(),
            (&mut old as *mut i64).cast(),
            0,
            3
        ),
        ONESIDED_SUCCESS
    );
    assert_eq!(old, 12);
    let mut fetched = [0i64; 4];
    assert_eq!(
        onesided_get_accumulate(
            win,
            ONESIDED_INT64,
            std::ptr::null(),
            fetched.as_mut_ptr().cast(),
            4,
            0,
            2,
            ONESIDED_NO_OP
        ),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(fetched, [11, 100, 3, 4]);
    // The same buffer as origin and result: refused, nothing changed.
    assert_eq!(
        onesided_get_accumulate(
            win,
            ONESIDED_INT64,
            fetched.as_ptr().cast(),
            fetched.as_mut_ptr().cast(),
            4,
            0,
            2,
            ONESIDED_SUM
        ),
        ONESIDED_ERR_ARG
    );
    assert!(last().contains("overlap"), "{}", last());
    assert_eq!(onesided_flush(win, 0), ONESIDED_SUCCESS);
    let mut got = [0i64; 8];
    assert_eq!(
        onesided_get(win, ONESIDED_INT64, got.as_mut_ptr().cast(), 8, 0, 0),
        ONESIDED_SUCCESS
    );
    assert_eq!(got, [0, 0, 11, 100, 3, 4, 0, 0]);
    // Freeing inside an epoch is refused and the window stays usable.
    assert_eq!(onesided_win_free(win), ONESIDED_ERR_EPOCH);
    assert_eq!(onesided_unlock_all(win), ONESIDED_SUCCESS);
    let mut local = [0i64; 2];
    assert_eq!(
        onesided_win_read_local(win, ONESIDED_INT64, 2, local.as_mut_ptr().cast(), 2),
        ONESIDED_SUCCESS
    );
    assert_eq!(local, [11, 100]);
    assert_eq!(onesided_lock(win, 3, 0, 0), ONESIDED_ERR_ARG);

    assert_eq!(onesided_win_free(win), ONESIDED_SUCCESS, "{}", last());
    assert_eq!(onesided_win_free(win), ONESIDED_ERR_HANDLE);

    // Groups: a split with an undefined colour gives no group; a split
    // and a subgroup of the one process work like the world (rank, size,
    // collectives, windows) and are freed after their windows.
    let mut none: onesided_world_t = 7;
    assert_eq!(
        onesided_split(world, ONESIDED_UNDEFINED, 0, &mut none),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(none, 0);
    assert_eq!(
        onesided_split(world, 0, 0, std::ptr::null_mut()),
        ONESIDED_ERR_ARG
    );
    let mut group: onesided_world_t = 0;
    assert_eq!(
        onesided_split(world, 3, 5, &mut group),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_ne!(group, 0);
    let (mut grank, mut gsize) = (9usize, 0usize);
    assert_eq!(onesided_rank(group, &mut grank), ONESIDED_SUCCESS);
    assert_eq!(onesided_size(group, &mut gsize), ONESIDED_SUCCESS);
    assert_eq!((grank, gsize), (0, 1));
    let mut sum: [f64; 2] = [1.5, 2.5];
    assert_eq!(
        onesided_allreduce(
            group,
            ONESIDED_DOUBLE,
            ONESIDED_SUM,
            sum.as_mut_ptr().cast(),
            2
        ),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(sum, [1.5, 2.5]);
    let mut sub: onesided_world_t = 0;
    let ranks = [0usize];
    assert_eq!(
        onesided_subgroup(group, ranks.as_ptr(), 1, &mut sub),
        ONESIDED_SUCCESS
    );
    let bad = [1usize];
    let mut never: onesided_world_t = 0;
    assert_eq!(
        onesided_subgroup(world, bad.as_ptr(), 1, &mut never),
        ONESIDED_ERR_ARG
    );
    assert!(last().contains("1"), "{}", last());
    let mut gwin: onesided_win_t = 0;
    assert_eq!(
        onesided_win_allocate(group, ONESIDED_INT64, 4, &mut gwin),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(onesided_fence(gwin, 0), ONESIDED_SUCCESS);
    let v: [i64; 2] = [41, 42];
    assert_eq!(
        onesided_put(gwin, ONESIDED_INT64, v.as_ptr().cast(), 2, 0, 1),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(onesided_fence(gwin, 0), ONESIDED_SUCCESS);
    let mut back = [0i64; 4];
    assert_eq!(
        onesided_win_read_local(gwin, ONESIDED_INT64, 0, back.as_mut_ptr().cast(), 4),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(back, [0, 41, 42, 0]);
    // A group with a window is busy; a world is no group and a group no world.
    assert_eq!(onesided_group_free(group), ONESIDED_ERR_BUSY);
    assert!(last().contains("window"), "{}", last());
    assert_eq!(onesided_group_free(world), ONESIDED_ERR_ARG);
    assert_eq!(onesided_finalize(group), ONESIDED_ERR_ARG);
    // The world is busy while its groups live.
    assert_eq!(onesided_win_free(gwin), ONESIDED_SUCCESS, "{}", last());
    assert_eq!(onesided_group_free(group), ONESIDED_SUCCESS, "{}", last());
    assert_eq!(onesided_group_free(group), ONESIDED_ERR_HANDLE);
    assert_eq!(onesided_rank(group, &mut grank), ONESIDED_ERR_HANDLE);
    assert_eq!(onesided_finalize(world), ONESIDED_ERR_BUSY);
    assert!(last().contains("group"), "{}", last());
    // The subgroup outlived its parent group.
    assert_eq!(onesided_barrier(sub), ONESIDED_SUCCESS, "{}", last());
    assert_eq!(onesided_group_free(sub), ONESIDED_SUCCESS, "{}", last());

    // Layouts: a 3 x 4 grid window; column 1 of a local grid into column 2.
    let mut lw: onesided_win_t = 0;
    assert_eq!(
        onesided_win_allocate(world, ONESIDED_INT32, 12, &mut lw),
        ONESIDED_SUCCESS
    );
    let (mut col, mut bad_l, mut idx, mut sub_l): (onesided_layout_t, _, _, _) = (0, 0, 0, 0);
    assert_eq!(onesided_layout_vector(3, 1, 4, &mut col), ONESIDED_SUCCESS);
    assert_eq!(
        onesided_layout_vector(3, 2, 1, &mut bad_l),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        onesided_layout_vector(3, 1, 4, std::ptr::null_mut()),
        ONESIDED_ERR_ARG
    );
    let (d, l) = ([0usize, 5], [2usize, 1]);
    assert_eq!(
        onesided_layout_indexed(2, d.as_ptr(), l.as_ptr(), &mut idx),
        ONESIDED_SUCCESS
    );
    let (sz, ss, st) = ([3usize, 4], [3usize, 1], [0usize, 1]);
    assert_eq!(
        onesided_layout_subarray(2, sz.as_ptr(), ss.as_ptr(), st.as_ptr(), &mut sub_l),
        ONESIDED_SUCCESS
    );
    let grid: Vec<i32> = (0..12).collect();
    assert_eq!(onesided_fence(lw, 0), ONESIDED_SUCCESS);
    // Origin: column 1 (subarray); target: column 2 (the vector from 2).
    assert_eq!(
        onesided_put_layout(
            lw,
            ONESIDED_INT32,
            grid.as_ptr().cast(),
            12,
            sub_l,
            0,
            2,
            col
        ),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    // Out of the window (the column from 3 ends past 12 elements), a
    // mismatched count, a short buffer, a stale layout: refused.
    assert_eq!(
        onesided_put_layout(
            lw,
            ONESIDED_INT32,
            grid.as_ptr().cast(),
            12,
            sub_l,
            0,
            9,
            col
        ),
        ONESIDED_ERR_OUT_OF_WINDOW
    );
    let mut two: onesided_layout_t = 0;
    assert_eq!(onesided_layout_vector(2, 1, 1, &mut two), ONESIDED_SUCCESS);
    assert_eq!(
        onesided_put_layout(lw, ONESIDED_INT32, grid.as_ptr().cast(), 12, two, 0, 0, col),
        ONESIDED_ERR_ARG
    );
    assert!(last().contains("3 elements"), "{}", last());
    assert_eq!(
        onesided_put_layout(
            lw,
            ONESIDED_INT32,
            grid.as_ptr().cast(),
            4,
            sub_l,
            0,
            0,
            col
        ),
        ONESIDED_ERR_ARG
    );
    assert_eq!(onesided_fence(lw, 0), ONESIDED_SUCCESS);
    let mut all = [0i32; 12];
    assert_eq!(
        onesided_win_read_local(lw, ONESIDED_INT32, 0, all.as_mut_ptr().cast(), 12),
        ONESIDED_SUCCESS
    );
    assert_eq!(all, [0, 0, 1, 0, 0, 0, 5, 0, 0, 0, 9, 0]);
    // Read the column back into an indexed place; accumulate onto it.
    let mut back = [-1i32; 6];
    assert_eq!(
        onesided_get_layout(
            lw,
            ONESIDED_INT32,
            back.as_mut_ptr().cast(),
            6,
            idx,
            0,
            2,
            col
        ),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(back, [1, 5, -1, -1, -1, 9]);
    let ones = [100i32; 3];
    let mut three: onesided_layout_t = 0;
    assert_eq!(
        onesided_layout_vector(1, 3, 3, &mut three),
        ONESIDED_SUCCESS
    );
    assert_eq!(
        onesided_accumulate_layout(
            lw,
            ONESIDED_INT32,
            ones.as_ptr().cast(),
            3,
            three,
            0,
            2,
            col,
            ONESIDED_SUM
        ),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(onesided_fence(lw, 0), ONESIDED_SUCCESS);
    assert_eq!(
        onesided_win_read_local(lw, ONESIDED_INT32, 0, all.as_mut_ptr().cast(), 12),
        ONESIDED_SUCCESS
    );
    assert_eq!(all, [0, 0, 101, 0, 0, 0, 105, 0, 0, 0, 109, 0]);
    // Column 2 of the window itself to column 0 (MPI_Put from the
    // window's buffer); past the window, the wrong type, a freed layout:
    // refused, and nothing written.
    assert_eq!(
        onesided_put_layout_from_window(lw, ONESIDED_INT32, 2, col, 0, 0, col),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(
        onesided_put_layout_from_window(lw, ONESIDED_INT32, 4, col, 0, 1, col),
        ONESIDED_ERR_OUT_OF_WINDOW
    );
    assert!(last().contains("rank 0"), "{}", last());
    assert_eq!(
        onesided_put_layout_from_window(lw, ONESIDED_INT64, 2, col, 0, 1, col),
        ONESIDED_ERR_TYPE
    );
    assert_eq!(
        onesided_put_layout_from_window(lw, ONESIDED_INT32, 2, bad_l, 0, 1, col),
        ONESIDED_ERR_HANDLE
    );
    assert_eq!(onesided_fence(lw, 0), ONESIDED_SUCCESS);
    assert_eq!(
        onesided_win_read_local(lw, ONESIDED_INT32, 0, all.as_mut_ptr().cast(), 12),
        ONESIDED_SUCCESS
    );
    assert_eq!(all, [101, 0, 101, 0, 105, 0, 105, 0, 109, 0, 109, 0]);
    assert_eq!(onesided_layout_free(idx), ONESIDED_SUCCESS);
    assert_eq!(onesided_layout_free(idx), ONESIDED_ERR_HANDLE);
    assert_eq!(
        onesided_get_layout(
            lw,
            ONESIDED_INT32,
            back.as_mut_ptr().cast(),
            6,
            idx,
            0,
            2,
            col
        ),
        ONESIDED_ERR_HANDLE
    );
    assert!(last().contains("origin layout"), "{}", last());
    for l in [col, sub_l, three, two] {
        assert_eq!(onesided_layout_free(l), ONESIDED_SUCCESS);
    }
    assert_eq!(onesided_win_free(lw), ONESIDED_SUCCESS, "{}", last());
    hints_and_attributes(world);
    rget_accumulate_and_request_sets(world);
    get_accumulate_layout(world);
    signals(world);
    alloc_and_free_mem(world);
    assert_eq!(onesided_flush(win, 0), ONESIDED_ERR_HANDLE);
    assert_eq!(onesided_finalize(world), ONESIDED_SUCCESS, "{}", last());
    assert_eq!(onesided_finalize(world), ONESIDED_ERR_HANDLE);
    assert_eq!(onesided_barrier(world), ONESIDED_ERR_HANDLE);

    // SAFETY: static NUL-terminated strings.
    let name = unsafe { CStr::from_ptr(onesided_error_name(ONESIDED_ERR_TIMEOUT)) };
    assert_eq!(name.to_str(), Ok("ONESIDED_ERR_TIMEOUT"));
    // SAFETY: as above.
    let name = unsafe { CStr::from_ptr(onesided_error_name(-5)) };
    assert_eq!(name.to_str(), Ok("unknown error code"));
    // A buffer too small gets a truncated, terminated message.
    let mut small = [1 as c_char; 4];
    let need = onesided_last_error(small.as_mut_ptr(), small.len());
    assert!(need > 4);
    assert_eq!(small[3], 0);
}

/// The value of hint `key` in `info` (asserting it is known).
#[allow(unsafe_op_in_unsafe_fn)] // calls the C API
unsafe fn hint(info: onesided_info_t, key: &CStr) -> String {
    let mut buf = [0 as c_char; ONESIDED_MAX_INFO_VAL];
    let mut flag = -1;
    assert_eq!(
        onesided_info_get(info, key.as_ptr(), buf.as_mut_ptr(), buf.len(), &mut flag),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(flag, 1, "{key:?}");
    CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
}

#[allow(unsafe_op_in_unsafe_fn)] // the whole body calls the C API
unsafe fn hints_and_attributes(world: onesided_world_t) {
    let mut info: onesided_info_t = 0;
    assert_eq!(onesided_info_create(std::ptr::null_mut()), ONESIDED_ERR_ARG);
    assert_eq!(onesided_info_create(&mut info), ONESIDED_SUCCESS);
    assert_eq!(hint(info, c"accumulate_ordering"), "rar,raw,war,waw");
    assert_eq!(hint(info, c"no_locks"), "false");
    let set = |k: &CStr, v: &CStr| onesided_info_set(info, k.as_ptr(), v.as_ptr());
    assert_eq!(set(c"accumulate_ordering", c"none"), ONESIDED_SUCCESS);
    assert_eq!(set(c"accumulate_ops", c"same_op"), ONESIDED_SUCCESS);
    assert_eq!(set(c"no_locks", c"true"), ONESIDED_SUCCESS);
    // A bad value is refused and changes nothing; unknown keys are ignored.
    assert_eq!(set(c"no_locks", c"yes"), ONESIDED_ERR_ARG);
    assert!(last().contains("no_locks"), "{}", last());
    assert_eq!(set(c"mpi_whatever", c"1"), ONESIDED_SUCCESS);
    assert_eq!(hint(info, c"no_locks"), "true");
    assert_eq!(
        onesided_info_set(info, std::ptr::null(), c"true".as_ptr()),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        onesided_info_set(info, c"no_locks".as_ptr(), std::ptr::null()),
        ONESIDED_ERR_ARG
    );
    let mut flag = -1;
    let mut buf = [7 as c_char; ONESIDED_MAX_INFO_VAL];
    assert_eq!(
        onesided_info_get(
            info,
            c"mpi_whatever".as_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
            &mut flag
        ),
        ONESIDED_SUCCESS
    );
    assert_eq!((flag, buf[0]), (0, 7));
    // Too short for "same_op" and its NUL: refused, nothing written.
    assert_eq!(
        onesided_info_get(
            info,
            c"accumulate_ops".as_ptr(),
            buf.as_mut_ptr(),
            7,
            &mut flag
        ),
        ONESIDED_ERR_ARG
    );
    assert_eq!(buf[0], 7);
    assert_eq!(
        onesided_info_get(
            info,
            c"no_locks".as_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
            std::ptr::null_mut()
        ),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        onesided_info_get(
            ONESIDED_INFO_NULL,
            c"no_locks".as_ptr(),
            buf.as_mut_ptr(),
            64,
            &mut flag
        ),
        ONESIDED_ERR_HANDLE
    );

    // A window with the hints; they are copied (the handle may go at once).
    let mut w: onesided_win_t = 0;
    assert_eq!(
        onesided_win_allocate_with_info(world, ONESIDED_DOUBLE, 5, info, &mut w),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(onesided_info_free(info), ONESIDED_SUCCESS);
    assert_eq!(onesided_info_free(info), ONESIDED_ERR_HANDLE);
    assert_eq!(set(c"no_locks", c"false"), ONESIDED_ERR_HANDLE);
    let mut w2: onesided_win_t = 0;
    assert_eq!(
        onesided_win_allocate_with_info(world, ONESIDED_DOUBLE, 5, info, &mut w2),
        ONESIDED_ERR_HANDLE
    );
    assert!(last().contains("info handle"), "{}", last());
    // no_locks: locking is refused.
    assert_ne!(onesided_lock_all(w, 0), ONESIDED_SUCCESS);
    let mut got: onesided_info_t = 0;
    assert_eq!(onesided_win_get_info(w, &mut got), ONESIDED_SUCCESS);
    assert_eq!(hint(got, c"accumulate_ordering"), "none");
    assert_eq!(hint(got, c"accumulate_ops"), "same_op");
    assert_eq!(hint(got, c"no_locks"), "true");
    assert_eq!(hint(got, c"same_size"), "true"); // one rank: found equal
    assert_eq!(hint(got, c"same_disp_unit"), "true");
    assert_eq!(onesided_info_free(got), ONESIDED_SUCCESS);
    assert_eq!(
        onesided_win_get_info(w, std::ptr::null_mut()),
        ONESIDED_ERR_ARG
    );

    // Attributes.
    let (mut base, mut size, mut unit, mut flavor) = (std::ptr::null_mut(), 0usize, 0usize, 0);
    assert_eq!(onesided_win_base(w, &mut base), ONESIDED_SUCCESS);
    assert!(!base.is_null() && base as usize % 8 == 0);
    assert_eq!(onesided_win_size(w, 0, &mut size), ONESIDED_SUCCESS);
    assert_eq!(size, 40);
    assert_eq!(onesided_win_size(w, 1, &mut size), ONESIDED_ERR_ARG);
    assert_eq!(onesided_win_disp_unit(w, &mut unit), ONESIDED_SUCCESS);
    assert_eq!(unit, 8);
    assert_eq!(onesided_win_flavor(w, &mut flavor), ONESIDED_SUCCESS);
    assert_eq!(flavor, ONESIDED_FLAVOR_ALLOCATE);
    assert_eq!(onesided_win_base(w, std::ptr::null_mut()), ONESIDED_ERR_ARG);
    assert_eq!(
        onesided_win_size(w, 0, std::ptr::null_mut()),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        onesided_win_disp_unit(w, std::ptr::null_mut()),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        onesided_win_flavor(w, std::ptr::null_mut()),
        ONESIDED_ERR_ARG
    );
    assert_eq!(onesided_win_free(w), ONESIDED_SUCCESS, "{}", last());
    assert_eq!(onesided_win_base(w, &mut base), ONESIDED_ERR_HANDLE);
    assert_eq!(onesided_win_size(w, 0, &mut size), ONESIDED_ERR_HANDLE);
    assert_eq!(onesided_win_disp_unit(w, &mut unit), ONESIDED_ERR_HANDLE);
    assert_eq!(onesided_win_flavor(w, &mut flavor), ONESIDED_ERR_HANDLE);
    assert_eq!(onesided_win_get_info(w, &mut got), ONESIDED_ERR_HANDLE);

    // Over the program's memory, defaults (INFO_NULL): base is that memory.
    let mut mem = [0u16; 6];
    assert_eq!(
        onesided_win_create_with_info(
            world,
            ONESIDED_UINT16,
            mem.as_mut_ptr().cast(),
            6,
            ONESIDED_INFO_NULL,
            &mut w
        ),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(onesided_win_base(w, &mut base), ONESIDED_SUCCESS);
    assert_eq!(base.cast::<u16>(), mem.as_mut_ptr());
    assert_eq!(onesided_win_size(w, 0, &mut size), ONESIDED_SUCCESS);
    assert_eq!(size, 12);
    assert_eq!(onesided_win_flavor(w, &mut flavor), ONESIDED_SUCCESS);
    assert_eq!(flavor, ONESIDED_FLAVOR_CREATE);
    assert_eq!(onesided_win_get_info(w, &mut got), ONESIDED_SUCCESS);
    assert_eq!(hint(got, c"no_locks"), "false");
    assert_eq!(onesided_info_free(got), ONESIDED_SUCCESS);
    // flush_local / flush_local_all inside a lock_all epoch.
    assert_eq!(onesided_flush_local(w, 0), ONESIDED_ERR_EPOCH);
    assert_eq!(onesided_lock_all(w, 0), ONESIDED_SUCCESS);
    let v = [9u16; 2];
    assert_eq!(
        onesided_put(w, ONESIDED_UINT16, v.as_ptr().cast(), 2, 0, 1),
        ONESIDED_SUCCESS
    );
    assert_eq!(onesided_flush_local(w, 0), ONESIDED_SUCCESS, "{}", last());
    assert_eq!(onesided_flush_local(w, 1), ONESIDED_ERR_ARG);
    assert_eq!(onesided_flush_local_all(w), ONESIDED_SUCCESS, "{}", last());
    assert_eq!(onesided_unlock_all(w), ONESIDED_SUCCESS);
    assert_eq!(onesided_win_free(w), ONESIDED_SUCCESS, "{}", last());
    assert_eq!(mem, [0, 9, 9, 0, 0, 0]);
    assert_eq!(onesided_flush_local(w, 0), ONESIDED_ERR_HANDLE);
    assert_eq!(onesided_flush_local_all(w), ONESIDED_ERR_HANDLE);

    // Node-shared with hints; dynamic: no base, size 0.
    let mut info2: onesided_info_t = 0;
    assert_eq!(onesided_info_create(&mut info2), ONESIDED_SUCCESS);
    assert_eq!(
        onesided_info_set(info2, c"alloc_shared_noncontig".as_ptr(), c"true".as_ptr()),
        ONESIDED_SUCCESS
    );
    assert_eq!(
        onesided_win_allocate_shared_with_info(world, ONESIDED_INT32, 3, info2, &mut w),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(onesided_win_flavor(w, &mut flavor), ONESIDED_SUCCESS);
    assert_eq!(flavor, ONESIDED_FLAVOR_SHARED);
    assert_eq!(onesided_win_get_info(w, &mut got), ONESIDED_SUCCESS);
    assert_eq!(hint(got, c"alloc_shared_noncontig"), "true");
    assert_eq!(onesided_info_free(got), ONESIDED_SUCCESS);
    assert_eq!(onesided_win_free(w), ONESIDED_SUCCESS, "{}", last());
    assert_eq!(onesided_info_free(info2), ONESIDED_SUCCESS);
    assert_eq!(
        onesided_win_create_dynamic(world, ONESIDED_INT32, &mut w),
        ONESIDED_SUCCESS
    );
    base = std::ptr::dangling_mut();
    assert_eq!(onesided_win_base(w, &mut base), ONESIDED_SUCCESS);
    assert!(base.is_null());
    assert_eq!(onesided_win_size(w, 0, &mut size), ONESIDED_SUCCESS);
    assert_eq!(size, 0);
    assert_eq!(onesided_win_flavor(w, &mut flavor), ONESIDED_SUCCESS);
    assert_eq!(flavor, ONESIDED_FLAVOR_DYNAMIC);
    assert_eq!(onesided_win_free(w), ONESIDED_SUCCESS, "{}", last());
}

#[allow(unsafe_op_in_unsafe_fn)] // the whole body calls the C API
unsafe fn rget_accumulate_and_request_sets(world: onesided_world_t) {
    let mut w: onesided_win_t = 0;
    assert_eq!(
        onesided_win_allocate(world, ONESIDED_INT64, 4, &mut w),
        ONESIDED_SUCCESS
    );
    assert_eq!(onesided_lock_all(w, 0), ONESIDED_SUCCESS);
    let data: [i64; 4] = [1, 2, 3, 4];
    let mut old = [-1i64; 4];
    let mut rq: onesided_request_t = 0;
    assert_eq!(
        onesided_rget_accumulate(
            w,
            ONESIDED_INT64,
            data.as_ptr().cast(),
            old.as_mut_ptr().cast(),
            4,
            0,
            0,
            ONESIDED_SUM,
            &mut rq
        ),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    // The window is busy until the request is waited for.
    assert_eq!(onesided_unlock_all(w), ONESIDED_SUCCESS);
    assert_eq!(onesided_win_free(w), ONESIDED_ERR_BUSY);
    assert_eq!(onesided_wait(rq), ONESIDED_SUCCESS, "{}", last());
    assert_eq!(old, [0, 0, 0, 0]);
    assert_eq!(onesided_wait(rq), ONESIDED_ERR_HANDLE);
    assert_eq!(onesided_lock_all(w, 0), ONESIDED_SUCCESS);
    // NO_OP with a NULL origin: an atomic read into `old`.
    assert_eq!(
        onesided_rget_accumulate(
            w,
            ONESIDED_INT64,
            std::ptr::null(),
            old.as_mut_ptr().cast(),
            4,
            0,
            0,
            ONESIDED_NO_OP,
            &mut rq
        ),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    let mut done = 0;
    while done == 0 {
        assert_eq!(onesided_test(rq, &mut done), ONESIDED_SUCCESS);
    }
    assert_eq!(old, [1, 2, 3, 4]);
    // A count of 0 with NULL buffers: nothing written, waits fine.
    assert_eq!(
        onesided_rget_accumulate(
            w,
            ONESIDED_INT64,
            std::ptr::null(),
            std::ptr::null_mut(),
            0,
            0,
            0,
            ONESIDED_SUM,
            &mut rq
        ),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(onesided_wait(rq), ONESIDED_SUCCESS, "{}", last());
    // Refusals: NULL result, NULL origin with SUM, NULL req, wrong
    // datatype, unknown op, out of the window.
    let rga = |origin: *const c_void, result: *mut c_void, dt, op, req: *mut u64| {
        onesided_rget_accumulate(w, dt, origin, result, 4, 0, 0, op, req)
    };
    let (o, r) = (data.as_ptr().cast(), old.as_mut_ptr().cast());
    assert_eq!(
        rga(
            o,
            std::ptr::null_mut(),
            ONESIDED_INT64,
            ONESIDED_SUM,
            &mut rq
        ),
        ONESIDED_ERR_ARG
    );
    assert!(last().contains("result"), "{}", last());
    assert_eq!(
        rga(std::ptr::null(), r, ONESIDED_INT64, ONESIDED_SUM, &mut rq),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        rga(o, r, ONESIDED_INT64, ONESIDED_SUM, std::ptr::null_mut()),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        rga(o, r, ONESIDED_INT32, ONESIDED_SUM, &mut rq),
        ONESIDED_ERR_TYPE
    );
    assert_eq!(rga(o, r, ONESIDED_INT64, 99, &mut rq), ONESIDED_ERR_ARG);
    assert_eq!(
        onesided_rget_accumulate(w, ONESIDED_INT64, o, r, 4, 0, 1, ONESIDED_SUM, &mut rq),
        ONESIDED_ERR_OUT_OF_WINDOW
    );
    // Nothing was left pending by the refusals.
    assert_eq!(onesided_unlock_all(w), ONESIDED_SUCCESS);

    // Request sets: rgets of each element.
    assert_eq!(onesided_lock_all(w, 0), ONESIDED_SUCCESS);
    let mut each = [0i64; 4];
    let mut reqs = [0u64; 5];
    for i in 0..4 {
        assert_eq!(
            onesided_rget(
                w,
                ONESIDED_INT64,
                each.as_mut_ptr().add(i).cast(),
                1,
                0,
                i,
                &mut reqs[i + (i >= 2) as usize]
            ),
            ONESIDED_SUCCESS
        );
    }
    assert_eq!(reqs[2], ONESIDED_REQUEST_NULL);
    // Refusals: NULL array, NULL index, a duplicate, a stale handle — all
    // before anything is waited for.
    let mut index: c_int = -7;
    let mut flag: c_int = -7;
    assert_eq!(onesided_waitall(5, std::ptr::null_mut()), ONESIDED_ERR_ARG);
    assert_eq!(
        onesided_waitany(5, reqs.as_mut_ptr(), std::ptr::null_mut()),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        onesided_testany(5, reqs.as_mut_ptr(), &mut index, &mut index),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        onesided_testall(5, reqs.as_mut_ptr(), reqs.as_mut_ptr().cast()),
        ONESIDED_ERR_ARG
    );
    assert!(last().contains("overlaps"), "{}", last());
    let mut dup = [reqs[0], reqs[1], reqs[0]];
    assert_eq!(onesided_waitall(3, dup.as_mut_ptr()), ONESIDED_ERR_ARG);
    assert!(last().contains("twice"), "{}", last());
    assert_eq!(
        onesided_testall(3, dup.as_mut_ptr(), &mut flag),
        ONESIDED_ERR_ARG
    );
    let mut stale = [reqs[0], rq];
    assert_eq!(onesided_waitall(2, stale.as_mut_ptr()), ONESIDED_ERR_HANDLE);
    assert_eq!(
        onesided_waitany(2, stale.as_mut_ptr(), &mut index),
        ONESIDED_ERR_HANDLE
    );
    assert_eq!(
        onesided_testany(2, stale.as_mut_ptr(), &mut index, &mut flag),
        ONESIDED_ERR_HANDLE
    );
    assert_eq!(stale[0], reqs[0]); // untouched
                                   // waitany takes one; testany another; testall/waitall the rest.
    assert_eq!(
        onesided_waitany(5, reqs.as_mut_ptr(), &mut index),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert!((0..5).contains(&index) && index != 2);
    assert_eq!(reqs[index as usize], 0);
    loop {
        assert_eq!(
            onesided_testany(5, reqs.as_mut_ptr(), &mut index, &mut flag),
            ONESIDED_SUCCESS,
            "{}",
            last()
        );
        if flag == 1 {
            break;
        }
    }
    assert!((0..5).contains(&index) && reqs[index as usize] == 0);
    assert_eq!(reqs.iter().filter(|&&h| h != 0).count(), 2);
    loop {
        assert_eq!(
            onesided_testall(5, reqs.as_mut_ptr(), &mut flag),
            ONESIDED_SUCCESS,
            "{}",
            last()
        );
        if flag == 1 {
            break;
        }
    }
    assert_eq!(reqs, [0; 5]);
    assert_eq!(each, [1, 2, 3, 4]);
    // Empty sets.
    assert_eq!(onesided_waitall(5, reqs.as_mut_ptr()), ONESIDED_SUCCESS);
    assert_eq!(onesided_waitall(0, std::ptr::null_mut()), ONESIDED_SUCCESS);
    assert_eq!(
        onesided_waitany(5, reqs.as_mut_ptr(), &mut index),
        ONESIDED_SUCCESS
    );
    assert_eq!(index, ONESIDED_UNDEFINED);
    assert_eq!(
        onesided_testany(5, reqs.as_mut_ptr(), &mut index, &mut flag),
        ONESIDED_SUCCESS
    );
    assert_eq!((index, flag), (ONESIDED_UNDEFINED, 1));
    // waitall over rget_accumulates.
    let (mut a, mut b) = ([0i64; 2], [0i64; 2]);
    let ten = [10i64; 2];
    let mut two = [0u64; 2];
    assert_eq!(
        onesided_rget_accumulate(
            w,
            ONESIDED_INT64,
            ten.as_ptr().cast(),
            a.as_mut_ptr().cast(),
            2,
            0,
            0,
            ONESIDED_SUM,
            &mut two[0]
        ),
        ONESIDED_SUCCESS
    );
    assert_eq!(
        onesided_rget_accumulate(
            w,
            ONESIDED_INT64,
            ten.as_ptr().cast(),
            b.as_mut_ptr().cast(),
            2,
            0,
            2,
            ONESIDED_REPLACE,
            &mut two[1]
        ),
        ONESIDED_SUCCESS
    );
    assert_eq!(
        onesided_waitall(2, two.as_mut_ptr()),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(two, [0, 0]);
    assert_eq!((a, b), ([1, 2], [3, 4]));
    assert_eq!(onesided_unlock_all(w), ONESIDED_SUCCESS);
    let mut all = [0i64; 4];
    assert_eq!(
        onesided_win_read_local(w, ONESIDED_INT64, 0, all.as_mut_ptr().cast(), 4),
        ONESIDED_SUCCESS
    );
    assert_eq!(all, [11, 12, 10, 10]);
    assert_eq!(onesided_win_free(w), ONESIDED_SUCCESS, "{}", last());
    assert_eq!(
        rga(o, r, ONESIDED_INT64, ONESIDED_SUM, &mut rq),
        ONESIDED_ERR_HANDLE
    );
}

#[allow(unsafe_op_in_unsafe_fn)] // the whole body calls the C API
unsafe fn get_accumulate_layout(world: onesided_world_t) {
    // A 3 x 4 grid of int32 0..12; column 1 (the vector from 1).
    let mut w: onesided_win_t = 0;
    assert_eq!(
        onesided_win_allocate(world, ONESIDED_INT32, 12, &mut w),
        ONESIDED_SUCCESS
    );
    let grid: Vec<i32> = (0..12).collect();
    assert_eq!(
        onesided_win_write_local(w, ONESIDED_INT32, 0, grid.as_ptr().cast(), 12),
        ONESIDED_SUCCESS
    );
    let (mut col, mut dense, mut spread) = (0u64, 0u64, 0u64);
    assert_eq!(onesided_layout_vector(3, 1, 4, &mut col), ONESIDED_SUCCESS);
    assert_eq!(
        onesided_layout_vector(1, 3, 3, &mut dense),
        ONESIDED_SUCCESS
    );
    assert_eq!(
        onesided_layout_vector(3, 1, 2, &mut spread),
        ONESIDED_SUCCESS
    );
    assert_eq!(onesided_fence(w, 0), ONESIDED_SUCCESS);
    let add = [100i32, 200, 300];
    let mut res = [-1i32; 5];
    let gal = |origin: *const c_void, ol, result: *mut c_void, rl, dt, tl, op| {
        onesided_get_accumulate_layout(w, dt, origin, 3, ol, result, 5, rl, 0, 1, tl, op)
    };
    let (o, r) = (add.as_ptr().cast(), res.as_mut_ptr().cast());
    assert_eq!(
        gal(o, dense, r, spread, ONESIDED_INT32, col, ONESIDED_SUM),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    // The previous column 1 (1, 5, 9) at result elements 0, 2, 4.
    assert_eq!(res, [1, -1, 5, -1, 9]);
    // Read-only: NO_OP, NULL origin, origin layout 0.
    res = [-1; 5];
    assert_eq!(
        onesided_get_accumulate_layout(
            w,
            ONESIDED_INT32,
            std::ptr::null(),
            0,
            0,
            r,
            5,
            spread,
            0,
            1,
            col,
            ONESIDED_NO_OP
        ),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(res, [101, -1, 205, -1, 309]);
    // Refusals: stale layouts, wrong datatype, overlapping buffers, NULL
    // result, unknown op, out of the window, NULL origin with SUM.
    let mut gone = 0u64;
    assert_eq!(onesided_layout_vector(3, 1, 1, &mut gone), ONESIDED_SUCCESS);
    assert_eq!(onesided_layout_free(gone), ONESIDED_SUCCESS);
    assert_eq!(
        gal(o, dense, r, gone, ONESIDED_INT32, col, ONESIDED_SUM),
        ONESIDED_ERR_HANDLE
    );
    assert!(last().contains("result layout"), "{}", last());
    assert_eq!(
        gal(o, gone, r, spread, ONESIDED_INT32, col, ONESIDED_SUM),
        ONESIDED_ERR_HANDLE
    );
    assert_eq!(
        gal(o, dense, r, spread, ONESIDED_INT32, gone, ONESIDED_SUM),
        ONESIDED_ERR_HANDLE
    );
    assert_eq!(
        gal(o, dense, r, spread, ONESIDED_UINT32, col, ONESIDED_SUM),
        ONESIDED_ERR_TYPE
    );
    assert_eq!(
        gal(
            r.cast_const(),
            dense,
            r,
            spread,
            ONESIDED_INT32,
            col,
            ONESIDED_SUM
        ),
        ONESIDED_ERR_ARG
    );
    assert!(last().contains("overlap"), "{}", last());
    assert_eq!(
        gal(
            o,
            dense,
            std::ptr::null_mut(),
            spread,
            ONESIDED_INT32,
            col,
            ONESIDED_SUM
        ),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        gal(
            std::ptr::null(),
            dense,
            r,
            spread,
            ONESIDED_INT32,
            col,
            ONESIDED_SUM
        ),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        gal(o, dense, r, spread, ONESIDED_INT32, col, 42),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        onesided_get_accumulate_layout(
            w,
            ONESIDED_INT32,
            o,
            3,
            dense,
            r,
            5,
            spread,
            0,
            4,
            col,
            ONESIDED_SUM
        ),
        ONESIDED_ERR_OUT_OF_WINDOW
    );
    assert_eq!(onesided_fence(w, 0), ONESIDED_SUCCESS);
    let mut all = [0i32; 12];
    assert_eq!(
        onesided_win_read_local(w, ONESIDED_INT32, 0, all.as_mut_ptr().cast(), 12),
        ONESIDED_SUCCESS
    );
    assert_eq!(all, [0, 101, 2, 3, 4, 205, 6, 7, 8, 309, 10, 11]);
    assert_eq!(onesided_win_free(w), ONESIDED_SUCCESS, "{}", last());
    assert_eq!(
        gal(o, dense, r, spread, ONESIDED_INT32, col, ONESIDED_SUM),
        ONESIDED_ERR_HANDLE
    );
    assert!(last().contains("window"), "{}", last());
    for l in [col, dense, spread] {
        assert_eq!(onesided_layout_free(l), ONESIDED_SUCCESS);
    }
}

#[allow(unsafe_op_in_unsafe_fn)] // the whole body calls the C API
unsafe fn signals(world: onesided_world_t) {
    let mut w: onesided_win_t = 0;
    assert_eq!(
        onesided_win_allocate(world, ONESIDED_INT32, 8, &mut w),
        ONESIDED_SUCCESS
    );
    assert_eq!(onesided_lock_all(w, 0), ONESIDED_SUCCESS);
    let data = [5i32, 6, 7];
    let (one, mut seen) = (1i32, -1i32);
    let ps = |origin: *const c_void, dt, sd, sig: *const c_void, op| {
        onesided_put_signal(w, dt, origin, 3, 0, 0, sd, sig, op)
    };
    let (d, sig) = (data.as_ptr().cast(), (&one as *const i32).cast());
    assert_eq!(
        ps(d, ONESIDED_INT32, 7, sig, ONESIDED_SIGNAL_ADD),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    let wu = |disp, cmp, value: *const c_void, result: *mut c_void, dt| {
        onesided_wait_until(w, dt, disp, cmp, value, result)
    };
    assert_eq!(
        wu(
            7,
            ONESIDED_CMP_GE,
            sig,
            (&mut seen as *mut i32).cast(),
            ONESIDED_INT32
        ),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(seen, 1);
    let mut got = [0i32; 3];
    assert_eq!(
        onesided_win_read_local(w, ONESIDED_INT32, 0, got.as_mut_ptr().cast(), 3),
        ONESIDED_SUCCESS
    );
    assert_eq!(got, data);
    let forty_two = 42i32;
    let ft = (&forty_two as *const i32).cast();
    assert_eq!(
        ps(d, ONESIDED_INT32, 7, ft, ONESIDED_SIGNAL_SET),
        ONESIDED_SUCCESS
    );
    assert_eq!(
        wu(7, ONESIDED_CMP_EQ, ft, std::ptr::null_mut(), ONESIDED_INT32),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(
        wu(
            7,
            ONESIDED_CMP_NE,
            sig,
            (&mut seen as *mut i32).cast(),
            ONESIDED_INT32
        ),
        ONESIDED_SUCCESS
    );
    assert_eq!(seen, 42);
    // Refusals; a bad signal element moves no data.
    let other = [-1i32; 3];
    let o = other.as_ptr().cast();
    assert_eq!(ps(d, ONESIDED_INT32, 7, sig, 9), ONESIDED_ERR_ARG);
    assert_eq!(
        ps(d, ONESIDED_INT32, 7, std::ptr::null(), ONESIDED_SIGNAL_ADD),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        ps(
            std::ptr::null(),
            ONESIDED_INT32,
            7,
            sig,
            ONESIDED_SIGNAL_ADD
        ),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        ps(d, ONESIDED_FLOAT, 7, sig, ONESIDED_SIGNAL_ADD),
        ONESIDED_ERR_TYPE
    );
    assert_eq!(
        ps(o, ONESIDED_INT32, 8, sig, ONESIDED_SIGNAL_ADD),
        ONESIDED_ERR_OUT_OF_WINDOW
    );
    assert_eq!(onesided_flush_all(w), ONESIDED_SUCCESS);
    assert_eq!(
        onesided_win_read_local(w, ONESIDED_INT32, 0, got.as_mut_ptr().cast(), 3),
        ONESIDED_SUCCESS
    );
    assert_eq!(got, data);
    let r = (&mut seen as *mut i32).cast();
    assert_eq!(wu(7, 0, sig, r, ONESIDED_INT32), ONESIDED_ERR_ARG);
    assert_eq!(
        wu(7, ONESIDED_CMP_EQ, std::ptr::null(), r, ONESIDED_INT32),
        ONESIDED_ERR_ARG
    );
    assert_eq!(
        wu(7, ONESIDED_CMP_EQ, sig, r, ONESIDED_INT8),
        ONESIDED_ERR_TYPE
    );
    assert_eq!(
        wu(8, ONESIDED_CMP_EQ, sig, r, ONESIDED_INT32),
        ONESIDED_ERR_OUT_OF_WINDOW
    );
    assert_eq!(onesided_unlock_all(w), ONESIDED_SUCCESS);
    assert_eq!(onesided_win_free(w), ONESIDED_SUCCESS, "{}", last());
    assert_eq!(
        ps(d, ONESIDED_INT32, 7, sig, ONESIDED_SIGNAL_ADD),
        ONESIDED_ERR_HANDLE
    );
    assert_eq!(
        wu(7, ONESIDED_CMP_EQ, sig, r, ONESIDED_INT32),
        ONESIDED_ERR_HANDLE
    );
}

/// `include/onesided.h` is what cbindgen makes of the sources now
/// (`ONESIDED_BLESS=1` rewrites it).
#[test]
fn header_is_current() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen")
        .write(&mut out);
    let path = dir.join("include/onesided.h");
    if std::env::var_os("ONESIDED_BLESS").is_some() {
        std::fs::write(&path, &out).expect("writing the header");
    }
    let have = std::fs::read(&path).unwrap_or_default();
    assert!(
        have == out,
        "{} is stale: run `ONESIDED_BLESS=1 cargo test -p onesided-c header_is_current`",
        path.display()
    );
}

/// `onesided_alloc_mem` / `onesided_free_mem` (MPI_Alloc_mem,
/// MPI_Free_mem): zeroed, page-aligned, distinct even at 0 bytes, usable
/// as an origin; unknown, twice-freed and NULL pointers.
#[allow(unsafe_op_in_unsafe_fn)]
unsafe fn alloc_and_free_mem(world: onesided_world_t) {
    let mut p: *mut c_void = std::ptr::null_mut();
    assert_eq!(
        onesided_alloc_mem(world, 64, std::ptr::null_mut()),
        ONESIDED_ERR_ARG
    );
    assert_eq!(onesided_alloc_mem(0, 64, &mut p), ONESIDED_ERR_HANDLE);
    assert!(p.is_null());
    assert_eq!(
        onesided_alloc_mem(world, 5 << 20, &mut p),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(p as usize % 4096, 0);
    let bytes = std::slice::from_raw_parts_mut(p.cast::<u8>(), 5 << 20);
    assert!(bytes.iter().all(|&b| b == 0));
    let (mut z1, mut z2): (*mut c_void, *mut c_void) = (std::ptr::null_mut(), std::ptr::null_mut());
    assert_eq!(onesided_alloc_mem(world, 0, &mut z1), ONESIDED_SUCCESS);
    assert_eq!(onesided_alloc_mem(world, 0, &mut z2), ONESIDED_SUCCESS);
    assert!(!z1.is_null() && z1 != z2);
    // As the origin of a put and the destination of a get.
    let words = std::slice::from_raw_parts_mut(p.cast::<i64>(), 4);
    words.copy_from_slice(&[7, 8, 9, 10]);
    let mut w: onesided_win_t = 0;
    assert_eq!(
        onesided_win_allocate(world, ONESIDED_INT64, 4, &mut w),
        ONESIDED_SUCCESS
    );
    assert_eq!(onesided_lock_all(w, 0), ONESIDED_SUCCESS);
    assert_eq!(
        onesided_put(w, ONESIDED_INT64, p, 4, 0, 0),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(onesided_flush(w, 0), ONESIDED_SUCCESS);
    let back = p.cast::<i64>().add(100).cast::<c_void>();
    assert_eq!(
        onesided_get(w, ONESIDED_INT64, back, 4, 0, 0),
        ONESIDED_SUCCESS,
        "{}",
        last()
    );
    assert_eq!(
        std::slice::from_raw_parts(back.cast::<i64>(), 4),
        [7, 8, 9, 10]
    );
    assert_eq!(onesided_unlock_all(w), ONESIDED_SUCCESS);
    assert_eq!(onesided_win_free(w), ONESIDED_SUCCESS);
    // Not from onesided_alloc_mem (a stack address, an interior pointer):
    // refused, nothing freed.
    let mut local = 0u64;
    assert_eq!(
        onesided_free_mem((&mut local as *mut u64).cast()),
        ONESIDED_ERR_ARG
    );
    assert!(last().contains("onesided_alloc_mem"), "{}", last());
    assert_eq!(
        onesided_free_mem(p.cast::<u8>().add(8).cast()),
        ONESIDED_ERR_ARG
    );
    assert_eq!(*p.cast::<i64>(), 7);
    assert_eq!(onesided_free_mem(std::ptr::null_mut()), ONESIDED_SUCCESS);
    for q in [p, z1, z2] {
        assert_eq!(onesided_free_mem(q), ONESIDED_SUCCESS, "{}", last());
        assert_eq!(onesided_free_mem(q), ONESIDED_ERR_ARG);
    }
}
