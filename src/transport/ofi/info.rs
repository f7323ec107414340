//! `fi_getinfo`: asking libfabric which providers can do RMA, and choosing one.

use std::ffi::{CStr, CString};
use std::ptr::{self, NonNull};

use libfabric_sys as fi;

use super::fault::check;
use crate::error::{Error, Result};

/// The libfabric API version we ask for.
pub const API_VERSION: u32 = fi::fi_version_of(1, 10);

/// Every `mr_mode` bit onesided can honour. `FI_MR_RAW` (keys wider than 64
/// bits) is not among them yet: providers that demand it are not offered.
pub const MR_MODES_HANDLED: u64 = fi::FI_MR_LOCAL
    | fi::FI_MR_VIRT_ADDR
    | fi::FI_MR_ALLOCATED
    | fi::FI_MR_PROV_KEY
    | fi::FI_MR_ENDPOINT;

/// Providers tried, in order, when `ONESIDED_PROVIDER` is not set: native
/// RDMA hardware first, software transports last. `net` (xnet's own RDM
/// endpoint) comes before `tcp` (`tcp;ofi_rxm`, the same sockets under
/// rxm): a rank killed during window creation sometimes crashes a survivor
/// inside rxm's `fi_cq_read`, never on `net` (docs/reliability.md); `tcp`
/// stays as the fallback where `net` is absent. `sockets` is not among
/// them: junk bytes sent to its listening port can crash the rank
/// (libfabric 1.17, docs/reliability.md); it is used only when asked for.
pub const AUTO_ORDER: &[&str] = &["efa", "cxi", "opx", "psm3", "psm2", "net", "tcp"];

/// Known defects of libfabric 1.17's providers that onesided works around
/// or avoids, for `onesided-info` (evidence in docs/reliability.md and
/// docs/transport.md).
pub fn known_defect(provider: &str) -> Option<&'static str> {
    let base = provider.split(';').next().unwrap_or(provider);
    match (base, provider.contains("ofi_rxm")) {
        ("sockets", _) => Some(
            "junk bytes sent to its listening port can crash the rank (SIGSEGV or SIGABRT \
             in the provider) or hang the job, and under heavy message traffic it rarely \
             stops reading one connection (requests then time out); not in the automatic \
             order, used only when ONESIDED_PROVIDER names it",
        ),
        ("tcp", true) => Some(
            "a rank killed while the others are in a collective (window creation) can make a \
             survivor segfault inside fi_cq_read under load; `net` is the automatic choice \
             before it",
        ),
        ("verbs", true) => Some(
            "on soft-RoCE (rxe) emulated atomics may complete twice; use the native verbs \
             back-end (ONESIDED_BACKEND=verbs)",
        ),
        _ => None,
    }
}

/// Which domain (network interface) of the chosen provider to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Iface<'a> {
    /// `ONESIDED_IFACE`: exactly this one (an error if absent).
    Named(&'a str),
    /// A single-machine job: loopback where the provider has it.
    LoopbackIfPresent,
}

/// An owned `fi_info` list, freed with `fi_freeinfo`.
pub struct InfoList {
    head: NonNull<fi::fi_info>,
}

// SAFETY: the list is plain data owned by this value; libfabric keeps no
// reference to it after fi_getinfo returns.
unsafe impl Send for InfoList {}
// SAFETY: shared access only reads the plain data.
unsafe impl Sync for InfoList {}

impl Drop for InfoList {
    fn drop(&mut self) {
        // SAFETY: head came from fi_getinfo/fi_dupinfo and is freed once.
        unsafe { fi::fi_freeinfo(self.head.as_ptr()) }
    }
}

/// One entry of an [`InfoList`].
#[derive(Clone, Copy)]
pub struct InfoRef<'a> {
    info: &'a fi::fi_info,
}

