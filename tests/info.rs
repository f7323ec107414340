//! Runs the `onesided-info` binary and checks what it says about the
//! providers every libfabric build of this project's CI has: tcp;ofi_rxm,
//! shm and sockets.

use std::collections::BTreeSet;
use std::process::{Command, Output};

use serde_json::Value;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_onesided-info"))
        .args(args)
        .env_remove("FI_PROVIDER")
        .output()
        .expect("cannot run onesided-info")
}

fn stdout_of(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "onesided-info {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("output is UTF-8")
}

/// Core providers `fi_info -l` lists (names without the trailing colon).
fn listed_by_fi_info() -> Option<BTreeSet<String>> {
    let out = Command::new("fi_info").arg("-l").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(
        text.lines()
            .filter_map(|l| l.strip_suffix(':'))
            .map(|l| l.trim().to_string())
            .collect(),
    )
}

/// The providers expected here: those whose parts `fi_info -l` lists (all
/// three when `fi_info` is not installed). Absent ones are skipped loudly.
fn expected() -> Vec<&'static str> {
    let listed = listed_by_fi_info();
    ["tcp;ofi_rxm", "shm", "sockets"]
        .into_iter()
        .filter(|p| {
            let present = listed
                .as_ref()
                .is_none_or(|l| p.split(';').all(|part| l.contains(part)));
            if !present {
                eprintln!("SKIP: `fi_info -l` does not list {p}; not checking it");
            }
            present
        })
        .collect()
}

/// (provider, domain, fabric) of every `domain` line of the text output.
fn text_entries(text: &str) -> BTreeSet<(String, String, String)> {
    let mut provider = String::new();
    let mut set = BTreeSet::new();
    for line in text.lines().skip(2) {
        if !line.is_empty() && !line.starts_with(' ') {
            provider = line.to_string();
        } else if let Some(rest) = line.trim_start().strip_prefix("domain") {
            let rest = rest.trim();
            let (domain, fabric) = rest.split_once(" (fabric ").expect("domain line format");
            let fabric = fabric.split(')').next().unwrap_or_default();
            set.insert((provider.clone(), domain.to_string(), fabric.to_string()));
        }
    }
    set
}

fn json_providers(json: &Value) -> &Vec<Value> {
    json["providers"].as_array().expect("providers array")
}

#[test]
fn text_lists_the_expected_providers() {
    let text = stdout_of(&["--no-atomics"]);
    let names: BTreeSet<String> = text_entries(&text).into_iter().map(|e| e.0).collect();
    for p in expected() {
        assert!(names.contains(p), "{p} missing from:\n{text}");
    }
}

/// sockets crashes on junk input (docs/reliability.md): the report says so
/// under its name, and it is never the automatic choice.
#[test]
fn sockets_defect_is_reported_and_never_chosen() {
    if !expected().contains(&"sockets") {
        return;
    }
    let text = stdout_of(&["--provider", "sockets", "--no-atomics"]);
    let defect = text
        .lines()
        .find(|l| l.trim_start().starts_with("known defect"))
        .unwrap_or_else(|| panic!("no known defect line for sockets:\n{text}"));
    assert!(defect.contains("junk bytes"), "{defect}");
    assert!(
        !text.contains("<- automatic choice"),
        "sockets chosen:\n{text}"
    );
    let all = stdout_of(&["--no-atomics"]);
    let chosen = all
        .lines()
        .find(|l| l.starts_with("automatic choice:"))
        .unwrap_or_else(|| panic!("no automatic choice:\n{all}"));
    assert!(!chosen.contains("sockets"), "{chosen}");
}

