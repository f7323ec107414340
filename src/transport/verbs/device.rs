//! Verbs devices: what this machine has (devices, ports, GIDs, limits) and
//! which device, port and GID index the back-end uses.
//!
//! The choice: `ONESIDED_IB_DEVICE` (`rxe0` or `rxe0:1`) or, without it,
//! the first ACTIVE port of the first device that has one. On an Ethernet
//! link layer (RoCE) the GID index is chosen automatically: a RoCE v2 GID,
//! preferring the IPv4-mapped one (`::ffff:a.b.c.d`, on rxe index 1), so
//! that queue pairs carry a GRH that routes over UDP/IPv4. On InfiniBand
//! any GID works (index 0) and the LID addresses the port.

use std::ffi::CStr;
use std::fmt::Write as _;

use rdma_sys as ffi;

use crate::error::{Error, Result};

/// Name of the back-end in errors.
pub(crate) const BACKEND: &str = "ibverbs";

/// One GID table entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidEntry {
    /// Index in the port's GID table.
    pub index: u32,
    /// The 16 bytes, network order.
    pub gid: [u8; 16],
    /// `IB`, `RoCE v1` or `RoCE v2`.
    pub kind: GidKind,
}

/// The type of a GID entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GidKind {
    /// InfiniBand.
    Ib,
    /// RoCE v1 (Ethernet, no IP header).
    RoceV1,
    /// RoCE v2 (UDP/IP).
    RoceV2,
    /// A type this library does not know.
    Other(u32),
}

impl GidKind {
    fn from_raw(t: u32) -> Self {
        match t {
            ffi::IBV_GID_TYPE_IB => GidKind::Ib,
            ffi::IBV_GID_TYPE_ROCE_V1 => GidKind::RoceV1,
            ffi::IBV_GID_TYPE_ROCE_V2 => GidKind::RoceV2,
            o => GidKind::Other(o),
        }
    }

    /// Short text (`IB`, `RoCE v1`, `RoCE v2`).
    pub fn name(&self) -> String {
        match self {
            GidKind::Ib => "IB".into(),
            GidKind::RoceV1 => "RoCE v1".into(),
            GidKind::RoceV2 => "RoCE v2".into(),
            GidKind::Other(o) => format!("type {o}"),
        }
    }
}

impl GidEntry {
    /// The GID in IPv6 notation (an IPv4-mapped GID as `::ffff:a.b.c.d`).
    pub fn text(&self) -> String {
        let v6 = std::net::Ipv6Addr::from(self.gid);
        match v6.to_ipv4_mapped() {
            Some(v4) => format!("::ffff:{v4}"),
            None => v6.to_string(),
        }
    }

    /// Whether the GID is an IPv4-mapped address.
    pub fn is_ipv4_mapped(&self) -> bool {
        std::net::Ipv6Addr::from(self.gid).to_ipv4_mapped().is_some()
    }
}

/// One port of a device.
#[derive(Debug, Clone)]
pub struct PortInfo {
    /// Port number (from 1).
    pub port: u8,
    /// `ACTIVE`, `DOWN`, `INIT`, ...
    pub state: &'static str,
    /// Whether the port is ACTIVE.
    pub active: bool,
    /// `Ethernet` (RoCE) or `InfiniBand`.
    pub link_layer: &'static str,
    /// Active path MTU in bytes.
    pub active_mtu: u32,
    /// Local identifier (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// Non-zero GID table entries.
    pub gids: Vec<GidEntry>,
}

impl PortInfo {
    /// Whether the link layer is Ethernet (RoCE: a GRH is required).
    pub fn is_ethernet(&self) -> bool {
        self.link_layer == "Ethernet"
    }

    /// The GID index queue pairs use on this port, if there is a usable
    /// one: on Ethernet a RoCE v2 GID, IPv4-mapped first; on InfiniBand
    /// the first GID.
    pub fn usable_gid(&self) -> Option<&GidEntry> {
        if self.is_ethernet() {
            let v2 = || self.gids.iter().filter(|g| g.kind == GidKind::RoceV2);
            v2().find(|g| g.is_ipv4_mapped()).or_else(|| v2().next())
        } else {
            self.gids.first()
        }
    }
}

