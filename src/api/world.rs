//! The job: who we are, the transport, and the collective barrier.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::bootstrap::node::NodeMap;
use crate::bootstrap::{self, Bootstrap};
use crate::config::{Config, ProgressMode};
use crate::error::{Error, Result};
use crate::meta::directory::MAGIC;
use crate::meta::mappings::Mappings;
use crate::meta::peers::{self, PeerTable};
use crate::meta::rkey_cache::{CacheStats, RkeyCache};
use crate::progress::ProgressAgent;
use crate::protocols::accumulate::AccumulateHandler;
use crate::protocols::pscw::target::PostBox;
use crate::transport::am::{self, ActiveMessages, AmStats};
use crate::transport::exposed::ExposedTable;
use crate::transport::{Memory, Registration, RemoteAddr, SharedTransport, Transport};

/// Per-process counters showing that state grows only with peers contacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorldStats {
    /// Peers whose card was fetched (address-vector entries, control regions).
    pub peers_contacted: usize,
    /// Entries in the transport's address vector.
    pub address_vector_entries: usize,
    /// The remote-key cache.
    pub rkey_cache: CacheStats,
    /// Bytes of the control region (constant: barrier flags + directory).
    pub control_region_bytes: usize,
    /// The transport's counters (operations in flight, rejected and stale completions).
    pub transport: crate::transport::TransportStats,
    /// The active-message layer's counters (protocol errors, requests).
    pub active_messages: AmStats,
    /// Barriers entered so far (`World::barrier`, fences that synchronize,
    /// window free; creation synchronizes by its allreduce, `meta::uniform`,
    /// not counted here).
    pub barriers: u64,
    /// Groups alive in this process (`World::split`, `World::subgroup`;
    /// each holds one of `ONESIDED_MAX_GROUPS` slots).
    pub groups: usize,
    /// The intra-node direct path (operations done by load/store, mappings).
    pub shm: crate::meta::mappings::ShmStats,
    /// The software lock path, as a target (requests granted, queued,
    /// operations applied from lock-op-unlock messages).
    pub locks: crate::protocols::soft_lock::target::LockStats,
    /// Aggregation: batches, queued operations, pool cleanups (`ops`).
    pub ops: crate::protocols::aggregation::OpStats,
    /// Exchanges with the launcher (puts, gets, fences, bytes).
    pub bootstrap: crate::bootstrap::BootstrapStats,
}

/// A running job: rank, size, transport, progress agent.
///
/// Created once per process with [`World::init`] or [`World::builder`].
/// Dropping it is collective (a final barrier, so no peer still needs us),
/// except while panicking; [`World::finalize`] does the same and returns
/// the error.
///
/// # Threads
/// `World` is `Send` and `Sync`: any thread may create windows and call
/// its methods. Collective calls (`barrier`, window creation and `free`)
/// must be made by one thread per process at a time, in the same order on
/// every process, as in MPI.
pub struct World {
    agent: Mutex<Option<ProgressAgent>>,
    ctrl_reg: Registration,
    ctrl: Memory<'static>,
    pub(crate) transport: SharedTransport,
    pub(crate) am: Arc<ActiveMessages>,
    /// Windows open for software accumulates (the handler's registry).
    pub(crate) exposed: Arc<ExposedTable>,
    /// Post notifications received (post/start/complete/wait).
    pub(crate) posts: Arc<PostBox>,
    /// Windows on the software lock path (the lock handler's registry).
    pub(crate) lock_table: Arc<crate::protocols::soft_lock::queue::LockTable>,
    pub(crate) lock_handler: Arc<crate::protocols::soft_lock::target::LockHandler>,
    /// Global pools and counters of the operation tables (`ops`).
    pub(crate) ops: Arc<crate::protocols::aggregation::Shared>,
    pub(crate) boot: Arc<dyn Bootstrap>,
    pub(crate) peers: Arc<PeerTable>,
    pub(crate) rkeys: Mutex<RkeyCache>,
    pub(crate) config: Config,
    pub(crate) node: NodeMap,
    pub(crate) mappings: Mappings,
    /// Peers' control regions found in `mappings`, by rank, lock-free
    /// (`meta::targets::PeerRegions`).
    pub(crate) ctrl_slots: crate::meta::targets::PeerRegions,
    next_window: AtomicU64,
    pub(crate) barrier_epoch: Mutex<u64>,
    /// Group slots: which are taken, the last epoch of each (`api::group`).
    pub(crate) groups: Arc<crate::api::group::GroupTable>,
    /// `finalize` ran: `Drop` has nothing left to do.
    finalized: bool,
    /// This World holds [`JOINED`] (it joined a launched job).
    joined: bool,
}

