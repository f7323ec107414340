//! Placement choices on described topologies: this machine has one NUMA
//! node and one NIC at most, so the interesting cases are synthetic or XML.

use std::path::PathBuf;

use super::*;

fn two_numa_two_nics() -> Facts {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/two-numa-two-nics.xml");
    Facts::from_xml_file(&path).expect("tests/data/two-numa-two-nics.xml loads")
}

#[test]
fn xml_facts() {
    let f = two_numa_two_nics();
    assert_eq!(f.numa_nodes, vec![0, 1]);
    assert_eq!(f.all_cpus(), vec![0, 1, 2, 3]);
    assert_eq!(
        f.pus[2],
        Pu {
            os: 2,
            core: 2,
            numa: Some(1)
        }
    );
    let names: Vec<(&str, &str, Vec<usize>)> = f
        .devices
        .iter()
        .map(|d| (d.name.as_str(), d.kind, d.cpus.clone()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("ib0", "net", vec![0, 1]),
            ("mlx5_0", "openfabrics", vec![0, 1]),
            ("ib1", "net", vec![2, 3]),
            ("mlx5_1", "openfabrics", vec![2, 3]),
        ]
    );
    assert_eq!(f.numa_of(&[2]), Some(1));
    assert_eq!(f.numa_of(&[0, 1, 2]), Some(0));
    assert_eq!(f.numa_of(&[]), None);
}

#[test]
fn closest_device_follows_the_binding() {
    let f = two_numa_two_nics();
    let c = ["mlx5_0", "mlx5_1"];
    assert_eq!(closest_device(&f, &c, &[2]), Some(1));
    assert_eq!(closest_device(&f, &c, &[3]), Some(1));
    assert_eq!(closest_device(&f, &c, &[0, 1]), Some(0));
    // Unbound: a tie, the provider's order stands.
    assert_eq!(closest_device(&f, &c, &[0, 1, 2, 3]), Some(0));
    assert_eq!(closest_device(&f, &["ib1", "ib0"], &[0]), Some(1));
    // Unknown devices: no opinion.
    assert_eq!(closest_device(&f, &["eth9"], &[0]), None);
    assert_eq!(closest_device(&f, &["eth9", "ib1"], &[0]), Some(1));
}

#[test]
fn auto_takes_a_free_core_near_the_device() {
    let f = two_numa_two_nics();
    let auto = |binding: &[usize], dev: Option<&str>| {
        agent_placement(Some(&f), &ProgressCpu::Auto, binding, dev)
            .unwrap()
            .cpus
    };
    // Bound to CPU 2, using the NIC of package 1: the other core there.
    assert_eq!(auto(&[2], Some("mlx5_1")), Some(vec![3]));
    assert_eq!(auto(&[3], Some("mlx5_1")), Some(vec![2]));
    // Bound to CPU 0 but using the far NIC: a core near the NIC.
    assert_eq!(auto(&[0], Some("mlx5_1")), Some(vec![3]));
    // Both cores near the NIC are the application's: unpinned.
    let p = agent_placement(Some(&f), &ProgressCpu::Auto, &[2, 3], Some("ib1")).unwrap();
    assert_eq!(p.cpus, None);
    assert!(
        p.reason.contains("every core near device ib1"),
        "{}",
        p.reason
    );
    // Unbound process: nothing is free.
    assert_eq!(auto(&[0, 1, 2, 3], Some("mlx5_0")), None);
    // Device unknown: the binding's NUMA node.
    assert_eq!(auto(&[0], Some("eth9")), Some(vec![1]));
    assert_eq!(auto(&[2], None), Some(vec![3]));
}

#[test]
fn lists_and_none() {
    let f = two_numa_two_nics();
    let p = agent_placement(Some(&f), &ProgressCpu::List(vec![1, 3]), &[0], None).unwrap();
    assert_eq!(p.cpus, Some(vec![1, 3]));
    let e = agent_placement(Some(&f), &ProgressCpu::List(vec![7]), &[0], None).unwrap_err();
    assert!(e.contains("CPU 7 is not in the topology"), "{e}");
    let p = agent_placement(Some(&f), &ProgressCpu::None, &[0], Some("mlx5_0")).unwrap();
    assert_eq!(p.cpus, None);
    // Without topology information: as before hwloc (unpinned), lists as given.
    let p = agent_placement(None, &ProgressCpu::Auto, &[0], Some("mlx5_0")).unwrap();
    assert_eq!(p.cpus, None);
    assert!(p.reason.contains("no topology information"), "{}", p.reason);
    let p = agent_placement(None, &ProgressCpu::List(vec![5]), &[0], None).unwrap();
    assert_eq!(p.cpus, Some(vec![5]));
}