/// A device with its limits and ports.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    /// Device name (`rxe0`, `mlx5_0`).
    pub name: String,
    /// `IBV_ATOMIC_NONE`, `IBV_ATOMIC_HCA` or `IBV_ATOMIC_GLOB`.
    pub atomic_cap: &'static str,
    /// Outstanding RDMA reads and atomics per queue pair (as target).
    pub max_qp_rd_atom: u32,
    /// Outstanding RDMA reads and atomics per queue pair (as initiator).
    pub max_qp_init_rd_atom: u32,
    /// Largest completion queue.
    pub max_cqe: u32,
    /// Largest work queue.
    pub max_qp_wr: u32,
    /// Largest shared receive queue.
    pub max_srq_wr: u32,
    /// Largest message.
    pub max_mr_size: u64,
    /// Inline data a reliable-connection queue pair accepts (probed by
    /// creating one), `None` when the probe failed.
    pub max_inline_data: Option<u32>,
    /// The ports.
    pub ports: Vec<PortInfo>,
}

impl DeviceInfo {
    /// Whether the device executes 64-bit atomics itself (HCA or GLOB).
    pub fn has_atomics(&self) -> bool {
        self.atomic_cap != "IBV_ATOMIC_NONE"
    }
}

/// Which device and port to use: `ONESIDED_IB_DEVICE`, `name` or `name:port`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceSpec {
    /// Device name; `None`: the first with an ACTIVE port.
    pub name: Option<String>,
    /// Port; `None`: the first ACTIVE one.
    pub port: Option<u8>,
}

impl DeviceSpec {
    /// Parses `rxe0`, `rxe0:1` (empty: automatic).
    ///
    /// # Errors
    /// A port that is not a number from 1 to 255: [`Error::Config`].
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(DeviceSpec::default());
        }
        let (name, port) = match s.rsplit_once(':') {
            Some((n, p)) => {
                let port = p
                    .parse::<u8>()
                    .ok()
                    .filter(|&p| p >= 1)
                    .ok_or_else(|| Error::Config {
                        var: "ONESIDED_IB_DEVICE",
                        value: s.to_string(),
                        message: format!("port {p:?} is not a number from 1 to 255"),
                    })?;
                (n, Some(port))
            }
            None => (s, None),
        };
        if name.is_empty() {
            return Err(Error::Config {
                var: "ONESIDED_IB_DEVICE",
                value: s.to_string(),
                message: "expected a device name, as `rxe0` or `rxe0:1`".into(),
            });
        }
        Ok(DeviceSpec {
            name: Some(name.to_string()),
            port,
        })
    }

    /// From `ONESIDED_IB_DEVICE`.
    ///
    /// # Errors
    /// As [`DeviceSpec::parse`].
    pub fn from_env() -> Result<Self> {
        match std::env::var("ONESIDED_IB_DEVICE") {
            Ok(v) => Self::parse(&v),
            Err(_) => Ok(DeviceSpec::default()),
        }
    }
}

/// The device, port and GID the back-end uses.
#[derive(Debug, Clone)]
pub struct Choice {
    /// The device.
    pub device: DeviceInfo,
    /// Index of the port in `device.ports`.
    pub port: PortInfo,
    /// The GID queue pairs use (GRH source).
    pub gid: GidEntry,
}

