//! Run-time configuration from environment variables.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `ONESIDED_BACKEND` | `auto` | the transport back-end: `ofi` (libfabric), `verbs` (native ibverbs, device from `ONESIDED_IB_DEVICE`), `loopback` (ranks as threads of one process: only for `World::run_threads`, an error for a launched process), `auto` (unless `ONESIDED_PROVIDER` is set: native verbs when `ONESIDED_IB_DEVICE` names a device — which must then be usable: an absent or DOWN one is an error, not a fall back to libfabric — or an ACTIVE verbs port exists; else libfabric). `onesided-info` prints the choice and why |
//! | `ONESIDED_IB_DEVICE` | automatic | the ibverbs device and port of the native back-end, `rxe0` or `rxe0:1` (unset: the first ACTIVE port with a usable GID); naming one selects the native back-end under `auto` |
//! | `ONESIDED_PROVIDER` | automatic | libfabric provider (`tcp`, `shm`, `sockets`, `verbs`, or a full name like `tcp;ofi_rxm`) |
//! | `ONESIDED_IFACE` | automatic | the libfabric domain (network interface) to use, e.g. `eth0`, `lo`, `ib0`: an error if the provider has no such domain. Unset: `lo` (loopback) when every rank of the job is on this node and the provider has it — a single-machine job listens on no external interface —, else the domain closest to the process |
//! | `ONESIDED_PROGRESS` | `thread` | `thread`: an asynchronous progress agent serves peers while the program computes; `manual`: progress only inside library calls |
//! | `ONESIDED_PROGRESS_CPU` | `auto` | where the progress agent thread (`onesided-agent`) runs: `auto` (a whole core near the NIC/domain that the process is not bound to; unpinned when none is free or without topology information), `none` (never pinned), or a CPU list (`3`, `2,3`, `4-7`); see `crate::topology` |
//! | `ONESIDED_PROGRESS_IDLE_US` | 200 | longest sleep (µs, 200 to 100000) of a *polling* progress agent — on back-ends without a wait object to sleep on: libfabric's net, shm and sockets — once it has served nothing for 20 ms (before that: 200 µs). Measured on net (`examples/busy_target.rs`, 2026-11-28): 200 costs an idle process 7-10 % of a core and the first put+flush after a 30 ms pause to a target computing outside the library 0.4-0.55 ms; 2000 costs 1.2-2.0 % and 1.6-1.7 ms; a stream of operations is served alike (8-13 µs). Back-ends that sleep in the kernel (tcp, verbs) ignore it |
//! | `ONESIDED_WAIT_SLEEP_AFTER_US` | 1000 | how long (µs) a library call waiting for a peer spins and yields before it also sleeps between checks (sleeps of at most 100 µs, an eighth of the time waited so far), so that a rank idle in a barrier or a long lock wait leaves the core to the ranks and kernel threads that are working (on machines with fewer cores than threads); a wait over at once never sleeps. Only where one-sided operations need no CPU at the target and the progress agent sleeps on the back-end's events (native verbs); with `ONESIDED_PROGRESS=manual`, and on libfabric (whose tcp, net, shm and sockets providers carry the data with the target's CPU), waits never sleep: their polls serve the peers. 0: never sleep (spin, then yield, as on a machine with a core per rank) |
//! | `ONESIDED_WAIT_SPIN_US` | 50 | how long (µs) a library call waiting for the network polls back to back — no `pause` instruction, no yield — before it starts yielding the core between polls; only where every local rank has a CPU of its own (otherwise it yields after a short exponential spin, as before). A poll of the completion queue is itself the spin: a `pause` between polls (what a spin on a memory word needs) only delays seeing the completion, by ~140 cycles on current x86 and by a trip through the emulator's main loop under qemu TCG. 0: yield from the first unsuccessful check |
//! | `ONESIDED_ZCOPY_ABOVE` | 262144 | native verbs: a blocking `put` or `get` of at least this many bytes has the NIC read or write the caller's buffer directly (registered with `ibv_reg_mr`, and kept in the registration cache, `ONESIDED_MR_CACHE`), instead of copying through the registered staging slots in 64 KiB chunks. The call waits for the operation either way. A registration that fails (the locked-memory limit) takes the copy path. 0: always copy |
//! | `ONESIDED_MR_CACHE` | 64 | native verbs: registrations of user buffers kept for the next large `put` or `get` from or into the same buffer, least recently used first out. Each is forgotten as soon as its memory is unmapped, moved or emptied (`munmap`, `free` of a large block, `mremap`, `madvise(MADV_DONTNEED)`, a mapping made over it), which a `userfaultfd` of the library's own reports — so an address reused for other memory never hits a stale registration (docs/transport.md). Where no `userfaultfd` can be opened, nothing is kept. 0: register for each operation |
//! | `ONESIDED_MR_CACHE_BYTES` | 0 | native verbs: most bytes of user buffers the cache keeps registered (pinned); 0: a quarter of the locked-memory limit (`RLIMIT_MEMLOCK`), at most 1 GiB. When any registration fails, the cache releases what no operation is using and the registration is tried again |
//! | `ONESIDED_RKEY_CACHE` | 64 | entries of the remote-key cache (peer window base, size, key) |
//! | `ONESIDED_MAX_WINDOWS` | 256 | windows alive at once per process (slots of the window directory) |
//! | `ONESIDED_MAX_ATTACH` | 64 | regions attached at once to one dynamic window per process (entries of its attachment table, 32 bytes each) |
//! | `ONESIDED_TIMEOUT` | 60 | seconds an operation may wait for the network before it fails (0 = forever) |
//! | `ONESIDED_VERBOSE` | 0 | 1 prints the chosen provider and setup to stderr |
//! | `ONESIDED_RMA_SLOTS` | 1024 | operations in flight at once per process (slots of the op table, allocated at start); a post that finds them all in use reads the CQ until one frees |
//! | `ONESIDED_ACCUMULATE` | `auto` | which path accumulates take, decided per window at creation: `auto` (provider atomics when they cover every operation the window may use on its type, else the software path for all of them), `hardware` (provider atomics only; creating a window whose type the provider does not fully cover is an error), `software` (active messages applied by the target's CPU atomics, for every window but dynamic ones) |
//! | `ONESIDED_LOCK` | `auto` | how `lock`/`unlock`/`lock_all` lock a target, decided per window at creation: `hardware` (a lock word driven by 64-bit provider atomics, or CPU atomics when every rank is node-local), `software` (a lock queue at the target served by its progress agent, with one message for lock + one small put/accumulate + unlock), `auto` (the lock word when every rank is node-local or the provider's atomics run on a NIC, the queue where they are emulated by the target's CPU — tcp, sockets, udp, shm — or missing; see docs/semantics.md) |
//! | `ONESIDED_LOCK_QUEUE` | 64 | requests a window's software lock queue holds waiting at once per process; a request beyond it is answered "busy" and retried by its origin |
//! | `ONESIDED_SHM` | 1 | 0 turns the intra-node direct path off: `allocate` memory is not node-shared and the provider carries every operation, also between ranks of one node |
//! | `ONESIDED_SHM_CACHE` | 64 | node-local peer window segments mapped at once (a bounded LRU) |
//! | `ONESIDED_HUGEPAGES` | 1 | 0 maps windows the library allocates privately (`ONESIDED_SHM=0`) with small pages only; 1 maps those of 4 MiB or more on 2-MiB boundaries with `MADV_HUGEPAGE`, so the kernel may back them with transparent huge pages (docs/performance.md, "Huge pages for large windows") |
//! | `ONESIDED_NODE_MAPPING` | from the launcher | overrides which ranks share a node, in `PMI_process_mapping` format (`(vector,(node,nodes,ranks_per_node),...)`); for testing mixed placements on one machine |
//! | `ONESIDED_AGGREGATE` | `auto` | aggregation of small puts and software-path accumulates into BATCH messages (`docs/op-table.md`): `auto` (on for the tcp and sockets providers, off for shm and verbs), `on`, `off` (also sends strided layout puts block by block, which every other setting batches) |
//! | `ONESIDED_AGGREGATE_MAX` | 256 | largest put or accumulate (bytes) that is queued; larger ones go out at once |
//! | `ONESIDED_BATCH_BYTES` | the back-end's message payload (4072; 8168 over rxm; 65512 on `net`) | payload limit of one BATCH message (64 to 65512; above the back-end's payload it is lowered to it) |
//! | `ONESIDED_OP_SLOTS` | 16 | slots of a window's operation table (lists of target elements, by rank) |
//! | `ONESIDED_OP_ELEMENTS` | 4096 | operation elements in the process-global pool |
//! | `ONESIDED_WIN_OP_ELEMENTS` | 256 | operation elements in each window's local pool |
//! | `ONESIDED_TARGET_ELEMENTS` | 64 | target elements (one batch buffer each) in the process-global pool |
//! | `ONESIDED_WIN_TARGET_ELEMENTS` | 4 | target elements in each window's local pool |
//! | `ONESIDED_MR_LOCAL` | 0 | 1 treats the provider as demanding `FI_MR_LOCAL` (registered local buffers, staging), for testing that path on providers that do not need it |
//!
//! A variable of the environment that is not one of these but resembles
//! one ([`misspelling_of`]) is reported by `World::init` and
//! `onesided-info` rather than silently ignored.