/// Where libfabric has `net` (xnet's RDM endpoint), it is the automatic
/// choice over `tcp;ofi_rxm` (docs/reliability.md: a survivor of a killed
/// rank can segfault inside rxm, never seen on net), and tcp;ofi_rxm's
/// report names that defect.
#[test]
fn net_is_chosen_before_tcp() {
    let has_net = listed_by_fi_info().is_some_and(|l| l.contains("net"));
    if !has_net {
        eprintln!("SKIP: `fi_info -l` does not list net; not checking the automatic choice");
        return;
    }
    let all = stdout_of(&["--no-atomics"]);
    let chosen = all
        .lines()
        .find(|l| l.starts_with("automatic choice:"))
        .unwrap_or_else(|| panic!("no automatic choice:\n{all}"));
    if ["efa", "cxi", "opx", "psm3", "psm2"]
        .iter()
        .any(|p| chosen.contains(&format!(": {p}")))
    {
        return; // RDMA hardware comes first.
    }
    assert!(chosen.starts_with("automatic choice: net on "), "{chosen}");
    if expected().contains(&"tcp;ofi_rxm") {
        let text = stdout_of(&["--provider", "tcp;ofi_rxm", "--no-atomics"]);
        let defect = text
            .lines()
            .find(|l| l.trim_start().starts_with("known defect"))
            .unwrap_or_else(|| panic!("no known defect line for tcp;ofi_rxm:\n{text}"));
        assert!(defect.contains("fi_cq_read"), "{defect}");
    }
}

#[test]
fn shm_demands_virtual_addresses() {
    if !expected().contains(&"shm") {
        return;
    }
    let text = stdout_of(&["--provider", "shm", "--no-atomics"]);
    let mr = text
        .lines()
        .find(|l| l.trim_start().starts_with("mr_mode"))
        .expect("an mr_mode line");
    assert!(mr.contains("VIRT_ADDR"), "{mr}");
}

/// The `SUM` cell under the `i64` column of the first table in `text`.
fn sum_int64_cell(text: &str) -> String {
    let header: Vec<&str> = text
        .lines()
        .find(|l| l.trim_start().starts_with("op "))
        .expect("an atomic table")
        .split_whitespace()
        .collect();
    let col = header
        .iter()
        .position(|h| *h == "i64")
        .expect("an i64 column");
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.trim_start().starts_with("SUM "))
        .expect("a SUM row")
        .split_whitespace()
        .collect();
    row[col].to_string()
}

#[test]
fn sum_int64_is_supported_on_shm_and_sockets() {
    let json: Value = serde_json::from_str(&stdout_of(&["--json"])).expect("valid JSON");
    for p in expected().into_iter().filter(|p| *p != "tcp;ofi_rxm") {
        let text = stdout_of(&["--provider", p]);
        let cell = sum_int64_cell(&text);
        assert!(
            cell.contains('a') && cell.contains('f'),
            "{p}: SUM/i64 is {cell:?}\n{text}"
        );

        for entry in json_providers(&json).iter().filter(|e| e["provider"] == p) {
            let rows = entry["atomic_matrix"]["rows"].as_array().expect("a matrix");
            let sum = rows.iter().find(|r| r["op"] == "SUM").expect("SUM row");
            let cells = sum["cells"].as_array().expect("cells");
            let c = cells
                .iter()
                .find(|c| c["datatype"] == "INT64")
                .expect("INT64");
            assert!(c["atomic"].as_u64().unwrap_or(0) >= 1, "{p}: {c}");
            assert!(c["fetch"].as_u64().unwrap_or(0) >= 1, "{p}: {c}");
            assert!(c["compare"].is_null(), "{p}: {c}");
        }
    }
}

#[test]
fn json_parses_and_matches_the_text() {
    let text = stdout_of(&[]);
    let json: Value = serde_json::from_str(&stdout_of(&["--json"])).expect("valid JSON");
    let from_json: BTreeSet<(String, String, String)> = json_providers(&json)
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().expect("string field").to_string();
            (s("provider"), s("domain"), s("fabric"))
        })
        .collect();
    assert_eq!(from_json, text_entries(&text));
    assert!(
        json_providers(&json)
            .iter()
            .filter(|e| e["auto_choice"] == true)
            .count()
            <= 1,
        "more than one automatic choice"
    );
    for p in expected() {
        assert!(from_json.iter().any(|e| e.0 == p), "{p} missing from JSON");
    }
}

#[test]
fn no_atomics_skips_the_matrix() {
    let json: Value =
        serde_json::from_str(&stdout_of(&["--json", "--no-atomics"])).expect("valid JSON");
    assert!(json_providers(&json)
        .iter()
        .all(|e| e["atomic_matrix"].is_null()));
}