/// Chooses a device, port and GID among `devices` as `spec` asks.
///
/// # Errors
/// [`Error::Backend`] naming the device: no such device, no ACTIVE port,
/// no usable GID (or, with no device at all, saying so).
pub fn choose(devices: &[DeviceInfo], spec: &DeviceSpec) -> Result<Choice> {
    let err = |ctx: String, msg: String| Error::backend(BACKEND, "device selection", ctx, 0, msg);
    if devices.is_empty() {
        let ctx = match &spec.name {
            Some(n) => format!("opening device {n} (ONESIDED_IB_DEVICE)"),
            None => "looking for an RDMA device".into(),
        };
        return Err(err(
            ctx,
            "no RDMA device on this machine (no ibverbs devices; load rdma_rxe and run \
             `rdma link add rxe0 type rxe netdev <dev>` for soft-RoCE)"
                .into(),
        ));
    }
    let candidates: Vec<&DeviceInfo> = match &spec.name {
        Some(n) => {
            let d = devices.iter().find(|d| &d.name == n).ok_or_else(|| {
                let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
                err(
                    format!("opening device {n} (ONESIDED_IB_DEVICE)"),
                    format!("no device named {n}; devices here: {}", names.join(", ")),
                )
            })?;
            vec![d]
        }
        None => devices.iter().collect(),
    };
    let mut why = String::new();
    for d in &candidates {
        for p in &d.ports {
            if spec.port.is_some_and(|want| want != p.port) {
                continue;
            }
            if !p.active {
                let _ = write!(why, "{}:{} is {}; ", d.name, p.port, p.state);
                continue;
            }
            match p.usable_gid() {
                Some(g) => {
                    return Ok(Choice {
                        device: (*d).clone(),
                        port: p.clone(),
                        gid: g.clone(),
                    })
                }
                None => {
                    let _ = write!(
                        why,
                        "{}:{} ({}) has no usable GID (need a RoCE v2 GID on Ethernet); ",
                        d.name, p.port, p.link_layer
                    );
                }
            }
        }
        if let Some(want) = spec.port {
            if !d.ports.iter().any(|p| p.port == want) {
                let _ = write!(why, "{} has no port {want}; ", d.name);
            }
        }
    }
    let which = match (&spec.name, spec.port) {
        (Some(n), Some(p)) => format!("{n}:{p}"),
        (Some(n), None) => n.clone(),
        _ => "any device".into(),
    };
    Err(err(
        format!("choosing a port of {which}"),
        format!(
            "no ACTIVE port with a usable GID: {}",
            why.trim_end_matches("; ")
        ),
    ))
}

fn port_state(s: u32) -> &'static str {
    match s {
        ffi::IBV_PORT_NOP => "NOP",
        ffi::IBV_PORT_DOWN => "DOWN",
        ffi::IBV_PORT_INIT => "INIT",
        ffi::IBV_PORT_ARMED => "ARMED",
        ffi::IBV_PORT_ACTIVE => "ACTIVE",
        ffi::IBV_PORT_ACTIVE_DEFER => "ACTIVE_DEFER",
        _ => "UNKNOWN",
    }
}

fn atomic_cap(c: u32) -> &'static str {
    match c {
        ffi::IBV_ATOMIC_HCA => "IBV_ATOMIC_HCA",
        ffi::IBV_ATOMIC_GLOB => "IBV_ATOMIC_GLOB",
        _ => "IBV_ATOMIC_NONE",
    }
}

/// Bytes of an `ibv_mtu` value.
pub(crate) fn mtu_bytes(m: u32) -> u32 {
    match m {
        ffi::IBV_MTU_256 => 256,
        ffi::IBV_MTU_512 => 512,
        ffi::IBV_MTU_1024 => 1024,
        ffi::IBV_MTU_2048 => 2048,
        ffi::IBV_MTU_4096 => 4096,
        _ => 0,
    }
}

fn os_err(call: &'static str, ctx: impl Into<String>) -> Error {
    let e = std::io::Error::last_os_error();
    Error::backend(
        BACKEND,
        call,
        ctx,
        e.raw_os_error().unwrap_or(0),
        e.to_string(),
    )
}

/// An asynchronous event of the device (`ibv_get_async_event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AsyncEvent {
    /// The shared receive queue fell below its armed limit (the limit is
    /// disarmed by the event; arm it again).
    SrqLimit,
    /// A queue pair (number) went to the error state (event type).
    QpError(u32, u32),
    /// The port or the device failed (event type).
    Fatal(u32),
    /// Anything else (event type): logged.
    Other(u32),
}

/// An open device context; closed on drop.
pub(crate) struct Context {
    pub(crate) ctx: *mut ffi::ibv_context,
}

// SAFETY: an ibv_context is thread-safe (libibverbs serialises what needs it).
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: ctx came from ibv_open_device and is closed once, after
        // everything made from it (owners hold an Arc of the Context).
        unsafe { ffi::ibv_close_device(self.ctx) };
    }
}

