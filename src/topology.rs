//! Where this process sits on its machine (hwloc, through `hwlocality`), and
//! the placement choices made from it:
//!
//! * the progress agent's CPUs (`ONESIDED_PROGRESS_CPU=auto|none|<list>`,
//!   [`agent_placement`]);
//! * the device (libfabric domain) closest to the process when a provider
//!   offers several ([`closest_device`]);
//! * window memory on the calling process's NUMA node: pages are touched by
//!   the creating thread at allocation (first-touch, [`first_touch`]), so
//!   the kernel's default local policy places them on the node that thread
//!   runs on — not where the progress agent or a peer's first write would.
//!
//! Every choice is a pure function of [`Facts`] (plain data extracted from a
//! topology) and the process's CPU binding, so it is tested on synthetic
//! and XML topologies (`tests/data/two-numa-two-nics.xml`: 2 NUMA nodes,
//! 2 NICs). hwloc itself honours `HWLOC_XMLFILE` and `HWLOC_SYNTHETIC` when
//! it loads "this machine", so a whole job can be run against a described
//! topology; the library never sets those variables. Without topology
//! information (hwloc fails), every choice degrades to the behaviour
//! before topology support (agent unpinned, first domain) with a note.

use std::sync::OnceLock;

use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::types::{OSDeviceType, ObjectType};
use hwlocality::topology::builder::TypeFilter;
use hwlocality::Topology;

/// A processing unit (hardware thread).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pu {
    /// OS index (what `sched_setaffinity` and `Cpus_allowed_list` use).
    pub os: usize,
    /// OS index of its core (the PU itself when the topology has no cores).
    pub core: usize,
    /// OS index of its NUMA node, if known.
    pub numa: Option<usize>,
}

/// A network device: a `Net` interface (`eth0`, `ib0`) or an
/// `OpenFabrics` HCA (`mlx5_0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// The OS name, as libfabric names domains (tcp: interface; verbs: HCA).
    pub name: String,
    /// `"net"` or `"openfabrics"`.
    pub kind: &'static str,
    /// PUs close to it (the cpuset of its first non-I/O ancestor).
    pub cpus: Vec<usize>,
    /// NUMA nodes close to it.
    pub numa: Vec<usize>,
}

/// What a topology says, as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// Where it came from: `this machine`, `HWLOC_XMLFILE=...`, `synthetic ...`.
    pub source: String,
    /// Every PU, sorted by OS index.
    pub pus: Vec<Pu>,
    /// NUMA node OS indexes, sorted.
    pub numa_nodes: Vec<usize>,
    /// Network devices, in topology order.
    pub devices: Vec<Device>,
}

impl Facts {
    /// Extracts the facts of a loaded topology.
    pub fn from_topology(t: &Topology, source: String) -> Facts {
        let mut pus: Vec<Pu> = t
            .objects_with_type(ObjectType::PU)
            .filter_map(|o| {
                let os = o.os_index()?;
                let core = o
                    .ancestors()
                    .find(|a| a.object_type() == ObjectType::Core)
                    .and_then(|c| c.os_index())
                    .unwrap_or(os);
                let numa = o.nodeset().and_then(|n| n.first_set()).map(usize::from);
                Some(Pu { os, core, numa })
            })
            .collect();
        pus.sort_by_key(|p| p.os);
        let mut numa_nodes: Vec<usize> = t
            .objects_with_type(ObjectType::NUMANode)
            .filter_map(|o| o.os_index())
            .collect();
        numa_nodes.sort_unstable();
        let devices = t
            .objects_with_type(ObjectType::OSDevice)
            .filter_map(|o| {
                let kind = match o.attributes() {
                    Some(ObjectAttributes::OSDevice(a)) => match a.device_type() {
                        OSDeviceType::Network => "net",
                        OSDeviceType::OpenFabrics => "openfabrics",
                        _ => return None,
                    },
                    _ => return None,
                };
                let name = o.name()?.to_str().ok()?.to_string();
                let anc = o.first_non_io_ancestor()?;
                Some(Device {
                    name,
                    kind,
                    cpus: anc
                        .cpuset()
                        .map(|c| c.iter_set().map(usize::from).collect())
                        .unwrap_or_default(),
                    numa: anc
                        .nodeset()
                        .map(|c| c.iter_set().map(usize::from).collect())
                        .unwrap_or_default(),
                })
            })
            .collect();
        Facts {
            source,
            pus,
            numa_nodes,
            devices,
        }
    }