#[test]
fn synthetic_with_hyperthreads() {
    // 2 packages x (NUMA, 2 cores x 2 PUs): a free core means both its PUs.
    let f = Facts::from_synthetic("package:2 [numa] core:2 pu:2").unwrap();
    assert_eq!(f.pus.len(), 8);
    assert_eq!(f.numa_nodes, vec![0, 1]);
    assert!(f.devices.is_empty(), "synthetic topologies have no I/O");
    let auto = |binding: &[usize]| {
        agent_placement(Some(&f), &ProgressCpu::Auto, binding, Some("mlx5_0"))
            .unwrap()
            .cpus
    };
    // Bound to PU 0 (core 0, NUMA 0): the last core of NUMA 0 is core 1.
    let core1: Vec<usize> = f
        .pus
        .iter()
        .filter(|p| p.core == f.pus[2].core)
        .map(|p| p.os)
        .collect();
    assert_eq!(auto(&[0]), Some(core1.clone()));
    // Bound to one PU of each core of NUMA 0: no whole core is free there.
    assert_eq!(auto(&[f.pus[0].os, f.pus[2].os]), None);
    // Binding on NUMA 1: a core of NUMA 1.
    let numa1: Vec<usize> = f
        .pus
        .iter()
        .filter(|p| p.numa == Some(1))
        .map(|p| p.os)
        .collect();
    let got = auto(&[numa1[0]]).unwrap();
    assert!(
        got.iter().all(|c| numa1.contains(c)) && !got.contains(&numa1[0]),
        "{got:?}"
    );
}

#[test]
fn cpu_lists() {
    assert_eq!(
        parse_cpu_list("0-3,8,10-11").unwrap(),
        vec![0, 1, 2, 3, 8, 10, 11]
    );
    assert_eq!(parse_cpu_list(" 3 , 1,1").unwrap(), vec![1, 3]);
    for bad in ["", "a", "3-1", "1,,2", "-1", "1-", "99999999", "0x1"] {
        assert!(parse_cpu_list(bad).is_err(), "accepted {bad:?}");
    }
    assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
    assert_eq!(ProgressCpu::parse("auto").unwrap(), ProgressCpu::Auto);
    assert_eq!(ProgressCpu::parse("none").unwrap(), ProgressCpu::None);
    assert_eq!(ProgressCpu::parse("1").unwrap(), ProgressCpu::List(vec![1]));
    assert!(ProgressCpu::parse("sometimes").is_err());
}

#[test]
fn this_machine_loads_or_says_why() {
    match Facts::load() {
        Ok(f) => {
            assert!(!f.pus.is_empty());
            assert_eq!(f.all_cpus().len(), f.pus.len());
        }
        Err(e) => assert!(!e.is_empty()),
    }
}

#[test]
fn ranks_filling_the_machine_keep_their_agents_in_their_binding() {
    let f = two_numa_two_nics();
    let among = |binding: &[usize], local: usize| {
        agent_placement_among(Some(&f), &ProgressCpu::Auto, binding, Some("mlx5_0"), local)
            .unwrap()
    };
    // One rank bound to core 0: a free core near the NIC.
    assert_eq!(among(&[0], 1).cpus, Some(vec![1]));
    // Two ranks bound to one core each on 4 cores: still free cores.
    assert_eq!(among(&[0], 2).cpus, Some(vec![1]));
    // Four ranks, one core each: every core is a rank's.
    let p = among(&[0], 4);
    assert_eq!(p.cpus, None);
    assert!(p.reason.contains("fill its 4 cores"), "{}", p.reason);
    // Two ranks bound to two cores each: full as well.
    assert_eq!(among(&[0, 1], 2).cpus, None);
    // An explicit list is taken as given.
    let p = agent_placement_among(Some(&f), &ProgressCpu::List(vec![3]), &[0], None, 4).unwrap();
    assert_eq!(p.cpus, Some(vec![3]));
}