fn cstr(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: libfabric strings in fi_info are NUL-terminated and live as
        // long as the list.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl InfoList {
    /// Asks libfabric for RDM endpoints with RMA (and atomics and messages
    /// where available) that we can drive.
    pub fn query_rdm(require_atomics: bool) -> Result<InfoList> {
        let caps = fi::FI_RMA | fi::FI_MSG | if require_atomics { fi::FI_ATOMIC } else { 0 };
        Self::query(caps)?.ok_or_else(|| {
            Error::NoProvider(
                "fi_getinfo found no RDM provider with RMA (is libfabric installed with its providers? run onesided-info)".into(),
            )
        })
    }

    /// Asks libfabric for RDM endpoints with `caps` under the constraints
    /// onesided runs with (handled `mr_mode` bits, `FI_THREAD_SAFE`, manual
    /// data progress). `None` when no provider matches (`FI_ENODATA`).
    pub fn query(caps: u64) -> Result<Option<InfoList>> {
        // SAFETY: fi_allocinfo returns a zeroed fi_info with all attribute
        // structs allocated, or NULL.
        let hints = unsafe { fi::fi_allocinfo() };
        let hints = NonNull::new(hints)
            .ok_or_else(|| Error::NoProvider("fi_allocinfo returned NULL".into()))?;
        let hints = InfoList { head: hints };
        // SAFETY: hints is a valid, exclusively owned fi_info whose attribute
        // pointers fi_allocinfo filled in.
        unsafe {
            let h = hints.head.as_ptr();
            (*h).caps = caps;
            (*h).mode = 0;
            (*(*h).ep_attr).type_ = fi::FI_EP_RDM;
            (*(*h).domain_attr).mr_mode = MR_MODES_HANDLED as i32;
            (*(*h).domain_attr).threading = fi::FI_THREAD_SAFE;
            // The sockets provider's automatic progress costs ~10 ms per
            // operation; we run our own progress agent instead.
            (*(*h).domain_attr).data_progress = fi::FI_PROGRESS_MANUAL;
        }
        let mut out: *mut fi::fi_info = ptr::null_mut();
        // SAFETY: valid hints; out receives an owned list on success.
        let rc = unsafe {
            fi::fi_getinfo(
                API_VERSION,
                ptr::null(),
                ptr::null(),
                0,
                hints.head.as_ptr(),
                &mut out,
            )
        };
        if rc == -fi::FI_ENODATA {
            return Ok(None);
        }
        check("fi_getinfo", rc, || {
            format!("querying RDM providers with caps {caps:#x}")
        })?;
        Ok(NonNull::new(out).map(|head| InfoList { head }))
    }

    /// Iterates over the entries.
    pub fn iter(&self) -> impl Iterator<Item = InfoRef<'_>> {
        let mut cur: *const fi::fi_info = self.head.as_ptr();
        std::iter::from_fn(move || {
            if cur.is_null() {
                return None;
            }
            // SAFETY: every node of the list is valid while self lives.
            let info = unsafe { &*cur };
            cur = info.next;
            Some(InfoRef { info })
        })
    }

    /// Copies one entry into a list of its own (`fi_dupinfo`).
    pub fn dup(entry: InfoRef<'_>) -> Result<InfoList> {
        // SAFETY: entry points into a live list; fi_dupinfo deep-copies one node.
        let p = unsafe { fi::fi_dupinfo(entry.info) };
        let head = NonNull::new(p).ok_or_else(|| Error::NoProvider("fi_dupinfo failed".into()))?;
        // SAFETY: the copy is exclusively ours; cut it off from the rest.
        unsafe { (*head.as_ptr()).next = ptr::null_mut() };
        Ok(InfoList { head })
    }

    /// Replaces the first entry's source address with the string `addr`
    /// (NUL-terminated, as the shm provider expects its names). The old
    /// address is freed; `fi_freeinfo` frees the new one (both with the C
    /// allocator).
    pub fn set_src_name(&mut self, addr: &str) -> Result<()> {
        let c = CString::new(addr)
            .map_err(|_| Error::InvalidArgument(format!("source address {addr:?}")))?;
        let len = c.as_bytes_with_nul().len();
        // SAFETY: `c` is a valid NUL-terminated string; strdup copies it
        // with malloc, which fi_freeinfo's free() matches.
        let copy = unsafe { nix::libc::strdup(c.as_ptr()) };
        if copy.is_null() {
            return Err(Error::NoProvider(
                "strdup of the endpoint name failed".into(),
            ));
        }
        // SAFETY: the list is exclusively ours (`&mut self`); its src_addr
        // was allocated by libfabric with malloc (or is NULL) and is
        // replaced, not shared.
        unsafe {
            let h = self.head.as_ptr();
            nix::libc::free((*h).src_addr);
            (*h).src_addr = copy.cast();
            (*h).src_addrlen = len;
        }
        Ok(())
    }

    /// The first entry.
    pub fn first(&self) -> InfoRef<'_> {
        InfoRef {
            // SAFETY: head is valid while self lives.
            info: unsafe { self.head.as_ref() },
        }
    }

    /// Raw pointer for calls that take `struct fi_info *`.
    pub fn as_ptr(&self) -> *mut fi::fi_info {
        self.head.as_ptr()
    }

    /// Chooses a provider: `wanted` names one (`tcp`, `shm`, `verbs`, or a
    /// full name like `tcp;ofi_rxm`); `None` walks [`AUTO_ORDER`].
    pub fn select(wanted: Option<&str>, iface: Option<Iface<'_>>) -> Result<InfoList> {
        let list = Self::query_rdm(false)?;
        let pick = match wanted {
            Some(name) => list
                .iter()
                .find(|e| e.provider() == name)
                .or_else(|| list.iter().find(|e| e.core_provider() == name))
                .ok_or_else(|| {
                    // One entry per provider name (a provider lists one
                    // entry per interface and address format).
                    let mut seen: Vec<String> = Vec::new();
                    for p in list.iter().map(|e| e.provider()) {
                        if !seen.contains(&p) {
                            seen.push(p);
                        }
                    }
                    Error::NoProvider(format!(
                        "ONESIDED_PROVIDER={name} is not available with RDM endpoints and RMA; available: {}",
                        seen.join(", ")
                    ))
                })?,
            None => auto_choice(&list)
                .ok_or_else(|| Error::NoProvider("none of the automatic choices is present".into()))?,
        };
        // Several domains of this provider (two NICs): the one closest to
        // this process in the topology (`crate::topology::closest_device`).
        let same_provider: Vec<InfoRef<'_>> = list
            .iter()
            .filter(|e| e.provider() == pick.provider())
            .collect();
        let closest = match crate::topology::closest_here(
            &same_provider.iter().map(|e| e.domain()).collect::<Vec<_>>(),
        ) {
            Some(i) if i < same_provider.len() => same_provider[i],
            _ => pick,
        };
        let pick = match iface {
            None => closest,
            Some(Iface::LoopbackIfPresent) => same_provider
                .iter()
                .copied()
                .find(|e| e.domain() == "lo" && e.fabric().starts_with("127."))
                .unwrap_or(closest),
            Some(Iface::Named(name)) => same_provider
                .iter()
                .copied()
                .find(|e| e.domain() == name)
                .ok_or_else(|| {
                    let mut seen: Vec<String> = same_provider.iter().map(|e| e.domain()).collect();
                    seen.dedup();
                    Error::Config {
                        var: "ONESIDED_IFACE",
                        value: name.to_string(),
                        message: format!(
                            "provider {} has no domain {name}; it has: {}",
                            pick.provider(),
                            seen.join(", ")
                        ),
                    }
                })?,
        };
        // Some providers (ofi_rxm) offer atomics only when asked for them:
        // take the FI_ATOMIC variant of the same provider and domain if any.
        let with_atomics = Self::query(fi::FI_RMA | fi::FI_MSG | fi::FI_ATOMIC)?;
        let same = |e: &InfoRef<'_>| {
            e.provider() == pick.provider()
                && e.fabric() == pick.fabric()
                && e.domain() == pick.domain()
        };
        match with_atomics.as_ref().and_then(|l| l.iter().find(same)) {
            Some(atomic) => Self::dup(atomic),
            None => Self::dup(pick),
        }
    }
}