    /// Loads a topology with network devices: this machine, or what
    /// hwloc's own `HWLOC_XMLFILE` / `HWLOC_SYNTHETIC` describe.
    pub fn load() -> Result<Facts, String> {
        let source = match (
            std::env::var("HWLOC_XMLFILE"),
            std::env::var("HWLOC_SYNTHETIC"),
        ) {
            (Ok(x), _) if !x.is_empty() => format!("HWLOC_XMLFILE={x}"),
            (_, Ok(s)) if !s.is_empty() => format!("HWLOC_SYNTHETIC={s}"),
            _ => "this machine".to_string(),
        };
        let t = Topology::builder()
            .with_io_type_filter(TypeFilter::KeepImportant)
            .map_err(|e| format!("hwloc: {e}"))?
            .build()
            .map_err(|e| format!("hwloc could not load the topology: {e}"))?;
        Ok(Facts::from_topology(&t, source))
    }

    /// Parses an XML topology file (tests, `onesided-info --topology`).
    pub fn from_xml_file(path: &std::path::Path) -> Result<Facts, String> {
        let t = Topology::builder()
            .from_xml_file(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .with_io_type_filter(TypeFilter::KeepImportant)
            .map_err(|e| format!("hwloc: {e}"))?
            .build()
            .map_err(|e| format!("hwloc: {e}"))?;
        Ok(Facts::from_topology(&t, format!("xml {}", path.display())))
    }

    /// Builds a synthetic topology (`"package:2 [numa] core:2 pu:1"`).
    pub fn from_synthetic(description: &str) -> Result<Facts, String> {
        let t = Topology::builder()
            .from_synthetic(description)
            .map_err(|e| format!("synthetic '{description}': {e}"))?
            .build()
            .map_err(|e| format!("hwloc: {e}"))?;
        Ok(Facts::from_topology(&t, format!("synthetic {description}")))
    }

    /// The NUMA node most of `cpus` belong to (`None` without NUMA info).
    pub fn numa_of(&self, cpus: &[usize]) -> Option<usize> {
        let mut best: Option<(usize, usize)> = None;
        for &n in &self.numa_nodes {
            let count = self
                .pus
                .iter()
                .filter(|p| p.numa == Some(n) && cpus.contains(&p.os))
                .count();
            if count > 0 && best.is_none_or(|(_, c)| count > c) {
                best = Some((n, count));
            }
        }
        best.map(|(n, _)| n)
    }

    /// Every PU's OS index.
    pub fn all_cpus(&self) -> Vec<usize> {
        self.pus.iter().map(|p| p.os).collect()
    }
}

/// The topology of this process, loaded once (`None`, with the reason, when
/// hwloc cannot load it).
pub fn this_machine() -> Result<&'static Facts, &'static str> {
    static FACTS: OnceLock<Result<Facts, String>> = OnceLock::new();
    FACTS
        .get_or_init(|| {
            Facts::load().inspect_err(|e| {
                tracing::info!("no topology information ({e}): placement as without hwloc")
            })
        })
        .as_ref()
        .map_err(|e| e.as_str())
}

/// `ONESIDED_PROGRESS_CPU`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ProgressCpu {
    /// A core near the device that the application is not bound to;
    /// unpinned when none is free (the default).
    #[default]
    Auto,
    /// Never pinned.
    None,
    /// Exactly these CPUs (OS indexes).
    List(Vec<usize>),
}

impl ProgressCpu {
    /// Parses `auto`, `none` or a CPU list (`3`, `0,2`, `4-7,12`).
    pub fn parse(s: &str) -> Result<ProgressCpu, String> {
        match s.trim() {
            "" | "auto" => Ok(ProgressCpu::Auto),
            "none" => Ok(ProgressCpu::None),
            list => parse_cpu_list(list).map(ProgressCpu::List),
        }
    }
}

