//! `onesided-info`: which libfabric providers onesided can use here, how it
//! would drive them, and which atomics each one supports.

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use clap::Parser;
use onesided::transport::ofi::info::AUTO_ORDER;
use onesided::transport::ofi::survey::{self, AtomicMatrix, ProviderReport, DATATYPES};
use serde::Serialize;

/// Lists the libfabric providers with RDM endpoints and RMA, as onesided sees them.
#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// Only this provider: a full name (`tcp;ofi_rxm`) or a core name (`tcp`).
    #[arg(long, value_name = "NAME")]
    provider: Option<String>,
    /// Machine-readable JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Skip the atomic matrix (which opens a domain per provider).
    #[arg(long)]
    no_atomics: bool,
}

/// Appends one line to the output text (writing to a `String` cannot fail).
macro_rules! out {
    ($o:expr) => {
        $o.push('\n')
    };
    ($o:expr, $($t:tt)*) => {{
        let _ = writeln!($o, $($t)*);
    }};
}

/// One provider/domain with the outcome of its atomic survey.
#[derive(Serialize)]
struct Entry {
    #[serde(flatten)]
    report: ProviderReport,
    /// `None` with `--no-atomics`, when the provider has none, or on error.
    atomic_matrix: Option<AtomicMatrix>,
    /// Why there is no matrix, if there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    atomic_note: Option<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "onesided=warn".into());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .try_init();
    let mut reports = match survey::providers() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("onesided-info: {e}");
            return ExitCode::from(2);
        }
    };
    let auto = reports.iter().find(|r| r.auto_choice).cloned();
    if let Some(name) = &args.provider {
        let available = provider_names(&reports);
        reports.retain(|r| r.matches(name));
        if reports.is_empty() {
            eprintln!("onesided-info: no provider named {name:?} with RDM endpoints and RMA; available: {available}");
            return ExitCode::from(2);
        }
    }
    let all_reports = reports.clone();
    let entries: Vec<Entry> = reports
        .into_iter()
        .map(|r| survey_atomics(r, args.no_atomics))
        .collect();
    if args.json {
        let doc = serde_json::json!({
            "libfabric": survey::libfabric_version(),
            "providers": entries,
            "topology": topology_text(auto.as_ref(), &all_reports).lines().collect::<Vec<_>>(),
            "verbs": verbs_text().lines().collect::<Vec<_>>(),
            "backend": backend_text().trim_end(),
            "environment": env_text().lines().collect::<Vec<_>>(),
        });
        match serde_json::to_string_pretty(&doc) {
            Ok(s) => emit(&(s + "\n")),
            Err(e) => {
                eprintln!("onesided-info: cannot encode JSON: {e}");
                ExitCode::FAILURE
            }
        }
    } else {
        let mut t = text(&entries, auto.as_ref(), args.no_atomics);
        t.push_str(&topology_text(auto.as_ref(), &all_reports));
        t.push_str(&verbs_text());
        t.push('\n');
        t.push_str(&backend_text());
        t.push_str(&env_text());
        emit(&t)
    }
}

/// The `ONESIDED_*` variables set in this environment, each with what
/// the library makes of it: read, not read but resembling one it reads
/// (a misspelling, by the library's own rule `config::misspelling_of`),
/// or not read.
fn env_text() -> String {
    let mut set: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.to_string_lossy().into_owned())))
        .filter(|(k, _)| onesided::config::is_onesided_name(k))
        .collect();
    set.sort();
    let mut o = String::new();
    if set.is_empty() {
        out!(
            o,
            "environment: no ONESIDED_* variable set (defaults everywhere)"
        );
        return o;
    }
    out!(o, "environment: {} ONESIDED_* variable(s) set", set.len());
    for (k, v) in &set {
        let what = if onesided::config::VARIABLES.contains(&k.as_str()) {
            "read".to_string()
        } else if let Some(meant) = onesided::config::misspelling_of(k) {
            format!("NOT READ: no such variable (did you mean {meant}?)")
        } else {
            "not read by the library (a script's or tool's own?)".to_string()
        };
        out!(o, "  {k}={v}: {what}");
    }
    o
}