use std::time::Duration;

use crate::error::{Error, Result};

/// How progress is made for incoming operations (`ONESIDED_PROGRESS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProgressMode {
    /// A background agent polls the network (default).
    Thread,
    /// Only calls into the library make progress.
    Manual,
}

/// The transport back-end (`ONESIDED_BACKEND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// Chosen by what this machine has.
    Auto,
    /// libfabric.
    Ofi,
    /// Native ibverbs (`verbs`).
    Verbs,
    /// In-process (`loopback`): the ranks are threads of one process,
    /// started by `World::run_threads`; memory copies and CPU atomics move
    /// the data. Selecting it for a launched process is an error.
    Loopback,
}

/// Which path accumulates take (`ONESIDED_ACCUMULATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccumulateMode {
    /// Provider atomics where they cover the window's operations, else software.
    Auto,
    /// Provider atomics only (an error where they do not suffice).
    Hardware,
    /// The software path (active messages, target CPU atomics) everywhere.
    Software,
}

/// How per-target locks are taken (`ONESIDED_LOCK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Decided per provider (see `docs/semantics.md`, "Per-target locks").
    Auto,
    /// The lock word driven by atomics.
    Hardware,
    /// The target-side lock queue served by active messages.
    Software,
}

/// `ONESIDED_AGGREGATE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggregateMode {
    /// On for the providers where it was measured to pay (tcp, sockets).
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

