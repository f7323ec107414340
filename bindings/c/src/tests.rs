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