#[test]
fn unknown_provider_filter_fails_with_the_list() {
    let out = run(&["--provider", "no-such-provider"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no-such-provider") && err.contains("available"),
        "{err}"
    );
}

#[test]
fn no_provider_at_all_fails_clearly() {
    let out = Command::new(env!("CARGO_BIN_EXE_onesided-info"))
        .env("FI_PROVIDER", "no-such-provider")
        .output()
        .expect("cannot run onesided-info");
    assert!(!out.status.success(), "exit status {:?}", out.status);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no usable libfabric provider"), "{err}");
    assert!(out.stdout.is_empty());
}

/// The atomic survey opens a fabric and a domain per provider and closes
/// both, the domain first: no `fi_close` refusal (EBUSY) and no leaked
/// fabric, so a user running `onesided-info` sees no warnings. (With the
/// fabric closed first, every surveyed provider printed one.)
#[test]
fn the_survey_closes_what_it_opens() {
    let out = run(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "onesided-info failed: {stderr}");
    assert!(
        !stderr.contains("fi_close failed"),
        "onesided-info left objects open or closed them out of order:\n{stderr}"
    );
}

/// The report ends with the back-end `World::init` takes in this
/// environment, by the library's own rule: a named ibverbs device means
/// native verbs (and here, where that device does not exist, that it
/// cannot start, naming it); a named provider means libfabric.
#[test]
fn the_back_end_line_follows_the_environment() {
    let info = |vars: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_onesided-info"));
        cmd.arg("--no-atomics")
            .env_remove("FI_PROVIDER")
            .env_remove("ONESIDED_PROVIDER")
            .env_remove("ONESIDED_BACKEND")
            .env_remove("ONESIDED_IB_DEVICE");
        cmd.envs(vars.iter().copied());
        let out = cmd.output().expect("cannot run onesided-info");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).expect("UTF-8");
        text.lines()
            .find(|l| l.starts_with("back-end: "))
            .unwrap_or_else(|| panic!("no back-end line in:\n{text}"))
            .to_string()
    };
    let named = info(&[("ONESIDED_IB_DEVICE", "nosuch9:1")]);
    assert!(
        named.starts_with("back-end: native verbs") && named.contains("nosuch9"),
        "{named}"
    );
    let provider = info(&[
        ("ONESIDED_IB_DEVICE", "nosuch9:1"),
        ("ONESIDED_PROVIDER", "tcp"),
    ]);
    assert!(provider.starts_with("back-end: libfabric"), "{provider}");
    // The device named is not used: said, not silently dropped.
    assert!(
        provider.contains("ONESIDED_IB_DEVICE=nosuch9:1 is ignored")
            && provider.contains("ONESIDED_PROVIDER=tcp"),
        "{provider}"
    );
    let ofi = info(&[("ONESIDED_BACKEND", "ofi"), ("ONESIDED_IB_DEVICE", "rxe0")]);
    assert!(
        ofi.contains("ONESIDED_IB_DEVICE=rxe0 is ignored: ONESIDED_BACKEND=ofi"),
        "{ofi}"
    );
    let forced = info(&[("ONESIDED_BACKEND", "ofi")]);
    assert_eq!(forced, "back-end: libfabric (ONESIDED_BACKEND=ofi)");
}

/// The report lists the `ONESIDED_*` variables set: read, misspelt (with
/// the variable meant) or a script's own.
#[test]
fn the_environment_lines_name_a_misspelt_variable() {
    let out = Command::new(env!("CARGO_BIN_EXE_onesided-info"))
        .arg("--no-atomics")
        .env("ONESIDED_TIMOUT", "5")
        .env("ONESIDED_SHM", "1")
        .env("ONESIDED_TEST_SOMETHING", "x")
        .output()
        .expect("cannot run onesided-info");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let line = |k: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(k))
            .unwrap_or_else(|| panic!("no line for {k} in:\n{text}"))
            .to_string()
    };
    assert!(
        line("ONESIDED_TIMOUT=5").contains("did you mean ONESIDED_TIMEOUT?"),
        "{text}"
    );
    assert!(line("ONESIDED_SHM=1").ends_with(": read"), "{text}");
    assert!(
        line("ONESIDED_TEST_SOMETHING=x").contains("not read by the library"),
        "{text}"
    );
}