impl Context {
    /// Opens the device named `name`.
    pub(crate) fn open(name: &str) -> Result<Context> {
        let mut n: std::os::raw::c_int = 0;
        // SAFETY: n is a valid out-parameter.
        let list = unsafe { ffi::ibv_get_device_list(&mut n) };
        if list.is_null() {
            return Err(os_err("ibv_get_device_list", format!("opening {name}")));
        }
        let mut found = std::ptr::null_mut();
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: list has n valid entries.
            let dev = unsafe { *list.add(i) };
            // SAFETY: dev is a valid device; the name is a NUL-terminated static string of it.
            let dn = unsafe { CStr::from_ptr(ffi::ibv_get_device_name(dev)) };
            if dn.to_bytes() == name.as_bytes() {
                // SAFETY: dev is valid while the list is.
                found = unsafe { ffi::ibv_open_device(dev) };
                if found.is_null() {
                    let e = os_err("ibv_open_device", format!("opening {name}"));
                    // SAFETY: list freed once.
                    unsafe { ffi::ibv_free_device_list(list) };
                    return Err(e);
                }
                break;
            }
        }
        // SAFETY: freed once; an opened context stays valid after the list is freed.
        unsafe { ffi::ibv_free_device_list(list) };
        if found.is_null() {
            return Err(Error::backend(
                BACKEND,
                "ibv_open_device",
                format!("opening {name}"),
                nix::libc::ENODEV,
                format!("no device named {name}"),
            ));
        }
        // Asynchronous events are read without blocking (`async_events`):
        // the progress engine polls them, never waits in them.
        // SAFETY: `found` is an open context; async_fd is its descriptor.
        let fd = unsafe { (*found).async_fd };
        // SAFETY: fcntl on a descriptor the context owns; only O_NONBLOCK
        // is added to its flags.
        let nonblocking = unsafe {
            let flags = nix::libc::fcntl(fd, nix::libc::F_GETFL);
            flags >= 0 && nix::libc::fcntl(fd, nix::libc::F_SETFL, flags | nix::libc::O_NONBLOCK) == 0
        };
        let ctx = Context { ctx: found };
        if !nonblocking {
            return Err(os_err("fcntl", format!("making {name}'s async event fd non-blocking")));
        }
        Ok(ctx)
    }

    /// The descriptor that becomes readable when an asynchronous event
    /// (SRQ limit, queue pair error, port change) is pending.
    pub(crate) fn async_fd(&self) -> std::os::raw::c_int {
        // SAFETY: ctx is open for as long as self lives.
        unsafe { (*self.ctx).async_fd }
    }

    /// The asynchronous events pending now (none if the queue is empty),
    /// each acknowledged.
    pub(crate) fn async_events(&self) -> Vec<AsyncEvent> {
        let mut out = Vec::new();
        loop {
            let mut ev = ffi::ibv_async_event::default();
            // SAFETY: ctx is open; ev is a valid out-parameter; the fd is
            // non-blocking (set at open), so this returns -1 when empty.
            if unsafe { ffi::ibv_get_async_event(self.ctx, &mut ev) } != 0 {
                break;
            }
            let kind = ev.event_type;
            let event = match kind {
                ffi::IBV_EVENT_SRQ_LIMIT_REACHED => AsyncEvent::SrqLimit,
                ffi::IBV_EVENT_QP_FATAL
                | ffi::IBV_EVENT_QP_REQ_ERR
                | ffi::IBV_EVENT_QP_ACCESS_ERR => {
                    // SAFETY: for these event types the element is the QP
                    // (ibv_get_async_event(3)); it is alive until acked.
                    let qpn = unsafe { ev.element.qp.as_ref().map_or(0, |q| q.qp_num) };
                    AsyncEvent::QpError(qpn, kind)
                }
                ffi::IBV_EVENT_PORT_ERR | ffi::IBV_EVENT_DEVICE_FATAL => AsyncEvent::Fatal(kind),
                other => AsyncEvent::Other(other),
            };
            // SAFETY: every event returned is acknowledged exactly once.
            unsafe { ffi::ibv_ack_async_event(&mut ev) };
            out.push(event);
        }
        out
    }

    /// The valid GIDs of `port`. Read once for every port with
    /// `ibv_query_gid_table` (one command: on soft-RoCE the table has 1,024
    /// slots, nearly all empty, and a query per slot cost ~1,000 system
    /// calls at every start); slot by slot with `ibv_query_gid_ex` where the
    /// kernel lacks that command. `table` caches the whole table between
    /// the ports of one device (`Some(None)`: not available).
    fn gids(
        &self,
        port: u8,
        pa: &ffi::ibv_port_attr,
        table: &mut Option<Option<Vec<ffi::ibv_gid_entry>>>,
    ) -> Vec<GidEntry> {
        let keep = |e: &ffi::ibv_gid_entry| {
            // SAFETY: raw is the union's byte view; every bit pattern is valid.
            let gid = unsafe { e.gid.raw };
            (gid != [0; 16]).then(|| GidEntry {
                index: e.gid_index,
                gid,
                kind: GidKind::from_raw(e.gid_type),
            })
        };
        let whole = table.get_or_insert_with(|| self.gid_table());
        if let Some(all) = whole {
            return all
                .iter()
                .filter(|e| e.port_num == u32::from(port))
                .filter_map(keep)
                .collect();
        }
        let mut gids = Vec::new();
        for index in 0..u32::try_from(pa.gid_tbl_len).unwrap_or(0) {
            // SAFETY: ibv_gid_entry is plain data; all-zero is valid.
            let mut e: ffi::ibv_gid_entry = unsafe { std::mem::zeroed() };
            // SAFETY: ctx is open; e is a valid out-parameter of the size passed by the wrapper.
            let rc = unsafe { ffi::ibv_query_gid_ex(self.ctx, u32::from(port), index, &mut e, 0) };
            if rc != 0 {
                continue; // empty entry (ENODATA) or not readable
            }
            gids.extend(keep(&e));
        }
        gids
    }

    /// Every valid GID entry of every port in one `ibv_query_gid_table`
    /// call; `None` when the call fails (an old kernel without the command).
    fn gid_table(&self) -> Option<Vec<ffi::ibv_gid_entry>> {
        // Room for every slot of every port (the call fails with EINVAL
        // when the valid entries do not fit).
        let mut cap = 0usize;
        let mut attr = ffi::ibv_device_attr::default();
        // SAFETY: ctx is open; attr is a valid out-parameter.
        if unsafe { ffi::ibv_query_device(self.ctx, &mut attr) } != 0 {
            return None;
        }
        for port in 1..=attr.phys_port_cnt {
            let mut pa = ffi::ibv_port_attr::default();
            // SAFETY: ctx is open; pa is a valid out-parameter.
            if unsafe { ffi::ibv_query_port(self.ctx, port, &mut pa) } != 0 {
                return None;
            }
            cap += usize::try_from(pa.gid_tbl_len).unwrap_or(0);
        }
        // SAFETY: ibv_gid_entry is plain data; all-zero is valid.
        let mut v: Vec<ffi::ibv_gid_entry> = vec![unsafe { std::mem::zeroed() }; cap.max(1)];
        // SAFETY: ctx is open; v has room for `v.len()` entries, the
        // count passed; the call writes at most that many.
        let n = unsafe { ffi::ibv_query_gid_table(self.ctx, v.as_mut_ptr(), v.len(), 0) };
        let n = usize::try_from(n).ok()?;
        v.truncate(n.min(v.len()));
        Some(v)
    }

    /// The device's limits and ports.
    pub(crate) fn describe(&self, name: &str) -> Result<DeviceInfo> {
        let mut attr = ffi::ibv_device_attr::default();
        // SAFETY: ctx is open; attr is a valid out-parameter.
        let rc = unsafe { ffi::ibv_query_device(self.ctx, &mut attr) };
        if rc != 0 {
            return Err(Error::backend(
                BACKEND,
                "ibv_query_device",
                format!("querying {name}"),
                rc,
                std::io::Error::from_raw_os_error(rc).to_string(),
            ));
        }
        let mut ports = Vec::new();
        let mut table = None;
        for port in 1..=attr.phys_port_cnt {
            let mut pa = ffi::ibv_port_attr::default();
            // SAFETY: ctx is open; pa is a valid out-parameter.
            let rc = unsafe { ffi::ibv_query_port(self.ctx, port, &mut pa) };
            if rc != 0 {
                return Err(Error::backend(
                    BACKEND,
                    "ibv_query_port",
                    format!("querying {name}:{port}"),
                    rc,
                    std::io::Error::from_raw_os_error(rc).to_string(),
                ));
            }
            let gids = self.gids(port, &pa, &mut table);
            let state = port_state(pa.state);
            ports.push(PortInfo {
                port,
                state,
                active: pa.state == ffi::IBV_PORT_ACTIVE,
                link_layer: if u32::from(pa.link_layer) == ffi::IBV_LINK_LAYER_ETHERNET {
                    "Ethernet"
                } else {
                    "InfiniBand"
                },
                active_mtu: mtu_bytes(pa.active_mtu),
                lid: pa.lid,
                gids,
            });
        }
        let u = |v: std::os::raw::c_int| u32::try_from(v).unwrap_or(0);
        Ok(DeviceInfo {
            name: name.to_string(),
            atomic_cap: atomic_cap(attr.atomic_cap),
            max_qp_rd_atom: u(attr.max_qp_rd_atom),
            max_qp_init_rd_atom: u(attr.max_qp_init_rd_atom),
            max_cqe: u(attr.max_cqe),
            max_qp_wr: u(attr.max_qp_wr),
            max_srq_wr: u(attr.max_srq_wr),
            max_mr_size: attr.max_mr_size,
            max_inline_data: self.probe_inline(),
            ports,
        })
    }

    /// Inline data an RC queue pair accepts: creates one (and a PD and a
    /// CQ) asking for decreasing amounts, reports what the device granted.
    fn probe_inline(&self) -> Option<u32> {
        // SAFETY: ctx is open.
        let pd = unsafe { ffi::ibv_alloc_pd(self.ctx) };
        if pd.is_null() {
            return None;
        }
        // SAFETY: ctx is open; no channel, no context.
        let cq = unsafe {
            ffi::ibv_create_cq(self.ctx, 4, std::ptr::null_mut(), std::ptr::null_mut(), 0)
        };
        let mut granted = None;
        if !cq.is_null() {
            for want in [1024u32, 512, 256, 128, 64, 0] {
                // SAFETY: plain data; all-zero is valid.
                let mut init: ffi::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
                init.send_cq = cq;
                init.recv_cq = cq;
                init.qp_type = ffi::IBV_QPT_RC;
                init.cap.max_send_wr = 1;
                init.cap.max_recv_wr = 1;
                init.cap.max_send_sge = 1;
                init.cap.max_recv_sge = 1;
                init.cap.max_inline_data = want;
                // SAFETY: pd and cq are valid; init is fully initialised.
                let qp = unsafe { ffi::ibv_create_qp(pd, &mut init) };
                if !qp.is_null() {
                    granted = Some(init.cap.max_inline_data);
                    // SAFETY: qp was just created and is destroyed once.
                    unsafe { ffi::ibv_destroy_qp(qp) };
                    break;
                }
            }
            // SAFETY: cq has no queue pair left; destroyed once.
            unsafe { ffi::ibv_destroy_cq(cq) };
        }
        // SAFETY: nothing made from pd is left; freed once.
        unsafe { ffi::ibv_dealloc_pd(pd) };
        granted
    }
}