/// Settings of the operation table and its pools (`src/protocols/aggregation/`).
#[derive(Debug, Clone, Copy)]
pub struct OpConfig {
    /// Aggregation policy.
    pub mode: AggregateMode,
    /// Largest operation queued, in bytes.
    pub max_op: usize,
    /// Payload limit of one batch (after [`OpConfig::fit`]: at most the
    /// back-end's message payload).
    pub batch_bytes: usize,
    /// Slots of a window's table.
    pub slots: usize,
    /// Global pool of operation elements.
    pub op_elements: usize,
    /// Per-window pool of operation elements.
    pub win_op_elements: usize,
    /// Global pool of target elements.
    pub target_elements: usize,
    /// Per-window pool of target elements.
    pub win_target_elements: usize,
}

impl OpConfig {
    /// The settings for a back-end whose messages carry `max_payload`
    /// bytes of active-message payload (`ActiveMessages::max_payload`):
    /// a batch is at most that long (`ONESIDED_BATCH_BYTES` only lowers
    /// it), and one operation (a 24-byte entry after the 16-byte batch
    /// header) must fit an empty batch.
    pub fn fit(mut self, max_payload: usize) -> OpConfig {
        self.batch_bytes = self.batch_bytes.min(max_payload).max(64);
        self.max_op = self.max_op.min(self.batch_bytes - 40);
        self
    }