/// Set while a World of this process is part of a launched job (any
/// bootstrap but the singleton): a process joins its job once, and a
/// second `World::init` meanwhile is refused with an error that says so
/// (the launcher's own refusal names only a rank "already connected").
/// A new World after the first was finalized or dropped joins again.
static JOINED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl World {
    /// Starts the process's part of the job: bootstrap (launcher, PMI or
    /// singleton), transport, control region, progress agent.
    ///
    /// Diagnostics go through [`tracing`](https://docs.rs/tracing) events
    /// under the `onesided` target; the library installs no subscriber (that
    /// is the application's choice), so nothing is printed unless the
    /// application installs one, e.g. `tracing_subscriber::fmt().init()`.
    pub fn init() -> Result<World> {
        Self::builder().init()
    }

    /// A typed configuration, starting from the environment: every
    /// `ONESIDED_*` variable is read (and checked) when
    /// [`WorldBuilder::init`] runs, then the builder's own settings
    /// override it. `World::init()` is `World::builder().init()`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let world = onesided::World::builder()
    ///     .timeout(Some(Duration::from_secs(10)))
    ///     .progress(onesided::ProgressMode::Thread)
    ///     .init()?;
    /// # Ok::<(), onesided::Error>(())
    /// ```
    pub fn builder() -> WorldBuilder {
        WorldBuilder::default()
    }

    fn start(config: Config) -> Result<World> {
        // hwloc's topology (for the agent's placement; a PCI scan and the
        // plugins: ~0.5 s per process in the emulated soft-RoCE guest) loads
        // in the background while the launcher handshake and the back-end
        // open run; `placement_here` then finds it loaded, or waits for it.
        if config.progress == ProgressMode::Thread
            && !matches!(config.progress_cpu, crate::topology::ProgressCpu::None)
        {
            let _ = std::thread::Builder::new()
                .name("onesided-topology".into())
                .spawn(|| {
                    let _ = crate::topology::this_machine();
                });
        }
        use std::sync::atomic::Ordering;
        if JOINED.load(Ordering::Acquire) {
            return Err(Error::InvalidArgument(
                "World::init: this process already joined its job and that World is still \
                 alive: a process joins once (share the first World by reference; a new \
                 World after the first is finalized or dropped joins again)"
                    .into(),
            ));
        }
        let boot: Arc<dyn Bootstrap> = Arc::from(bootstrap::init()?);
        let (rank, size) = (boot.rank(), boot.size());
        let launched = boot.name() != "singleton";
        let mut world = Self::start_with(config, boot, |c| crate::transport::open(c, rank, size))?;
        if launched {
            JOINED.store(true, Ordering::Release);
            world.joined = true;
        }
        Ok(world)
    }

    /// Starts this rank's part of the job on a bootstrap already joined,
    /// opening the transport with `open` (`transport::open`, or the
    /// in-process back-end's endpoint for `run_threads`).
    pub(crate) fn start_with(
        config: Config,
        boot: Arc<dyn Bootstrap>,
        open: impl FnOnce(&Config) -> Result<SharedTransport>,
    ) -> Result<World> {
        let node = bootstrap::node::discover(boot.as_ref(), config.node_mapping.as_deref())?;
        let local_ranks = (0..boot.size()).filter(|&r| node.is_local(r)).count();
        let mut config = config;
        config.single_node = node.all_local();
        let transport: SharedTransport = open(&config)?;
        // Only where one-sided operations need no CPU at the target (RDMA)
        // and a progress agent sleeping on the back-end's events serves the
        // messages that do (native verbs). Where the target's CPU carries
        // the data (libfabric's tcp, net, shm, sockets), a waiting thread's
        // polls are what serves peers promptly and must not doze: with the
        // waits of an idle target napping, a get over net took 118 µs
        // instead of 8, a put over tcp;ofi_rxm 24-37 instead of 14-17.
        let agent_wakes = !transport.caps().needs_target_progress && !transport.event_fds().is_empty();
        let fits = crate::progress::wait::spin_fits(
            local_ranks,
            crate::topology::current_binding().len(),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            crate::topology::online_cpus(),
        );
        crate::progress::wait::local_spin(fits);
        crate::progress::wait::poll_spin(if fits { config.wait_spin } else { std::time::Duration::ZERO });
        crate::progress::wait::sleep_after(match config.progress {
            ProgressMode::Thread if agent_wakes => config.wait_sleep_after,
            _ => None,
        });
        let peers = Arc::new(PeerTable::default());
        let am = {
            // Replies may go to a rank this process never contacted: the
            // resolver fetches its card (no reference cycle with the
            // transport, which holds the dispatcher).
            let (boot, peers, t) = (boot.clone(), peers.clone(), Arc::downgrade(&transport));
            Arc::new(ActiveMessages::new(
                boot.rank(),
                boot.size(),
                config.timeout,
                move |rank| {
                    let t = t
                        .upgrade()
                        .ok_or_else(|| Error::InvalidArgument("the transport is gone".into()))?;
                    peers.control(rank, boot.as_ref(), t.as_ref()).map(|_| ())
                },
            ))
        };
        let exposed = Arc::new(ExposedTable::default());
        am.register(
            am::kind::ACCUMULATE,
            Arc::new(AccumulateHandler {
                table: exposed.clone(),
            }),
        )?;
        transport.set_receiver(am.clone());
        let posts = Arc::new(PostBox::default());
        am.register(am::kind::PSCW, posts.clone())?;
        am.register(
            am::kind::PSCW_COMPLETE,
            Arc::new(crate::protocols::pscw::target::CompleteNotes(posts.clone())),
        )?;
        let lock_table = Arc::new(crate::protocols::soft_lock::queue::LockTable::default());
        let lock_handler = Arc::new(crate::protocols::soft_lock::target::LockHandler::new(
            lock_table.clone(),
            exposed.clone(),
        ));
        am.register(am::kind::LOCK, lock_handler.clone())?;
        // Batches as large as the back-end's messages (`Caps::max_message`).
        let ops = Arc::new(crate::protocols::aggregation::Shared::new(
            config
                .ops
                .fit(ActiveMessages::max_payload(transport.as_ref())),
        ));
        am.register(
            am::kind::BATCH,
            Arc::new(crate::protocols::aggregation::BatchHandler {
                table: exposed.clone(),
                shared: ops.clone(),
            }),
        )?;
        am.register(
            am::kind::GET,
            Arc::new(crate::protocols::aggregation::GetHandler {
                table: exposed.clone(),
                shared: ops.clone(),
            }),
        )?;

        // The agent runs before this rank's card is published: from the
        // moment a peer can address this rank, something here serves it (a
        // verbs handshake, an active message). Started after the barrier,
        // it left a window in which a peer past the barrier could connect
        // while this rank, not yet past its topology wait (`placement_here`:
        // hwloc, 0.5 s per process in the soft-RoCE guest, more under
        // load), served nothing: a CI run's guest saw a rank 3 s late and
        // its peer's handshake time out (ONESIDED_TIMEOUT=3).
        let placement = crate::topology::placement_here(
            &config.progress_cpu,
            Some(transport.caps().domain.as_str()),
            local_ranks,
        )
        .map_err(|m| Error::Config {
            var: "ONESIDED_PROGRESS_CPU",
            value: format!("{:?}", config.progress_cpu),
            message: m,
        })?;
        // The agent shares the application's one CPU: it stands down while
        // an application thread polls (`progress`, "Standing down").
        let binding = crate::topology::current_binding();
        let agent_cpus = placement.cpus.as_ref().unwrap_or(&binding);
        let shares_cpu = agent_cpus.len() == 1 && binding.contains(&agent_cpus[0]);
        let agent = match config.progress {
            ProgressMode::Thread => Some(
                ProgressAgent::start(
                    transport.clone(),
                    placement.cpus.clone(),
                    config.progress_idle_sleep,
                    shares_cpu,
                )
                    .map_err(|e| Error::io("starting the progress agent", e))?,
            ),
            ProgressMode::Manual => None,
        };

        let ctrl = super::node::control_region(&config, boot.rank())?;
        ctrl.store_u64(0, MAGIC)?;
        let ctrl_reg = transport.register(&ctrl)?;
        let card = peers::encode_card(
            transport.card(),
            RemoteAddr {
                addr: ctrl_reg.base,
                key: ctrl_reg.key,
            },
        );
        boot.put(&peers::card_key(boot.rank()), &card)?;
        super::node::publish(boot.as_ref(), &ctrl)?;
        boot.barrier()?;

        if config.verbose {
            let c = transport.caps();
            eprintln!(
                "onesided: rank {}/{} back-end {} {} (fabric {}, domain {}), bootstrap {}, progress {:?} (agent {}), flush by {}",
                boot.rank(),
                boot.size(),
                c.backend,
                c.name,
                c.fabric,
                c.domain,
                boot.name(),
                config.progress,
                placement.reason,
                c.completion.describe(),
            );
        }
        let groups = Arc::new(crate::api::group::GroupTable::new(config.max_groups));
        Ok(World {
            agent: Mutex::new(agent),
            ctrl_reg,
            ctrl,
            transport,
            am,
            exposed,
            posts,
            lock_table,
            lock_handler,
            ops,
            boot,
            peers,
            rkeys: Mutex::new(RkeyCache::new(config.rkey_cache)),
            mappings: Mappings::new(config.shm_cache),
            ctrl_slots: Default::default(),
            node,
            config,
            next_window: AtomicU64::new(1),
            barrier_epoch: Mutex::new(0),
            groups,
            finalized: false,
            joined: false,
        })
    }

    /// This process's rank.
    #[inline]
    pub fn rank(&self) -> usize {
        // The node map's copy of the bootstrap's (`bootstrap::node::discover`).
        self.node.rank()
    }

    /// Number of processes.
    #[inline]
    pub fn size(&self) -> usize {
        self.node.size()
    }

    /// What carries the data: the libfabric provider in use (e.g.
    /// `tcp;ofi_rxm`), or the back-end's device.
    pub fn provider(&self) -> &str {
        &self.transport.caps().name
    }

    /// What the back-end can do (its capability flags). Internal support
    /// (`unstable` feature): the flags are the transport's vocabulary.
    #[cfg(feature = "unstable")]
    pub fn transport_caps(&self) -> &crate::transport::Caps {
        self.transport.caps()
    }

    /// Benchmark support (`onesided-bench --raw`), not a stable API: the
    /// transport under the window layer, so a benchmark can issue the same
    /// operations with no epochs, descriptor lookups or rkey cache and show
    /// the floor beside each figure.
    #[doc(hidden)]
    #[cfg(feature = "unstable")]
    pub fn bench_transport(&self) -> &dyn Transport {
        self.transport.as_ref()
    }

    /// Whether `rank` runs on this node (see `bootstrap::node`).
    pub fn is_node_local(&self, rank: usize) -> bool {
        self.node.is_local(rank)
    }

    /// Whether every rank of the job runs on this node.
    pub fn all_node_local(&self) -> bool {
        self.node.all_local()
    }

    /// How the job was started (`onesided-run`, `pmi1`, `singleton`).
    pub fn bootstrap_name(&self) -> &'static str {
        self.boot.name()
    }

    /// Counters of per-peer state.
    pub fn stats(&self) -> WorldStats {
        WorldStats {
            peers_contacted: self.peers.len(),
            address_vector_entries: self.transport.peer_count(),
            rkey_cache: self.rkeys.lock().map(|c| c.stats()).unwrap_or_default(),
            control_region_bytes: self.ctrl.len(),
            transport: self.transport.stats(),
            active_messages: self.am.stats(),
            barriers: self.barrier_epoch.lock().map(|e| *e).unwrap_or(0),
            groups: self.groups.in_use(),
            shm: self.mappings.stats(),
            locks: self.lock_handler.stats(),
            ops: self.ops.stats(),
            bootstrap: self.boot.stats(),
        }
    }

    /// Internal support, not a stable API: the active-message layer (tests
    /// register handlers of kinds from `am::kind::USER` on).
    #[doc(hidden)]
    #[cfg(feature = "unstable")]
    pub fn active_messages(&self) -> &ActiveMessages {
        &self.am
    }

    /// Waits until every process has called `barrier` (a dissemination
    /// barrier over RMA: ⌈log2 P⌉ rounds, one flag write each, driving
    /// progress while it waits).
    pub fn barrier(&self) -> Result<()> {
        crate::api::group::Team::of(self).barrier()
    }

    /// The control region of `rank`, contacting it first if needed.
    pub(crate) fn control(&self, rank: usize) -> Result<RemoteAddr> {
        self.peers
            .control(rank, self.boot.as_ref(), self.transport.as_ref())
    }

    pub(crate) fn control_memory(&self) -> &Memory<'static> {
        &self.ctrl
    }

    /// The id the next window will get (window creation is collective and
    /// never concurrent within one process).
    pub(crate) fn peek_window_id(&self) -> u64 {
        self.next_window.load(Ordering::Relaxed)
    }

    pub(crate) fn next_window_id(&self) -> u64 {
        self.next_window.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn transport(&self) -> &dyn Transport {
        self.transport.as_ref()
    }
}