/// Which back-end `World::init` takes with this environment, by the
/// library's own rule (`transport::auto_picks_verbs`), and why.
fn backend_text() -> String {
    use onesided::config::{Backend, Config};
    use onesided::transport::{auto_picks_verbs, verbs};
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => return format!("back-end: none, the environment is refused: {e}\n"),
    };
    let line = match config.backend {
        Backend::Auto => match auto_picks_verbs(config.provider.is_some()) {
            Ok(true) => match verbs::choose_from_env() {
                Ok(c) => format!(
                    "native verbs on {}:{} (automatic{})",
                    c.device.name,
                    c.port.port,
                    // The library's own reading (empty: automatic).
                    if verbs::device::DeviceSpec::from_env().is_ok_and(|d| d.name.is_some()) {
                        ": ONESIDED_IB_DEVICE names it"
                    } else {
                        ": an ACTIVE verbs port exists"
                    }
                ),
                Err(e) => format!("native verbs (automatic), which cannot start here: {e}"),
            },
            Ok(false) if config.provider.is_some() => {
                "libfabric (automatic: ONESIDED_PROVIDER names a provider)".to_string()
            }
            Ok(false) => {
                "libfabric (automatic: no ACTIVE verbs port, ONESIDED_IB_DEVICE unset)".to_string()
            }
            Err(e) => format!("none, the environment is refused: {e}"),
        },
        Backend::Ofi => "libfabric (ONESIDED_BACKEND=ofi)".to_string(),
        Backend::Verbs => match verbs::choose_from_env() {
            Ok(c) => format!(
                "native verbs on {}:{} (ONESIDED_BACKEND=verbs)",
                c.device.name, c.port.port
            ),
            Err(e) => {
                format!("native verbs (ONESIDED_BACKEND=verbs), which cannot start here: {e}")
            }
        },
        Backend::Loopback => {
            "in-process (ONESIDED_BACKEND=loopback: World::run_threads only)".to_string()
        }
        other => format!("{other:?} (ONESIDED_BACKEND)"),
    };
    match onesided::transport::ib_device_ignored(&config) {
        Some(ignored) => format!("back-end: {line}; {ignored}\n"),
        None => format!("back-end: {line}\n"),
    }
}

/// The verbs devices (native back-end): ports and state, GIDs, atomic
/// capability, max inline data, max_qp_rd_atom, and the automatic choice.
fn verbs_text() -> String {
    use onesided::transport::verbs;
    let mut o = String::new();
    let devs = match verbs::devices() {
        Ok(d) => d,
        Err(e) => {
            out!(o, "\nverbs devices: cannot list ({e})");
            return o;
        }
    };
    if devs.is_empty() {
        out!(
            o,
            "\nverbs devices: none (no RDMA device; for soft-RoCE: modprobe rdma_rxe; rdma link add rxe0 type rxe netdev <dev>)"
        );
        return o;
    }
    out!(o, "\nverbs devices ({}):", devs.len());
    for d in &devs {
        let inline = d
            .max_inline_data
            .map_or_else(|| "unknown".to_string(), |v| v.to_string());
        out!(
            o,
            "  {}: atomic_cap {}, max_inline_data {inline}, max_qp_rd_atom {}, max_qp_init_rd_atom {}, max_cqe {}, max_qp_wr {}, max_srq_wr {}",
            d.name,
            d.atomic_cap,
            d.max_qp_rd_atom,
            d.max_qp_init_rd_atom,
            d.max_cqe,
            d.max_qp_wr,
            d.max_srq_wr
        );
        for p in &d.ports {
            out!(
                o,
                "    port {}: {} ({}, active MTU {}, LID {})",
                p.port,
                p.state,
                p.link_layer,
                p.active_mtu,
                p.lid
            );
            for g in &p.gids {
                out!(o, "      gid[{}] {} ({})", g.index, g.text(), g.kind.name());
            }
        }
    }
    match verbs::choose_from_env() {
        Ok(c) => out!(
            o,
            "  native back-end would use {}:{} gid[{}] {}",
            c.device.name,
            c.port.port,
            c.gid.index,
            c.gid.text()
        ),
        Err(e) => out!(o, "  native back-end: {e}"),
    }
    o
}