    fn from_env() -> Result<OpConfig> {
        use crate::transport::am::{LARGEST_PAYLOAD, MAX_PAYLOAD};
        let mode = match var("ONESIDED_AGGREGATE").as_deref().map(str::trim) {
            None | Some("auto") => AggregateMode::Auto,
            Some("on" | "1") => AggregateMode::On,
            Some("off" | "0") => AggregateMode::Off,
            Some(v) => {
                return Err(Error::Config {
                    var: "ONESIDED_AGGREGATE",
                    value: v.to_string(),
                    message: "expected `auto`, `on` or `off`".into(),
                })
            }
        };
        // The default is the largest any back-end carries; `fit` lowers it
        // to the back-end's own once the transport is open.
        let batch_bytes = number("ONESIDED_BATCH_BYTES", LARGEST_PAYLOAD, 64, LARGEST_PAYLOAD)?;
        Ok(OpConfig {
            mode,
            max_op: number("ONESIDED_AGGREGATE_MAX", 256, 1, MAX_PAYLOAD)?,
            batch_bytes,
            slots: number("ONESIDED_OP_SLOTS", 16, 1, 1 << 16)?,
            op_elements: number("ONESIDED_OP_ELEMENTS", 4096, 0, 1 << 24)?,
            win_op_elements: number("ONESIDED_WIN_OP_ELEMENTS", 256, 1, 1 << 24)?,
            target_elements: number("ONESIDED_TARGET_ELEMENTS", 64, 0, 1 << 20)?,
            win_target_elements: number("ONESIDED_WIN_TARGET_ELEMENTS", 4, 1, 1 << 20)?,
        })
    }
}

/// Settings read once at `World::init`.
#[derive(Debug, Clone)]
pub struct Config {
    /// The transport back-end.
    pub backend: Backend,
    /// Requested provider, if any.
    pub provider: Option<String>,
    /// `ONESIDED_IFACE`: the libfabric domain (interface) to use, if any.
    pub iface: Option<String>,
    /// Every rank of the job is on this node (set by `World` before the
    /// transport opens; prefers loopback when `iface` is unset).
    pub single_node: bool,
    /// Progress mode.
    pub progress: ProgressMode,
    /// `ONESIDED_PROGRESS_CPU`: where the progress agent is pinned.
    pub progress_cpu: crate::topology::ProgressCpu,
    /// `ONESIDED_PROGRESS_IDLE_US`: longest sleep of a long-idle polling agent.
    pub progress_idle_sleep: std::time::Duration,
    /// `ONESIDED_WAIT_SLEEP_AFTER_US`: how long a wait spins and yields
    /// before it also sleeps; `None` never sleeps.
    pub wait_sleep_after: Option<Duration>,
    /// `ONESIDED_WAIT_SPIN_US`: how long a wait polls back to back before
    /// it yields between polls (where spinning fits).
    pub wait_spin: Duration,
    /// `ONESIDED_ZCOPY_ABOVE`: blocking puts and gets of at least this
    /// many bytes register the caller's buffer (native verbs); 0 never.
    pub zcopy_above: usize,
    /// `ONESIDED_MR_CACHE`: registrations of user buffers kept (native
    /// verbs); 0 keeps none.
    pub mr_cache: usize,
    /// `ONESIDED_MR_CACHE_BYTES`: most bytes of user buffers kept
    /// registered (0: a quarter of the locked-memory limit, at most 1 GiB).
    pub mr_cache_bytes: usize,
    /// Capacity of the remote-key cache.
    pub rkey_cache: usize,
    /// Directory slots (windows alive at once).
    pub max_windows: usize,
    /// Group slots (groups alive at once in one process).
    pub max_groups: usize,
    /// Directory slots of each group (its windows alive at once).
    pub group_windows: usize,
    /// Entries of a dynamic window's attachment table.
    pub max_attach: usize,
    /// Bound on network waits; `None` waits forever.
    pub timeout: Option<Duration>,
    /// Print setup information.
    pub verbose: bool,
    /// Use the `FI_MR_LOCAL` code paths even if the provider does not need them.
    pub force_mr_local: bool,
    /// Slots of the transport's op table (operations in flight at once).
    pub rma_slots: usize,
    /// Accumulate path policy.
    pub accumulate: AccumulateMode,
    /// Lock path policy.
    pub lock: LockMode,
    /// Waiting requests a software lock queue holds.
    pub lock_queue: usize,
    /// Intra-node direct path (node-shared `allocate` memory, load/store).
    pub shm: bool,
    /// Capacity of the cache of mapped peer segments.
    pub shm_cache: usize,
    /// Whether large privately allocated windows are advised for
    /// transparent huge pages (`ONESIDED_HUGEPAGES`).
    pub huge_pages: bool,
    /// Node placement given by `ONESIDED_NODE_MAPPING`, if any.
    pub node_mapping: Option<String>,
    /// Operation table, pools and aggregation.
    pub ops: OpConfig,
}