impl World {
    /// Leaves the job (collective): waits until every process has finished
    /// its one-sided traffic, then releases the transport and the progress
    /// agent. This is what dropping the `World` does, with the error
    /// returned instead of logged.
    ///
    /// Every process must call it (or drop its `World`) once all its
    /// windows are freed; a process that leaves with `std::process::exit`
    /// instead skips it, and its peers' `finalize` may then fail.
    ///
    /// # Errors
    /// A peer that died or left without finalizing: [`ErrorKind::Timeout`]
    /// (after `ONESIDED_TIMEOUT`) or [`ErrorKind::PeerUnreachable`]. The
    /// local resources are released either way.
    ///
    /// [`ErrorKind::Timeout`]: crate::ErrorKind::Timeout
    /// [`ErrorKind::PeerUnreachable`]: crate::ErrorKind::PeerUnreachable
    pub fn finalize(mut self) -> Result<()> {
        self.finalized = true;
        self.leave()
    }

    /// Ends the whole job from this process: asks the launcher to end every
    /// rank (PMI-1 and PMI-2 `cmd=abort`, `PMIx_Abort`; `onesided-run`
    /// speaks PMI-1), then exits with `code` (1 if `code` is 0). The job
    /// ends under `onesided-run` (also with `--keep-going`),
    /// `mpiexec.hydra`, `srun --mpi=pmi2` and `--mpi=pmix` (also without
    /// `--kill-on-bad-exit`) and Open MPI's `mpirun`.
    /// Nothing is flushed and no collective runs: peers waiting on this
    /// process are ended by the launcher (or, without one that ends jobs,
    /// get an error after `ONESIDED_TIMEOUT`). The process exits within
    /// `ONESIDED_TIMEOUT` even if the launcher never answers the request.
    /// The analogue of `MPI_Abort`.
    pub fn abort(&self, code: i32) -> ! {
        let code = if code == 0 { 1 } else { code };
        let msg = format!("rank {} aborts the job with exit code {code}", self.rank());
        tracing::error!("{msg}");
        // The launcher's abort request first (PMI-1/PMI-2 `cmd=abort`,
        // `PMIx_Abort`, onesided-run's own): it ends the job even where a
        // failed rank alone would not (`srun` without `--kill-on-bad-exit`,
        // `onesided-run --keep-going`).
        if let Some(limit) = self.config.timeout {
            // `PMIx_Abort` waits for its server: one alive but silent must
            // not keep this rank past `ONESIDED_TIMEOUT` (`exit` from two
            // threads is serialized by std).
            let _ = std::thread::Builder::new()
                .name("onesided-abort".into())
                .spawn(move || {
                    std::thread::sleep(limit);
                    std::process::exit(code)
                });
        }
        self.boot.abort(code, &msg);
        std::process::exit(code)
    }