/// Parses a Linux CPU list (`0-3,8,10-11`): sorted, unique, at most 64 Ki.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    const MAX_CPU: usize = 1 << 16;
    let mut out = Vec::new();
    for part in s.trim().split(',') {
        let part = part.trim();
        let num = |t: &str| -> Result<usize, String> {
            if t.is_empty() || t.len() > 6 || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("'{t}' is not a CPU number"));
            }
            let v: usize = t
                .parse()
                .map_err(|_| format!("'{t}' is not a CPU number"))?;
            if v >= MAX_CPU {
                return Err(format!("CPU {v} is beyond {MAX_CPU}"));
            }
            Ok(v)
        };
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let v = num(part)?;
                (v, v)
            }
        };
        if a > b {
            return Err(format!("range '{part}' is backwards"));
        }
        out.extend(a..=b);
        if out.len() > MAX_CPU {
            return Err("too many CPUs".into());
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Formats CPUs as a Linux list (`0-3,8`).
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Where the progress agent runs, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentPlacement {
    /// The CPUs it is pinned to; `None` = not pinned.
    pub cpus: Option<Vec<usize>>,
    /// One line for `onesided-info` and `ONESIDED_VERBOSE`.
    pub reason: String,
}

/// The device among `candidates` (libfabric domain names) closest to a
/// process bound to `binding`: the one whose nearby CPUs overlap the
/// binding most; ties and unknown devices keep the candidates' order.
/// `None` when the topology knows none of them (keep the first).
pub fn closest_device(facts: &Facts, candidates: &[&str], binding: &[usize]) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (i, c) in candidates.iter().enumerate() {
        let Some(d) = facts.devices.iter().find(|d| d.name == *c) else {
            continue;
        };
        let overlap = d.cpus.iter().filter(|c| binding.contains(c)).count();
        if best.is_none_or(|(_, o)| overlap > o) {
            best = Some((i, overlap));
        }
    }
    best.map(|(i, _)| i)
}

/// The progress agent's placement for request `req`, a process bound to
/// `binding` (its CPU affinity), using device `device` (libfabric domain
/// name). A pure function of its arguments.
///
/// `auto`: the CPUs near the device (else the NUMA node of the binding,
/// else the machine) minus the binding; of those, the last whole core
/// (all its PUs free) is taken. None free (an unbound process is "bound" to
/// every CPU) -> unpinned. A list: exactly those CPUs, each of which must
/// exist in the topology (when known).
pub fn agent_placement(
    facts: Option<&Facts>,
    req: &ProgressCpu,
    binding: &[usize],
    device: Option<&str>,
) -> Result<AgentPlacement, String> {
    agent_placement_among(facts, req, binding, device, 1)
}

/// [`agent_placement`] for one of `local_ranks` processes of a job on this
/// machine. With `auto`, when those processes, each bound to as many cores
/// as this one, fill the machine's cores (a launcher's rank-per-core
/// binding), no core is free for agents: any core outside the binding is
/// another rank's, and an agent there takes that rank's CPU each time it
/// wakes (measured 2026-11-28, 2 ranks bound one per core on 2 cores, tcp:
/// 8 B put + flush 56 µs with the agent on the other rank's core against
/// 10.4 µs inside its own binding). The agent then stays in the process
/// binding, unpinned.
pub fn agent_placement_among(
    facts: Option<&Facts>,
    req: &ProgressCpu,
    binding: &[usize],
    device: Option<&str>,
    local_ranks: usize,
) -> Result<AgentPlacement, String> {
    if let (ProgressCpu::Auto, Some(f)) = (req, facts) {
        let core_of = |cpu: &usize| f.pus.iter().find(|p| p.os == *cpu).map(|p| p.core);
        let mut all: Vec<usize> = f.pus.iter().map(|p| p.core).collect();
        all.sort_unstable();
        all.dedup();
        let mut mine: Vec<usize> = binding.iter().filter_map(core_of).collect();
        mine.sort_unstable();
        mine.dedup();
        if local_ranks > 1 && local_ranks.saturating_mul(mine.len().max(1)) >= all.len() {
            return Ok(AgentPlacement {
                cpus: None,
                reason: format!(
                    "not pinned: the {local_ranks} ranks on this machine, bound to {} core(s) \
                     each, fill its {} cores; the agent stays in the process binding {}",
                    mine.len(),
                    all.len(),
                    format_cpu_list(binding)
                ),
            });
        }
    }
    match req {
        ProgressCpu::None => Ok(AgentPlacement {
            cpus: None,
            reason: "not pinned (ONESIDED_PROGRESS_CPU=none)".into(),
        }),
        ProgressCpu::List(list) => {
            if list.is_empty() {
                return Err("ONESIDED_PROGRESS_CPU: empty CPU list".into());
            }
            if let Some(f) = facts {
                if let Some(c) = list.iter().find(|c| !f.pus.iter().any(|p| p.os == **c)) {
                    return Err(format!(
                        "ONESIDED_PROGRESS_CPU: CPU {c} is not in the topology (CPUs {})",
                        format_cpu_list(&f.all_cpus())
                    ));
                }
            }
            Ok(AgentPlacement {
                cpus: Some(list.clone()),
                reason: format!("pinned to CPUs {} as asked", format_cpu_list(list)),
            })
        }
        ProgressCpu::Auto => {
            let Some(f) = facts else {
                return Ok(AgentPlacement {
                    cpus: None,
                    reason: "not pinned: no topology information (as without hwloc)".into(),
                });
            };
            let dev = device.and_then(|d| f.devices.iter().find(|x| x.name == d));
            let (near, near_what): (Vec<usize>, String) = match dev {
                Some(d) if !d.cpus.is_empty() => (d.cpus.clone(), format!("device {}", d.name)),
                _ => match f.numa_of(binding) {
                    Some(n) => (
                        f.pus
                            .iter()
                            .filter(|p| p.numa == Some(n))
                            .map(|p| p.os)
                            .collect(),
                        format!("NUMA node {n} (device not in the topology)"),
                    ),
                    None => (f.all_cpus(), "the machine".to_string()),
                },
            };
            // Whole cores near the device none of whose PUs the process is
            // bound to.
            let mut cores: Vec<usize> = f
                .pus
                .iter()
                .filter(|p| near.contains(&p.os))
                .map(|p| p.core)
                .collect();
            cores.dedup();
            let free_core = cores.iter().rev().find(|&&core| {
                f.pus
                    .iter()
                    .filter(|p| p.core == core)
                    .all(|p| !binding.contains(&p.os))
            });
            match free_core {
                Some(&core) => {
                    let cpus: Vec<usize> = f
                        .pus
                        .iter()
                        .filter(|p| p.core == core)
                        .map(|p| p.os)
                        .collect();
                    Ok(AgentPlacement {
                        reason: format!(
                            "pinned to CPUs {} (core {core} near {near_what}, not in the \
                             process binding {})",
                            format_cpu_list(&cpus),
                            format_cpu_list(binding)
                        ),
                        cpus: Some(cpus),
                    })
                }
                None => Ok(AgentPlacement {
                    cpus: None,
                    reason: format!(
                        "not pinned: every core near {near_what} is in the process binding {}",
                        format_cpu_list(binding)
                    ),
                }),
            }
        }
    }
}