/// Every `ONESIDED_*` variable the library reads: the table above, the
/// launcher's (`onesided-run` sets `ONESIDED_RANK`, `ONESIDED_SIZE`,
/// `ONESIDED_LAUNCHER_ADDR` and `ONESIDED_JOB_TOKEN` for its ranks),
/// the binaries' log filter (`ONESIDED_LOG`) and the fuzzing harness's
/// (`ONESIDED_FUZZ_SEED`, `ONESIDED_FUZZ_CASES`), and a debugging aid
/// (`ONESIDED_SHOW_SMAPS`).
pub const VARIABLES: &[&str] = &[
    "ONESIDED_ACCUMULATE",
    "ONESIDED_AGGREGATE",
    "ONESIDED_AGGREGATE_MAX",
    "ONESIDED_BACKEND",
    "ONESIDED_BATCH_BYTES",
    "ONESIDED_FUZZ_CASES",
    "ONESIDED_FUZZ_SEED",
    "ONESIDED_GROUP_WINDOWS",
    "ONESIDED_HUGEPAGES",
    "ONESIDED_IB_DEVICE",
    "ONESIDED_IFACE",
    "ONESIDED_JOB_TOKEN",
    "ONESIDED_LAUNCHER_ADDR",
    "ONESIDED_LOCK",
    "ONESIDED_LOCK_QUEUE",
    "ONESIDED_LOG",
    "ONESIDED_MAX_ATTACH",
    "ONESIDED_MAX_GROUPS",
    "ONESIDED_MAX_WINDOWS",
    "ONESIDED_MR_CACHE",
    "ONESIDED_MR_CACHE_BYTES",
    "ONESIDED_MR_LOCAL",
    "ONESIDED_NODE_MAPPING",
    "ONESIDED_OP_ELEMENTS",
    "ONESIDED_OP_SLOTS",
    "ONESIDED_PROGRESS",
    "ONESIDED_PROGRESS_CPU",
    "ONESIDED_PROGRESS_IDLE_US",
    "ONESIDED_PROVIDER",
    "ONESIDED_RANK",
    "ONESIDED_RKEY_CACHE",
    "ONESIDED_RMA_SLOTS",
    "ONESIDED_SHM",
    "ONESIDED_SHM_CACHE",
    "ONESIDED_SHOW_SMAPS",
    "ONESIDED_SIZE",
    "ONESIDED_TARGET_ELEMENTS",
    "ONESIDED_TIMEOUT",
    "ONESIDED_VERBOSE",
    "ONESIDED_WAIT_SLEEP_AFTER_US",
    "ONESIDED_WAIT_SPIN_US",
    "ONESIDED_WIN_OP_ELEMENTS",
    "ONESIDED_WIN_TARGET_ELEMENTS",
    "ONESIDED_ZCOPY_ABOVE",
];