/// The hwloc topology and the placement choices for the automatic provider
/// (or a note that there is no topology information).
fn topology_text(auto: Option<&ProviderReport>, reports: &[ProviderReport]) -> String {
    use onesided::topology::{self, format_cpu_list, ProgressCpu};
    let mut o = String::new();
    let facts = match topology::this_machine() {
        Ok(f) => f,
        Err(e) => {
            out!(o, "\ntopology: no information ({e});");
            out!(
                o,
                "  placement as without hwloc: progress agent unpinned, first domain of the provider, window memory where first touched"
            );
            return o;
        }
    };
    let cores = {
        let mut c: Vec<usize> = facts.pus.iter().map(|p| p.core).collect();
        c.sort_unstable();
        c.dedup();
        c.len()
    };
    out!(o, "\ntopology (hwloc, {}):", facts.source);
    out!(
        o,
        "  {} CPUs ({}) in {} cores; NUMA nodes: {}",
        facts.pus.len(),
        format_cpu_list(&facts.all_cpus()),
        cores,
        if facts.numa_nodes.is_empty() {
            "unknown".to_string()
        } else {
            format_cpu_list(&facts.numa_nodes)
        }
    );
    for n in &facts.numa_nodes {
        let cpus: Vec<usize> = facts
            .pus
            .iter()
            .filter(|p| p.numa == Some(*n))
            .map(|p| p.os)
            .collect();
        out!(o, "    NUMA node {n}: CPUs {}", format_cpu_list(&cpus));
    }
    if facts.devices.is_empty() {
        out!(o, "  network devices: none known to hwloc");
    }
    for d in &facts.devices {
        out!(
            o,
            "  network device {} ({}): near CPUs {}, NUMA node(s) {}",
            d.name,
            d.kind,
            format_cpu_list(&d.cpus),
            format_cpu_list(&d.numa)
        );
    }
    let binding = topology::current_binding();
    let my_numa = facts.numa_of(&binding);
    out!(
        o,
        "  this process: bound to CPUs {}{}",
        format_cpu_list(&binding),
        my_numa.map_or(String::new(), |n| format!(" (NUMA node {n})"))
    );
    let Some(auto) = auto else {
        return o;
    };
    let mut candidates: Vec<&str> = Vec::new();
    for r in reports.iter().filter(|r| r.provider == auto.provider) {
        if !candidates.contains(&r.domain.as_str()) {
            candidates.push(r.domain.as_str());
        }
    }
    let device = match topology::closest_device(facts, &candidates, &binding) {
        Some(i) if candidates.len() > 1 => {
            out!(
                o,
                "  device for {}: {} (closest to this process of {})",
                auto.provider,
                candidates[i],
                candidates.join(", ")
            );
            candidates[i]
        }
        _ => {
            out!(
                o,
                "  device for {}: {} (the only domain, or none is in the topology)",
                auto.provider,
                auto.domain
            );
            auto.domain.as_str()
        }
    };
    let (req, req_text) = match std::env::var("ONESIDED_PROGRESS_CPU") {
        Ok(v) => (ProgressCpu::parse(&v).unwrap_or_default(), v),
        Err(_) => (ProgressCpu::Auto, "auto".to_string()),
    };
    match topology::agent_placement(Some(facts), &req, &binding, Some(device)) {
        Ok(p) => out!(
            o,
            "  progress agent (ONESIDED_PROGRESS_CPU={req_text}): {}",
            p.reason
        ),
        Err(e) => out!(o, "  progress agent: error: {e}"),
    }
    out!(
        o,
        "  window memory: touched first by the creating thread, so placed on its NUMA node{}",
        my_numa.map_or(String::new(), |n| format!(" ({n} for this process)"))
    );
    o
}