impl<'a> InfoRef<'a> {
    fn domain_attr(&self) -> &'a fi::fi_domain_attr {
        // SAFETY: fi_getinfo fills every attribute pointer of returned entries.
        unsafe { &*self.info.domain_attr }
    }
    fn tx_attr(&self) -> &'a fi::fi_tx_attr {
        // SAFETY: as above.
        unsafe { &*self.info.tx_attr }
    }
    fn ep_attr(&self) -> &'a fi::fi_ep_attr {
        // SAFETY: as above.
        unsafe { &*self.info.ep_attr }
    }
    fn fabric_attr(&self) -> &'a fi::fi_fabric_attr {
        // SAFETY: as above.
        unsafe { &*self.info.fabric_attr }
    }
    /// Full provider name, e.g. `tcp;ofi_rxm`.
    pub fn provider(&self) -> String {
        cstr(self.fabric_attr().prov_name)
    }
    /// The core provider: `tcp` for `tcp;ofi_rxm`.
    pub fn core_provider(&self) -> String {
        self.provider()
            .split(';')
            .next()
            .unwrap_or_default()
            .to_string()
    }
    /// Fabric name.
    pub fn fabric(&self) -> String {
        cstr(self.fabric_attr().name)
    }
    /// Domain name (the NIC or interface).
    pub fn domain(&self) -> String {
        cstr(self.domain_attr().name)
    }
    /// Capability bits.
    pub fn caps(&self) -> u64 {
        self.info.caps
    }
    /// `mr_mode` bits the provider demands.
    pub fn mr_mode(&self) -> u64 {
        self.domain_attr().mr_mode as u32 as u64
    }
    /// Largest payload for `fi_inject*`.
    pub fn inject_size(&self) -> usize {
        self.tx_attr().inject_size
    }
    /// Remote ranges (`fi_rma_iov`) one RMA call may carry.
    pub fn rma_iov_limit(&self) -> usize {
        self.tx_attr().rma_iov_limit
    }
    /// Local buffers (`iovec`) one call may carry.
    pub fn iov_limit(&self) -> usize {
        self.tx_attr().iov_limit
    }
    /// Largest message.
    pub fn max_msg_size(&self) -> usize {
        self.ep_attr().max_msg_size
    }
    /// Transmit ordering guarantees (`FI_ORDER_*`).
    pub fn msg_order(&self) -> u64 {
        self.tx_attr().msg_order
    }
    /// Data and control progress modes.
    pub fn progress(&self) -> (u32, u32) {
        let d = self.domain_attr();
        (d.data_progress, d.control_progress)
    }
    /// Threading model of the domain (`FI_THREAD_*`).
    pub fn threading(&self) -> u32 {
        self.domain_attr().threading
    }
    /// Endpoint type.
    pub fn ep_type(&self) -> u32 {
        self.ep_attr().type_
    }
    /// Address format.
    pub fn addr_format(&self) -> u32 {
        self.info.addr_format
    }
    /// Raw pointer (for fi_fabric/fi_domain/fi_endpoint).
    pub fn as_ptr(&self) -> *mut fi::fi_info {
        self.info as *const fi::fi_info as *mut fi::fi_info
    }
}