/// The verbs devices of this machine with their ports, GIDs and limits
/// (empty when there are none, e.g. without the kernel's RDMA support).
///
/// # Errors
/// A device that cannot be opened or queried.
pub fn devices() -> Result<Vec<DeviceInfo>> {
    let names = device_names()?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let ctx = Context::open(&name)?;
        out.push(ctx.describe(&name)?);
    }
    Ok(out)
}

/// Names of the verbs devices (empty without RDMA support).
///
/// # Errors
/// `ibv_get_device_list` failing for another reason than missing support.
pub fn device_names() -> Result<Vec<String>> {
    if ffi::device_count().map_err(|e| {
        Error::backend(
            BACKEND,
            "ibv_get_device_list",
            "listing devices",
            e.raw_os_error().unwrap_or(0),
            e.to_string(),
        )
    })? == 0
    {
        return Ok(Vec::new());
    }
    let mut n: std::os::raw::c_int = 0;
    // SAFETY: n is a valid out-parameter.
    let list = unsafe { ffi::ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Ok(Vec::new());
    }
    let mut names = Vec::new();
    for i in 0..usize::try_from(n).unwrap_or(0) {
        // SAFETY: list has n valid entries; each name is NUL-terminated.
        let name = unsafe { CStr::from_ptr(ffi::ibv_get_device_name(*list.add(i))) };
        names.push(name.to_string_lossy().into_owned());
    }
    // SAFETY: freed once; no device pointer is kept.
    unsafe { ffi::ibv_free_device_list(list) };
    Ok(names)
}