/// The variable of [`VARIABLES`] that `name`, an `ONESIDED_*` name the
/// library does not read, looks like a misspelling of: at most two edits
/// away (`ONESIDED_TIMOUT`, `ONESIDED_PROVIDR`, `ONESIDED_IB_DEVIC`), or
/// the same but for case and dashes (`onesided_timeout`). `None` for a
/// known name and for a name that resembles none (a script's own
/// `ONESIDED_TEST_*`).
pub fn misspelling_of(name: &str) -> Option<&'static str> {
    if VARIABLES.contains(&name) {
        return None;
    }
    let norm = name.to_ascii_uppercase().replace('-', "_");
    VARIABLES
        .iter()
        .map(|&v| (strsim::levenshtein(&norm, v), v))
        .filter(|&(d, _)| d <= 2)
        .min()
        .map(|(_, v)| v)
}

/// The variables of this process's environment that look like misspelt
/// onesided variables, each with the one it resembles (see
/// [`misspelling_of`]). `World::init` reports them as warnings (with
/// `ONESIDED_VERBOSE=1` on stderr too) and `onesided-info` lists them: a
/// misspelt variable is otherwise silently without effect.
pub fn misspelt() -> Vec<(String, &'static str)> {
    std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| is_onesided_name(k))
        .filter_map(|k| misspelling_of(&k).map(|v| (k, v)))
        .collect()
}

/// Whether an environment variable's name is in onesided's namespace:
/// it starts with `ONESIDED_`, in any case (`onesided_timeout` is a
/// misspelling worth reporting, not someone else's variable).
pub fn is_onesided_name(name: &str) -> bool {
    name.get(..9)
        .is_some_and(|p| p.eq_ignore_ascii_case("onesided_"))
}

/// Reports [`misspelt`] variables once per process: a `tracing` warning
/// each, and with `verbose` (`ONESIDED_VERBOSE=1`) a line on stderr.
pub(crate) fn warn_misspelt(verbose: bool) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for (set, meant) in misspelt() {
            let text = format!("{set} is not a onesided variable and has no effect (did you mean {meant}?)");
            tracing::warn!("{text}");
            if verbose {
                eprintln!("onesided: {text}");
            }
        }
    });
}

fn var(name: &'static str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn number(name: &'static str, default: usize, min: usize, max: usize) -> Result<usize> {
    match var(name) {
        None => Ok(default),
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(Error::Config {
                var: name,
                value: v,
                message: format!("expected an integer in {min}..={max}"),
            }),
        },
    }
}

fn flag(name: &'static str) -> bool {
    matches!(var(name).as_deref(), Some("1") | Some("true") | Some("yes"))
}

/// An on/off variable with a default; anything else is an error.
fn switch(name: &'static str, default: bool) -> Result<bool> {
    match var(name).as_deref().map(str::trim) {
        None => Ok(default),
        Some("1" | "true" | "yes" | "on") => Ok(true),
        Some("0" | "false" | "no" | "off") => Ok(false),
        Some(v) => Err(Error::Config {
            var: name,
            value: v.to_string(),
            message: "expected 0 or 1".into(),
        }),
    }
}

impl Config {
    /// What the control region holds (`meta::directory`).
    pub fn layout(&self) -> crate::meta::directory::Layout {
        crate::meta::directory::Layout {
            windows: self.max_windows,
            groups: self.max_groups,
            group_windows: self.group_windows,
        }
    }