/// The entry [`InfoList::select`] picks without `ONESIDED_PROVIDER`: the
/// first entry of the first provider of [`AUTO_ORDER`] that is present —
/// the provider of exactly that name if listed (`net`, not `net;ofi_rxm`),
/// else the first whose core has that name (`tcp;ofi_rxm`).
pub fn auto_choice(list: &InfoList) -> Option<InfoRef<'_>> {
    AUTO_ORDER.iter().find_map(|name| {
        list.iter()
            .find(|e| e.provider() == *name)
            .or_else(|| list.iter().find(|e| e.core_provider() == *name))
    })
}

/// Names of the set bits of `mr_mode`.
pub fn mr_mode_names(mode: u64) -> Vec<&'static str> {
    [
        (fi::FI_MR_LOCAL, "LOCAL"),
        (fi::FI_MR_RAW, "RAW"),
        (fi::FI_MR_VIRT_ADDR, "VIRT_ADDR"),
        (fi::FI_MR_ALLOCATED, "ALLOCATED"),
        (fi::FI_MR_PROV_KEY, "PROV_KEY"),
        (fi::FI_MR_MMU_NOTIFY, "MMU_NOTIFY"),
        (fi::FI_MR_RMA_EVENT, "RMA_EVENT"),
        (fi::FI_MR_ENDPOINT, "ENDPOINT"),
        (fi::FI_MR_HMEM, "HMEM"),
    ]
    .iter()
    .filter(|(bit, _)| mode & bit != 0)
    .map(|(_, n)| *n)
    .collect()
}

/// Name of a progress mode.
pub fn progress_name(p: u32) -> &'static str {
    match p {
        fi::FI_PROGRESS_AUTO => "auto",
        fi::FI_PROGRESS_MANUAL => "manual",
        _ => "unspec",
    }
}

/// Keeps a C string alive for a libfabric call (hint strings must be
/// `strdup`ed because `fi_freeinfo` frees them; we never hand over ours).
pub fn c_string(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::InvalidArgument(format!("string with NUL byte: {s:?}")))
}
