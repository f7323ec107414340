//! The progress agent runs where `ONESIDED_PROGRESS_CPU` asks: read back
//! from `/proc/self/task/<tid>/status` (`Cpus_allowed_list`) of the thread
//! named `onesided-agent`, in a real process that called `World::init`.

mod common;

use std::time::Duration;

use common::{child_command, is_child, run_with_limit, say, test_name};
use onesided::topology::{format_cpu_list, parse_cpu_list};
use onesided::World;

/// `Cpus_allowed_list` of this process's thread named `name`.
fn thread_cpus(name: &str) -> Option<Vec<usize>> {
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = task.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let status = std::fs::read_to_string(dir.join("status")).ok()?;
            let list = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
            return parse_cpu_list(list.trim()).ok();
        }
    }
    None
}

fn allowed_cpus() -> Vec<usize> {
    onesided::topology::current_binding()
}

#[test]
fn agent_affinity_follows_progress_cpu() {
    let name = test_name(module_path!(), "agent_affinity_follows_progress_cpu");
    if is_child(&name) {
        if let Ok(bind) = std::env::var("TEST_BIND_MAIN") {
            // The application binds itself before init (as srun/mpirun
            // binding would).
            onesided::topology::pin_current_thread(&parse_cpu_list(&bind).unwrap()).unwrap();
        }
        let process = allowed_cpus();
        let world = World::init().expect("init");
        let agent = thread_cpus("onesided-agent").expect("no thread named onesided-agent");
        println!(
            "agent={} process={}",
            format_cpu_list(&agent),
            format_cpu_list(&process)
        );
        drop(world);
        return;
    }
    let all = allowed_cpus();
    if all.len() < 2 {
        say(&format!(
            "SKIP: agent_affinity_follows_progress_cpu needs 2 CPUs, this process may use {}",
            format_cpu_list(&all)
        ));
        return;
    }
    let (first, last) = (all[0], all[all.len() - 1]);
    let xml = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/two-numa-two-nics.xml"
    );
    let all_s = format_cpu_list(&all);
    let cases: Vec<(Vec<(&str, String)>, String)> = vec![
        (
            vec![("ONESIDED_PROGRESS_CPU", first.to_string())],
            first.to_string(),
        ),
        (
            vec![("ONESIDED_PROGRESS_CPU", last.to_string())],
            last.to_string(),
        ),
        (
            vec![("ONESIDED_PROGRESS_CPU", "none".into())],
            all_s.clone(),
        ),
        // Unbound process: every core is the application's: unpinned.
        (
            vec![("ONESIDED_PROGRESS_CPU", "auto".into())],
            all_s.clone(),
        ),
        (vec![], all_s.clone()),
        // Bound to the first CPU: auto takes the last free core.
        (
            vec![
                ("ONESIDED_PROGRESS_CPU", "auto".into()),
                ("TEST_BIND_MAIN", first.to_string()),
            ],
            last.to_string(),
        ),
        // A described topology (2 NUMA nodes x 2 cores, NICs ib0/ib1):
        // bound to CPU 0, device unknown there (tcp's eth0): the other
        // core of NUMA node 0, CPU 1.
        (
            vec![
                ("ONESIDED_PROGRESS_CPU", "auto".into()),
                ("TEST_BIND_MAIN", "0".into()),
                ("HWLOC_XMLFILE", xml.into()),
            ],
            "1".into(),
        ),
    ];
    for (env, want) in cases {
        let mut cmd = child_command(&name);
        cmd.env("ONESIDED_PROVIDER", "tcp")
            .env_remove("ONESIDED_PROGRESS_CPU");
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let out = run_with_limit(cmd, Duration::from_secs(60));
        let line = out
            .stdout
            .lines()
            .find_map(|l| l.find("agent=").map(|i| l[i..].to_string()))
            .unwrap_or_else(|| panic!("{env:?}: no agent= line\n{}", out.tail(20)));
        let got = line
            .split_whitespace()
            .next()
            .and_then(|t| t.strip_prefix("agent="))
            .unwrap_or("");
        assert_eq!(got, want, "{env:?}: {line}\n{}", out.tail(20));
        say(&format!("[harness] {env:?}: {line}"));
    }
    // A CPU outside the topology is an error naming it, not a silent default.
    let mut cmd = child_command(&name);
    cmd.env("ONESIDED_PROVIDER", "tcp")
        .env("ONESIDED_PROGRESS_CPU", "4095");
    let out = run_with_limit(cmd, Duration::from_secs(60));
    assert!(
        !out.status.is_some_and(|s| s.success())
            && out.stderr.contains("ONESIDED_PROGRESS_CPU")
            && out.stderr.contains("4095"),
        "{}",
        out.tail(20)
    );
}
