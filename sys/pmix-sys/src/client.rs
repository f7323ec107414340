//! The safe PMIx client over [`crate::ffi`].

use std::ffi::{c_char, c_void, CStr};
use std::ptr;

use crate::ffi;
use crate::{c_string, Error, MAX_KEYLEN, RANK_WILDCARD};

extern "C" {
    /// libc's `free`: PMIx allocates the `pmix_value_t` of `PMIx_Get` with
    /// `malloc` and `PMIX_VALUE_RELEASE` frees it with `free`.
    fn free(p: *mut c_void);
}

/// Longest string value copied out of PMIx.
const MAX_VALUE: usize = 1 << 20;

/// A process that called `PMIx_Init`; `PMIx_Finalize` on drop.
///
/// `PMIx_Init`/`PMIx_Finalize` are reference-counted by libpmix, so several
/// clients may exist in one process.
pub struct Client {
    me: ffi::pmix_proc_t,
    namespace: String,
}

// SAFETY: the PMIx client API is thread-safe (each blocking call posts its
// request to libpmix's progress thread and waits on its own lock); `me` is
// read-only after `init`.
unsafe impl Send for Client {}
// SAFETY: as above; `&self` methods only read `me`.
unsafe impl Sync for Client {}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("namespace", &self.namespace)
            .field("rank", &self.me.rank)
            .finish()
    }
}

fn check(call: &'static str, status: ffi::pmix_status_t) -> Result<(), Error> {
    if status == ffi::PMIX_SUCCESS as ffi::pmix_status_t {
        return Ok(());
    }
    // SAFETY: PMIx_Error_string returns a pointer to a static string (or
    // NULL); we copy at most 256 bytes of it.
    let message = unsafe {
        let p = ffi::PMIx_Error_string(status);
        bounded_string(p, 256).unwrap_or_else(|| "(no description)".into())
    };
    Err(Error {
        call,
        status,
        message,
    })
}

/// Copies a NUL-terminated string of at most `max` bytes; `None` for NULL,
/// no terminator within `max`, or bytes that are not UTF-8.
///
/// # Safety
/// `p` is NULL or points to readable memory up to its NUL terminator or `max`
/// bytes, whichever comes first.
unsafe fn bounded_string(p: *const c_char, max: usize) -> Option<String> {
    if p.is_null() {
        return None;
    }
    let mut n = 0;
    // SAFETY: the caller guarantees readability up to the NUL or `max`.
    while n < max && unsafe { *p.add(n) } != 0 {
        n += 1;
    }
    if n == max {
        return None;
    }
    // SAFETY: `p..p+n` is readable and followed by the NUL at `p+n`.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().ok().map(str::to_string)
}

/// A `pmix_info_t` array holding the directives of one call.
struct Infos(Vec<ffi::pmix_info_t>);

impl Infos {
    fn new() -> Self {
        Infos(Vec::new())
    }

    /// Appends `key = value` of PMIx type `ty` (scalar types only: nothing
    /// to destruct afterwards).
    fn push<T>(&mut self, key: &[u8], value: &T, ty: u32) -> Result<(), Error> {
        let key = CStr::from_bytes_with_nul(key).map_err(|_| Error {
            call: "pmix-sys",
            status: 0,
            message: "attribute name without NUL".into(),
        })?;
        let mut info = ffi::pmix_info_t::default();
        // SAFETY: `info` is a zeroed pmix_info_t; `key` is NUL-terminated;
        // `value` points to a live scalar of the type `ty` names, which
        // PMIx_Info_load copies.
        let rc = unsafe {
            ffi::PMIx_Info_load(
                &mut info,
                key.as_ptr(),
                value as *const T as *const c_void,
                ty as ffi::pmix_data_type_t,
            )
        };
        check("PMIx_Info_load", rc)?;
        self.0.push(info);
        Ok(())
    }

    fn timeout(&mut self, secs: Option<u32>) -> Result<(), Error> {
        if let Some(s) = secs {
            let v: i32 = s.min(i32::MAX as u32) as i32;
            self.push(ffi::PMIX_TIMEOUT, &v, ffi::PMIX_INT)?;
        }
        Ok(())
    }