/// [`closest_device`] for this process (its topology and binding); `None`
/// for fewer than two candidates or without topology information.
pub fn closest_here(candidates: &[String]) -> Option<usize> {
    if candidates.len() < 2 {
        return None;
    }
    let facts = this_machine().ok()?;
    let names: Vec<&str> = candidates.iter().map(String::as_str).collect();
    closest_device(facts, &names, &current_binding())
}

/// The CPU affinity of the calling thread (OS indexes).
pub fn current_binding() -> Vec<usize> {
    match nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        Ok(set) => (0..nix::sched::CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The machine's online CPUs (`/sys/devices/system/cpu/online`; 0 when
/// unknown).
pub fn online_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(s.trim()).ok())
        .map_or(0, |v| v.len())
}

/// Pins the calling thread to `cpus`.
pub fn pin_current_thread(cpus: &[usize]) -> Result<(), String> {
    let mut set = nix::sched::CpuSet::new();
    for &c in cpus {
        set.set(c).map_err(|e| format!("CPU {c}: {e}"))?;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .map_err(|e| format!("sched_setaffinity({}): {e}", format_cpu_list(cpus)))
}

/// The agent's placement in this process for `req` and `device`: the
/// topology of this machine (once per process), the calling thread's
/// binding. An invalid list is an error; missing topology degrades.
/// `local_ranks`: the job's processes on this machine (this one included).
pub fn placement_here(
    req: &ProgressCpu,
    device: Option<&str>,
    local_ranks: usize,
) -> Result<AgentPlacement, String> {
    // `none` needs no topology: nothing is loaded.
    let facts = match req {
        ProgressCpu::None => None,
        _ => this_machine().ok(),
    };
    agent_placement_among(facts, req, &current_binding(), device, local_ranks)
}

/// Touches every page of freshly allocated window memory from the calling
/// thread, so that the kernel's first-touch policy places it on this
/// thread's NUMA node (see the module doc). The memory is not exposed yet;
/// it stays zero.
pub fn first_touch(mem: &crate::transport::Memory<'_>) {
    let page = crate::transport::memory::WINDOW_ALIGN;
    let mut off = 0;
    while off + 8 <= mem.len() {
        let _ = mem.store_u64(off, 0);
        off += page;
    }
}

#[cfg(test)]
mod tests;