/// Writes the output; a closed pipe (`| head`) is not an error.
fn emit(s: &str) -> ExitCode {
    match std::io::stdout().lock().write_all(s.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("onesided-info: cannot write the output: {e}");
            ExitCode::FAILURE
        }
    }
}

fn survey_atomics(report: ProviderReport, skip: bool) -> Entry {
    let (atomic_matrix, atomic_note) = if skip {
        (None, Some("skipped (--no-atomics)".to_string()))
    } else if !report.atomics {
        (None, Some("the provider offers no atomics".to_string()))
    } else {
        match survey::atomic_matrix_for(&report) {
            Ok(Some(m)) if m.is_empty() => {
                (Some(m), Some("fi_query_atomic supports nothing".into()))
            }
            Ok(Some(m)) => (Some(m), None),
            Ok(None) => (None, Some("the provider offers no atomics".into())),
            Err(e) => (None, Some(format!("error: {e}"))),
        }
    };
    Entry {
        report,
        atomic_matrix,
        atomic_note,
    }
}

fn provider_names(reports: &[ProviderReport]) -> String {
    let mut names: Vec<&str> = reports.iter().map(|r| r.provider.as_str()).collect();
    names.dedup();
    names.join(", ")
}

/// Text output: entries of one provider that differ only in fabric/domain
/// share a block; an atomic table already shown is referred to, not repeated.
fn text(entries: &[Entry], auto: Option<&ProviderReport>, no_atomics: bool) -> String {
    let mut o = String::new();
    out!(
        o,
        "libfabric {}: {} provider/domain entries with RDM endpoints and RMA",
        survey::libfabric_version(),
        entries.len()
    );
    match auto {
        Some(r) => out!(
            o,
            "automatic choice: {} on {} (fabric {}); override with ONESIDED_PROVIDER\n",
            r.provider,
            r.domain,
            r.fabric
        ),
        None => out!(
            o,
            "automatic choice: none (no provider of {:?} is present); set ONESIDED_PROVIDER\n",
            AUTO_ORDER
        ),
    }
    let mut tables: Vec<(Vec<String>, String)> = Vec::new();
    let mut i = 0;
    while i < entries.len() {
        let first = &entries[i];
        let n = entries[i..]
            .iter()
            .take_while(|e| same_block(first, e))
            .count();
        print_block(&mut o, &entries[i..i + n], no_atomics, &mut tables);
        i += n;
    }
    o
}

fn same_block(a: &Entry, b: &Entry) -> bool {
    let strip = |r: &ProviderReport| ProviderReport {
        fabric: String::new(),
        domain: String::new(),
        auto_choice: false,
        ..r.clone()
    };
    strip(&a.report) == strip(&b.report)
        && a.atomic_matrix == b.atomic_matrix
        && a.atomic_note == b.atomic_note
}