    fn ptr(&self) -> *const ffi::pmix_info_t {
        if self.0.is_empty() {
            ptr::null()
        } else {
            self.0.as_ptr()
        }
    }
}

impl Client {
    /// `PMIx_Init`: connects to the PMIx server named by the environment.
    pub fn init() -> Result<Client, Error> {
        let mut me = ffi::pmix_proc_t::default();
        // SAFETY: `me` is a valid out-parameter; no info array.
        check("PMIx_Init", unsafe {
            ffi::PMIx_Init(&mut me, ptr::null_mut(), 0)
        })?;
        // SAFETY: PMIx_Init filled `me.nspace`, a fixed array; the copy is
        // bounded by its length.
        let namespace = unsafe { bounded_string(me.nspace.as_ptr(), me.nspace.len()) };
        let Some(namespace) = namespace else {
            let c = Client {
                me,
                namespace: String::new(),
            };
            drop(c);
            return Err(Error {
                call: "PMIx_Init",
                status: 0,
                message: "the namespace PMIx returned is not a terminated UTF-8 string".into(),
            });
        };
        Ok(Client { me, namespace })
    }

    /// Our rank in the namespace.
    pub fn rank(&self) -> u32 {
        self.me.rank
    }

    /// Our namespace (the job).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `PMIx_Put(PMIX_GLOBAL, key, string value)`.
    pub fn put(&self, key: &str, value: &str) -> Result<(), Error> {
        let k = c_string("key", key, MAX_KEYLEN)?;
        let v = c_string("value", value, MAX_VALUE)?;
        let mut val = ffi::pmix_value_t::default();
        // SAFETY: for PMIX_STRING, PMIx_Value_load takes the `char*` itself
        // as its data pointer and `strdup`s it into `val` (as
        // PMIX_VALUE_LOAD(v, "text", PMIX_STRING) does).
        let rc = unsafe {
            ffi::PMIx_Value_load(
                &mut val,
                v.as_ptr() as *const c_void,
                ffi::PMIX_STRING as ffi::pmix_data_type_t,
            )
        };
        check("PMIx_Value_load", rc)?;
        // SAFETY: `k` is NUL-terminated; PMIx_Put copies `val`.
        let rc =
            unsafe { ffi::PMIx_Put(ffi::PMIX_GLOBAL as ffi::pmix_scope_t, k.as_ptr(), &mut val) };
        // SAFETY: `val` owns the copy made by PMIx_Value_load.
        unsafe { ffi::PMIx_Value_destruct(&mut val) };
        check("PMIx_Put", rc)
    }

    /// `PMIx_Abort(status, msg)` for every process of our namespace: asks
    /// the launcher's PMIx server to end the whole job (Slurm's step, Open
    /// MPI's job). The server may end this process before the call returns;
    /// if it returns, the request was refused or could not be delivered.
    pub fn abort(&self, status: i32, msg: &str) -> Result<(), Error> {
        let m = c_string("abort message", msg, 1024)?;
        // SAFETY: `m` is NUL-terminated and lives for the call; no procs
        // (NULL, 0) means our whole namespace.
        check("PMIx_Abort", unsafe {
            ffi::PMIx_Abort(status, m.as_ptr(), ptr::null_mut(), 0)
        })
    }

    /// `PMIx_Commit`.
    pub fn commit(&self) -> Result<(), Error> {
        // SAFETY: no arguments.
        check("PMIx_Commit", unsafe { ffi::PMIx_Commit() })
    }

    /// `PMIx_Fence` over every process of our namespace, without collecting
    /// data (`PMIX_COLLECT_DATA = false`: values are fetched on demand by
    /// `get`), optionally bounded by `timeout_secs`.
    pub fn fence(&self, timeout_secs: Option<u32>) -> Result<(), Error> {
        let mut all = self.me;
        all.rank = RANK_WILDCARD;
        let mut infos = Infos::new();
        infos.push(ffi::PMIX_COLLECT_DATA, &false, ffi::PMIX_BOOL)?;
        infos.timeout(timeout_secs)?;
        // SAFETY: one proc, `infos.0.len()` infos, all live for the call.
        check("PMIx_Fence", unsafe {
            ffi::PMIx_Fence(&all, 1, infos.ptr(), infos.0.len())
        })
    }