    /// Lets go of this rank's part of the job without the collective end
    /// (`run_threads`, for a rank that failed: its peers are told through
    /// the job, not by a barrier they would wait in).
    pub(crate) fn discard(mut self) {
        self.finalized = true;
    }

    /// The collective end of the job (see [`Drop`]). After a failed RMA
    /// barrier the bootstrap barrier is skipped: a dead peer would never
    /// reach it, and some launchers' barriers have no deadline.
    fn leave(&mut self) -> Result<()> {
        if let Err(e) = self.barrier() {
            self.stop_agent();
            return Err(e);
        }
        if let Ok(mut agent) = self.agent.lock() {
            if agent.is_none() {
                match ProgressAgent::start(
                    self.transport.clone(),
                    None,
                    self.config.progress_idle_sleep,
                    false,
                ) {
                    Ok(a) => *agent = Some(a),
                    Err(e) => tracing::warn!("no progress agent for the final barrier: {e}"),
                }
            }
        }
        let r = self.boot.barrier();
        self.stop_agent();
        r
    }

    fn stop_agent(&self) {
        if let Ok(mut a) = self.agent.lock() {
            a.take();
        }
    }
}

/// Settings for [`World::builder`]; unset ones come from the environment
/// (`ONESIDED_*`, see the crate's configuration table), then defaults.
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until `init` is called"]
pub struct WorldBuilder {
    backend: Option<crate::config::Backend>,
    provider: Option<String>,
    progress: Option<ProgressMode>,
    timeout: Option<Option<std::time::Duration>>,
    direct_path: Option<bool>,
    verbose: Option<bool>,
}