fn print_block(
    o: &mut String,
    group: &[Entry],
    no_atomics: bool,
    tables: &mut Vec<(Vec<String>, String)>,
) {
    let Some(e) = group.first() else { return };
    let r = &e.report;
    out!(o, "{}", r.provider);
    if let Some(defect) = onesided::transport::ofi::info::known_defect(&r.provider) {
        out!(o, "  known defect {defect}");
    }
    for g in group {
        let auto = if g.report.auto_choice {
            "   <- automatic choice"
        } else {
            ""
        };
        out!(
            o,
            "  domain      {} (fabric {}){auto}",
            g.report.domain,
            g.report.fabric
        );
    }
    let atomics = if r.atomics && !r.caps.iter().any(|c| c == "ATOMIC") {
        " (ATOMIC when asked)"
    } else {
        ""
    };
    out!(
        o,
        "  endpoint    {}   caps {}{atomics}",
        r.endpoint,
        r.caps.join(" ")
    );
    out!(
        o,
        "  mr_mode     {}",
        if r.mr_mode.is_empty() {
            "none".into()
        } else {
            r.mr_mode.join(" ")
        }
    );
    out!(
        o,
        "  progress    data {}, control {}   threading {}",
        r.data_progress,
        r.control_progress,
        r.threading
    );
    out!(
        o,
        "  sizes       inject {} B, max message {}",
        r.inject_size,
        human_bytes(r.max_msg_size)
    );
    let why = if r.ordered_rma_raw {
        "FI_ORDER_RMA_RAW promised"
    } else {
        "no FI_ORDER_RMA_RAW"
    };
    out!(o, "  flush       {} ({why})", r.flush);
    match (&e.atomic_matrix, &e.atomic_note) {
        (Some(m), None) => {
            let sig = signature(m);
            match tables.iter().find(|(s, _)| *s == sig) {
                Some((_, label)) => out!(o, "  atomics     same table as {label} above"),
                None => {
                    print_matrix(o, m);
                    tables.push((sig, format!("{} ({})", r.provider, r.domain)));
                }
            }
            print_counts(o, m);
        }
        (_, Some(note)) if !no_atomics => out!(o, "  atomics     {note}"),
        _ => {}
    }
    out!(o);
}

/// The table as printed, without the counts.
fn signature(m: &AtomicMatrix) -> Vec<String> {
    m.rows
        .iter()
        .flat_map(|r| r.cells.iter().map(|c| c.letters()))
        .collect()
}

fn human_bytes(n: usize) -> String {
    if n > usize::MAX - (1 << 20) {
        return match usize::MAX - n {
            0 => "unlimited (SIZE_MAX)".into(),
            d => format!("unlimited (SIZE_MAX - {d})"),
        };
    }
    const UNITS: &[(usize, &str)] = &[
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    UNITS
        .iter()
        .find(|(u, _)| n >= *u && n % u == 0)
        .map(|(u, s)| format!("{} {s}", n / u))
        .unwrap_or_else(|| format!("{n} B"))
}

fn print_matrix(o: &mut String, m: &AtomicMatrix) {
    // Datatypes no operation supports are left out, and named below.
    let used: Vec<usize> = (0..DATATYPES.len())
        .filter(|&i| {
            m.rows
                .iter()
                .any(|r| r.cells.get(i).is_some_and(|c| c.any()))
        })
        .collect();
    out!(
        o,
        "  atomics     a = fi_atomic, f = fi_fetch_atomic, c = fi_compare_atomic, - = no"
    );
    let header: String = used
        .iter()
        .map(|&i| format!("{:>5}", DATATYPES[i].2))
        .collect();
    out!(o, "    {:<12}{header}", "op");
    for row in &m.rows {
        let cells: String = used
            .iter()
            .map(|&i| {
                format!(
                    "{:>5}",
                    row.cells.get(i).map(|c| c.letters()).unwrap_or_default()
                )
            })
            .collect();
        out!(o, "    {:<12}{cells}", row.op);
    }
    let unused: Vec<&str> = (0..DATATYPES.len())
        .filter(|i| !used.contains(i))
        .map(|i| DATATYPES[i].1)
        .collect();
    if !unused.is_empty() {
        out!(o, "    not supported by any op: {}", unused.join(" "));
    }
}

fn print_counts(o: &mut String, m: &AtomicMatrix) {
    let mut counts: Vec<usize> = m
        .rows
        .iter()
        .flat_map(|r| &r.cells)
        .flat_map(|c| [c.atomic, c.fetch, c.compare])
        .flatten()
        .collect();
    counts.sort_unstable();
    counts.dedup();
    match counts.as_slice() {
        [] => {}
        [one] => out!(o, "    max elements per call: {one}"),
        [lo, .., hi] => out!(o, "    max elements per call: {lo} to {hi} (see --json)"),
    }
}