    /// `PMIx_Get(rank, key)` of a string value; `Ok(None)` when not found.
    /// A remote value not (yet) committed is waited for, up to
    /// `timeout_secs`; one of our own is looked up locally only.
    pub fn get_string(
        &self,
        rank: u32,
        key: &str,
        timeout_secs: Option<u32>,
    ) -> Result<Option<String>, Error> {
        let mut infos = Infos::new();
        infos.timeout(timeout_secs)?;
        if rank == self.me.rank {
            // Our own values are in the local store once put: a missing one
            // is missing, not worth waiting for (PMIx would wait for it to
            // be committed until the timeout).
            infos.push(ffi::PMIX_OPTIONAL, &true, ffi::PMIX_BOOL)?;
        }
        self.get(rank, key, &infos, |v| {
            if v.type_ as u32 != ffi::PMIX_STRING {
                return Err(format!("holds PMIx type {}, not a string", v.type_));
            }
            // SAFETY: the type is PMIX_STRING, so `data.string` is the
            // active member: a NUL-terminated string owned by `v`, or NULL.
            unsafe { bounded_string(v.data.string, MAX_VALUE) }
                .ok_or_else(|| "is not a terminated UTF-8 string".to_string())
        })
    }

    /// A job-level number (`PMIx_Get(WILDCARD, key)`), e.g. `PMIX_JOB_SIZE`.
    pub fn job_u32(&self, key: &str) -> Result<Option<u32>, Error> {
        self.get(RANK_WILDCARD, key, &Infos::new(), |v| {
            // SAFETY: each arm reads the union member the type names.
            let n: u64 = unsafe {
                match v.type_ as u32 {
                    ffi::PMIX_UINT32 | ffi::PMIX_PROC_RANK => v.data.uint32 as u64,
                    ffi::PMIX_UINT16 => v.data.uint16 as u64,
                    ffi::PMIX_UINT64 => v.data.uint64,
                    ffi::PMIX_SIZE => v.data.size as u64,
                    ffi::PMIX_INT | ffi::PMIX_INT32 if v.data.integer >= 0 => v.data.integer as u64,
                    t => return Err(format!("holds PMIx type {t}, not an unsigned number")),
                }
            };
            u32::try_from(n).map_err(|_| format!("value {n} does not fit 32 bits"))
        })
    }

    /// A job-level string, e.g. `PMIX_LOCAL_PEERS` of our namespace.
    pub fn job_string(&self, key: &str) -> Result<Option<String>, Error> {
        self.get_string(RANK_WILDCARD, key, None)
    }

    fn get<T>(
        &self,
        rank: u32,
        key: &str,
        infos: &Infos,
        convert: impl FnOnce(&ffi::pmix_value_t) -> Result<T, String>,
    ) -> Result<Option<T>, Error> {
        let k = c_string("key", key, MAX_KEYLEN)?;
        let mut proc_ = self.me;
        proc_.rank = rank;
        let mut val: *mut ffi::pmix_value_t = ptr::null_mut();
        // SAFETY: `proc_` and `k` live for the call; `val` is an
        // out-parameter PMIx sets to a value it allocated.
        let rc = unsafe { ffi::PMIx_Get(&proc_, k.as_ptr(), infos.ptr(), infos.0.len(), &mut val) };
        if rc == crate::ERR_NOT_FOUND {
            return Ok(None);
        }
        check("PMIx_Get", rc)?;
        if val.is_null() {
            return Err(Error {
                call: "PMIx_Get",
                status: 0,
                message: format!("key '{key}' of rank {rank}: success without a value"),
            });
        }
        // SAFETY: `val` is a valid value PMIx allocated for us.
        let r = convert(unsafe { &*val });
        // SAFETY: release as PMIX_VALUE_RELEASE does: destruct, then free.
        unsafe {
            ffi::PMIx_Value_destruct(val);
            free(val as *mut c_void);
        }
        r.map(Some).map_err(|m| Error {
            call: "PMIx_Get",
            status: 0,
            message: format!("key '{key}' of rank {rank} {m}"),
        })
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // SAFETY: balanced with the PMIx_Init of `init` (reference-counted).
        let _ = unsafe { ffi::PMIx_Finalize(ptr::null(), 0) };
    }
}