/// Whether an ACTIVE port with a usable GID exists (what `auto` asks).
pub fn usable_port_exists() -> bool {
    devices()
        .ok()
        .is_some_and(|d| choose(&d, &DeviceSpec::default()).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gid(index: u32, bytes: [u8; 16], kind: GidKind) -> GidEntry {
        GidEntry {
            index,
            gid: bytes,
            kind,
        }
    }

    fn rxe_like(state: &'static str) -> DeviceInfo {
        let mut ll = [0u8; 16];
        ll[0] = 0xfe;
        ll[1] = 0x80;
        ll[15] = 1;
        let mut v4 = [0u8; 16];
        v4[10] = 0xff;
        v4[11] = 0xff;
        v4[12..].copy_from_slice(&[192, 0, 2, 1]);
        DeviceInfo {
            name: "rxe0".into(),
            atomic_cap: "IBV_ATOMIC_HCA",
            max_qp_rd_atom: 128,
            max_qp_init_rd_atom: 128,
            max_cqe: 32767,
            max_qp_wr: 1 << 20,
            max_srq_wr: 1 << 20,
            max_mr_size: u64::MAX,
            max_inline_data: Some(256),
            ports: vec![PortInfo {
                port: 1,
                state,
                active: state == "ACTIVE",
                link_layer: "Ethernet",
                active_mtu: 4096,
                lid: 0,
                gids: vec![gid(0, ll, GidKind::RoceV2), gid(1, v4, GidKind::RoceV2)],
            }],
        }
    }

    #[test]
    fn spec_parses() {
        assert_eq!(DeviceSpec::parse("").unwrap(), DeviceSpec::default());
        assert_eq!(
            DeviceSpec::parse("rxe0:1").unwrap(),
            DeviceSpec {
                name: Some("rxe0".into()),
                port: Some(1)
            }
        );
        assert_eq!(DeviceSpec::parse("mlx5_0").unwrap().port, None);
        for bad in ["rxe0:0", "rxe0:x", ":1", "rxe0:300"] {
            let e = DeviceSpec::parse(bad).unwrap_err();
            assert!(e.to_string().contains("ONESIDED_IB_DEVICE"), "{bad}: {e}");
        }
    }

    #[test]
    fn chooses_the_ipv4_mapped_roce_v2_gid() {
        let c = choose(&[rxe_like("ACTIVE")], &DeviceSpec::default()).unwrap();
        assert_eq!(c.device.name, "rxe0");
        assert_eq!(c.gid.index, 1);
        assert_eq!(c.gid.text(), "::ffff:192.0.2.1");
    }

    #[test]
    fn a_named_device_is_named_when_there_is_none() {
        let spec = DeviceSpec::parse("mlx5_0:1").unwrap();
        let s = choose(&[], &spec).unwrap_err().to_string();
        assert!(s.contains("mlx5_0") && s.contains("ONESIDED_IB_DEVICE"), "{s}");
        let s = choose(&[rxe_like("ACTIVE")], &spec).unwrap_err().to_string();
        assert!(s.contains("no device named mlx5_0; devices here: rxe0"), "{s}");
    }

    #[test]
    fn errors_name_the_device() {
        let e = choose(&[rxe_like("DOWN")], &DeviceSpec::default()).unwrap_err();
        let s = e.to_string();
        assert!(s.contains("rxe0:1 is DOWN"), "{s}");
        let mut no_gid = rxe_like("ACTIVE");
        no_gid.ports[0].gids.retain(|g| g.kind != GidKind::RoceV2);
        let s = choose(&[no_gid], &DeviceSpec::default())
            .unwrap_err()
            .to_string();
        assert!(s.contains("rxe0:1") && s.contains("no usable GID"), "{s}");
        let s = choose(&[rxe_like("ACTIVE")], &DeviceSpec::parse("mlx5_0").unwrap())
            .unwrap_err()
            .to_string();
        assert!(s.contains("no device named mlx5_0") && s.contains("rxe0"), "{s}");
        let s = choose(&[rxe_like("ACTIVE")], &DeviceSpec::parse("rxe0:2").unwrap())
            .unwrap_err()
            .to_string();
        assert!(s.contains("rxe0 has no port 2"), "{s}");
        let s = choose(&[], &DeviceSpec::default()).unwrap_err().to_string();
        assert!(s.contains("no RDMA device"), "{s}");
    }

    #[test]
    fn enumerating_devices_works_with_or_without_hardware() {
        // On this host (no RDMA in the kernel) the list is empty; in the
        // soft-RoCE guest it has rxe0. Either way no error.
        let d = devices().expect("listing verbs devices");
        eprintln!("verbs devices: {:?}", d.iter().map(|d| &d.name).collect::<Vec<_>>());
    }
}