    /// Reads the environment.
    pub fn from_env() -> Result<Config> {
        let progress = match var("ONESIDED_PROGRESS").as_deref() {
            None | Some("thread") => ProgressMode::Thread,
            Some("manual") => ProgressMode::Manual,
            Some(v) => {
                return Err(Error::Config {
                    var: "ONESIDED_PROGRESS",
                    value: v.to_string(),
                    message: "expected `thread` or `manual`".into(),
                })
            }
        };
        let accumulate = match var("ONESIDED_ACCUMULATE").as_deref() {
            None | Some("auto") => AccumulateMode::Auto,
            Some("hardware") => AccumulateMode::Hardware,
            Some("software") => AccumulateMode::Software,
            Some(v) => {
                return Err(Error::Config {
                    var: "ONESIDED_ACCUMULATE",
                    value: v.to_string(),
                    message: "expected `auto`, `hardware` or `software`".into(),
                })
            }
        };
        let lock = match var("ONESIDED_LOCK").as_deref() {
            None | Some("auto") => LockMode::Auto,
            Some("hardware") => LockMode::Hardware,
            Some("software") => LockMode::Software,
            Some(v) => {
                return Err(Error::Config {
                    var: "ONESIDED_LOCK",
                    value: v.to_string(),
                    message: "expected `auto`, `hardware` or `software`".into(),
                })
            }
        };
        let backend = match var("ONESIDED_BACKEND").as_deref().map(str::trim) {
            None | Some("auto") => Backend::Auto,
            Some("ofi" | "libfabric") => Backend::Ofi,
            Some("verbs" | "ibverbs") => Backend::Verbs,
            Some("loopback") => Backend::Loopback,
            Some(v) => {
                return Err(Error::Config {
                    var: "ONESIDED_BACKEND",
                    value: v.to_string(),
                    message: "expected `auto`, `ofi`, `verbs` or `loopback`".into(),
                })
            }
        };
        let progress_cpu = match var("ONESIDED_PROGRESS_CPU") {
            None => crate::topology::ProgressCpu::Auto,
            Some(v) => crate::topology::ProgressCpu::parse(&v).map_err(|m| Error::Config {
                var: "ONESIDED_PROGRESS_CPU",
                value: v.clone(),
                message: format!("{m}; expected `auto`, `none` or a CPU list like `3` or `2,4-5`"),
            })?,
        };
        let secs = number("ONESIDED_TIMEOUT", 60, 0, 1 << 30)?;
        let idle_us = number("ONESIDED_PROGRESS_IDLE_US", 200, 200, 100_000)?;
        let sleep_after = number("ONESIDED_WAIT_SLEEP_AFTER_US", 1000, 0, 1 << 30)?;
        let wait_spin = number("ONESIDED_WAIT_SPIN_US", 50, 0, 1_000_000)?;
        Ok(Config {
            backend,
            progress_cpu,
            progress_idle_sleep: std::time::Duration::from_micros(idle_us as u64),
            provider: var("ONESIDED_PROVIDER"),
            iface: var("ONESIDED_IFACE"),
            single_node: false,
            progress,
            wait_sleep_after: (sleep_after > 0).then(|| Duration::from_micros(sleep_after as u64)),
            wait_spin: Duration::from_micros(wait_spin as u64),
            zcopy_above: number("ONESIDED_ZCOPY_ABOVE", 256 * 1024, 0, usize::MAX >> 1)?,
            mr_cache: number("ONESIDED_MR_CACHE", 64, 0, 1 << 16)?,
            mr_cache_bytes: number("ONESIDED_MR_CACHE_BYTES", 0, 0, usize::MAX >> 1)?,
            rkey_cache: number("ONESIDED_RKEY_CACHE", 64, 1, 1 << 24)?,
            max_windows: number("ONESIDED_MAX_WINDOWS", 256, 1, 1 << 20)?,
            max_groups: number("ONESIDED_MAX_GROUPS", 16, 0, 1 << 10)?,
            group_windows: number("ONESIDED_GROUP_WINDOWS", 16, 1, 1 << 16)?,
            max_attach: number("ONESIDED_MAX_ATTACH", 64, 1, 1 << 15)?,
            timeout: (secs > 0).then(|| Duration::from_secs(secs as u64)),
            verbose: flag("ONESIDED_VERBOSE"),
            force_mr_local: flag("ONESIDED_MR_LOCAL"),
            rma_slots: number("ONESIDED_RMA_SLOTS", 1024, 1, 1 << 20)?,
            accumulate,
            lock,
            lock_queue: number("ONESIDED_LOCK_QUEUE", 64, 1, 1 << 16)?,
            shm: switch("ONESIDED_SHM", true)?,
            shm_cache: number("ONESIDED_SHM_CACHE", 64, 1, 1 << 20)?,
            huge_pages: switch("ONESIDED_HUGEPAGES", true)?,
            node_mapping: var("ONESIDED_NODE_MAPPING"),
            ops: OpConfig::from_env()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deliberate misspellings (here and in tests/rma.rs).
    const MISSPELT: [(&str, &str); 7] = [
        ("ONESIDED_TIMOUT", "ONESIDED_TIMEOUT"),
        ("ONESIDED_PROVIDR", "ONESIDED_PROVIDER"),
        ("ONESIDED_IB_DEVIC", "ONESIDED_IB_DEVICE"),
        ("ONESIDED_IBDEVICE", "ONESIDED_IB_DEVICE"),
        ("onesided_shm", "ONESIDED_SHM"),
        ("ONESIDED-TIMEOUT", "ONESIDED_TIMEOUT"),
        ("ONESIDED_BACKEN", "ONESIDED_BACKEND"),
    ];

    #[test]
    fn misspellings_name_the_variable_they_resemble() {
        for (set, meant) in MISSPELT {
            assert_eq!(misspelling_of(set), Some(meant), "{set}");
        }
        for v in VARIABLES {
            assert_eq!(misspelling_of(v), None, "{v} is read");
        }
        assert_eq!(misspelling_of("ONESIDED_SOMETHING_ELSE"), None);
    }

    /// Files of the repository under `dirs` (recursively).
    fn files(dirs: &[&str]) -> Vec<std::path::PathBuf> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut todo: Vec<_> = dirs.iter().map(|d| root.join(d)).collect();
        let mut out = Vec::new();
        while let Some(p) = todo.pop() {
            if p.is_dir() {
                if let Ok(rd) = std::fs::read_dir(&p) {
                    todo.extend(rd.flatten().map(|e| e.path()));
                }
            } else {
                out.push(p);
            }
        }
        out
    }

    /// Every `ONESIDED_*` name in `text` (letters, digits, underscores).
    fn names(text: &str) -> impl Iterator<Item = &str> {
        text.match_indices("ONESIDED_").map(move |(i, _)| {
            let rest = &text[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
    }

    /// The list is complete (every `"ONESIDED_…"` literal of the sources
    /// is in it), and the variables of the project's own scripts, tests
    /// and CI are never reported as misspellings.
    #[test]
    fn the_list_is_complete_and_the_projects_own_variables_are_not_misspellings() {
        let mut read = 0;
        for f in files(&["src"]) {
            let Ok(text) = std::fs::read_to_string(&f) else { continue };
            // This file's tests spell variables wrong on purpose.
            let text = text.split("\n#[cfg(test)]\nmod tests {").next().unwrap_or_default();
            for (i, _) in text.match_indices("\"ONESIDED_") {
                let lit = names(&text[i + 1..]).next().unwrap_or_default();
                if lit.len() > "ONESIDED_".len() && !lit.ends_with('_') {
                    read += 1;
                    assert!(VARIABLES.contains(&lit), "{lit} ({}) is missing from VARIABLES", f.display());
                }
            }
        }
        assert!(read > 40, "only {read} variable literals found");
        let mut seen = 0;
        for f in files(&["scripts", "tests", ".ci", "ci", "benches", "examples", "src"]) {
            let Ok(text) = std::fs::read_to_string(&f) else { continue };
            let deliberate = |n: &str| MISSPELT.iter().any(|(m, _)| *m == n);
            for n in names(&text).filter(|n| n.len() > "ONESIDED_".len() && !n.ends_with('_') && !deliberate(n)) {
                seen += 1;
                assert_eq!(misspelling_of(n), None, "{n} ({}) would be reported", f.display());
            }
        }
        assert!(seen > 100, "only {seen} names found");
    }
}