impl WorldBuilder {
    /// The transport back-end (`ONESIDED_BACKEND`).
    pub fn backend(mut self, backend: crate::config::Backend) -> Self {
        self.backend = Some(backend);
        self
    }

    /// The libfabric provider, e.g. `"tcp"`, `"shm"` or `"tcp;ofi_rxm"`
    /// (`ONESIDED_PROVIDER`).
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = Some(provider.into());
        self
    }

    /// Asynchronous progress agent or progress inside library calls only
    /// (`ONESIDED_PROGRESS`).
    pub fn progress(mut self, mode: ProgressMode) -> Self {
        self.progress = Some(mode);
        self
    }

    /// How long any blocking call may wait for peers before it fails;
    /// `None` waits forever, and can then hang on a dead peer
    /// (`ONESIDED_TIMEOUT`, in seconds there, 0 = forever).
    pub fn timeout(mut self, timeout: Option<std::time::Duration>) -> Self {
        self.timeout = Some(timeout.filter(|d| !d.is_zero()));
        self
    }

    /// The intra-node direct path: node-shared window memory accessed by
    /// loads and stores (`ONESIDED_SHM`, on by default).
    pub fn direct_path(mut self, on: bool) -> Self {
        self.direct_path = Some(on);
        self
    }

    /// One line per rank on stderr with the choices made at start
    /// (`ONESIDED_VERBOSE`).
    pub fn verbose(mut self, on: bool) -> Self {
        self.verbose = Some(on);
        self
    }

    /// Starts this process's part of the job (see [`World::init`]).
    ///
    /// # Errors
    /// A malformed `ONESIDED_*` variable ([`crate::ErrorKind::Config`]),
    /// a bootstrap or back-end that cannot start.
    pub fn init(self) -> Result<World> {
        World::start(self.config()?)
    }

    /// The configuration: the environment, then the builder's settings.
    pub(crate) fn config(self) -> Result<Config> {
        let mut c = Config::from_env()?;
        crate::config::warn_misspelt(c.verbose);
        if let Some(b) = self.backend {
            c.backend = b;
        }
        if let Some(p) = self.provider {
            c.provider = Some(p);
        }
        if let Some(p) = self.progress {
            c.progress = p;
        }
        if let Some(t) = self.timeout {
            c.timeout = t;
        }
        if let Some(d) = self.direct_path {
            c.shm = d;
        }
        if let Some(v) = self.verbose {
            c.verbose = v;
        }
        Ok(c)
    }

    /// Whether [`WorldBuilder::direct_path`] was set, and to what.
    pub(crate) fn direct_path_setting(&self) -> Option<bool> {
        self.direct_path
    }
}

impl Drop for World {
    /// Leaving is collective. The RMA barrier completes everyone's traffic,
    /// but its last flag writes are confirmed by reads that the *receivers*
    /// must still serve; a receiver that tore down right after seeing its
    /// flags would cut those reads off (and the writer would stop before
    /// sending its later flags, hanging a third rank). So nobody tears down
    /// before an out-of-band bootstrap barrier, during which the progress
    /// agent keeps serving peers (started for the occasion in manual mode).
    fn drop(&mut self) {
        if !self.finalized && !std::thread::panicking() {
            if let Err(e) = self.leave() {
                tracing::warn!("leaving the job (World dropped): {e}");
            }
        }
        self.stop_agent();
        let _ = &self.ctrl_reg;
        if self.joined {
            JOINED.store(false, std::sync::atomic::Ordering::Release);
        }
    }
}
