use proptest::prelude::*;

use super::*;

/// MPICH's expansion, rank by rank (the test oracle: O(P) on purpose).
fn naive(blocks: &[Block], size: usize) -> Vec<u64> {
    let mut out = Vec::new();
    while out.len() < size {
        for b in blocks {
            for n in b.node..b.node + b.nodes {
                for _ in 0..b.ranks_per_node {
                    if out.len() < size {
                        out.push(n);
                    }
                }
            }
        }
    }
    out
}

fn render(blocks: &[Block]) -> String {
    let mut s = String::from("(vector");
    for b in blocks {
        s += &format!(",({},{},{})", b.node, b.nodes, b.ranks_per_node);
    }
    s + ")"
}

#[test]
fn examples() {
    let m = NodeMap::from_pmi_mapping("(vector,(0,2,4))", 5, 8).unwrap();
    assert_eq!(m.node_of(3), Some(0));
    assert_eq!(m.node_of(4), Some(1));
    assert!(m.is_local(7) && !m.is_local(0) && !m.all_local());
    let rr = NodeMap::from_pmi_mapping("(vector,(0,2,1))", 0, 8).unwrap();
    assert!(rr.is_local(6) && !rr.is_local(5));
    let one = NodeMap::from_pmi_mapping("(vector,(0,1,4))", 2, 4).unwrap();
    assert!(one.all_local() && one.is_local(3));
    // Fewer ranks than the mapping describes: still one node.
    assert!(NodeMap::from_pmi_mapping("(vector,(0,4,2))", 1, 2)
        .unwrap()
        .all_local());
    assert!(NodeMap::all(3, 4).all_local());
    let alone = NodeMap::only_self(1, 3);
    assert!(alone.is_local(1) && !alone.is_local(0) && !alone.all_local());
    assert_eq!(alone.node_of(0), None);
}

#[test]
fn rejects_malformed() {
    for bad in [
        "",
        "(vector)",
        "(vector,)",
        "vector,(0,1,2)",
        "(vector,(0,1,2)",
        "(vector,(0,0,2))",
        "(vector,(0,1,0))",
        "(vector,(0,1))",
        "(vector,(0,1,2,3))",
        "(vector,(-1,1,2))",
        "(vector,(0,1,2)x)",
        "(vector, (0,1,2))",
        "(vector,(99999999999,1,2))",
        "(vector,(2147483647,2,1))",
        "(vector,(0,1,+2))",
    ] {
        assert!(parse_mapping(bad).is_err(), "accepted {bad:?}");
    }
    let many = format!("(vector{})", ",(0,1,1)".repeat(MAX_BLOCKS + 1));
    assert!(parse_mapping(&many).is_err());
    assert!(NodeMap::from_pmi_mapping("(vector,(0,1,1))", 1, 2).is_ok());
    assert!(NodeMap::from_pmi_mapping("(vector,(0,1,1))", 2, 1).is_err());
}

fn block() -> impl Strategy<Value = Block> {
    (0u64..6, 1u64..4, 1u64..5).prop_map(|(node, nodes, ranks_per_node)| Block {
        node,
        nodes,
        ranks_per_node,
    })
}

proptest! {
    #[test]
    fn never_panics(s in ".{0,80}") {
        let _ = parse_mapping(&s);
        let _ = NodeMap::from_pmi_mapping(&s, 0, 4);
    }

    #[test]
    fn never_panics_near_valid(s in "\\(vector(,\\([0-9]{1,11},[0-9]{1,11},[0-9]{1,11}\\)){0,3}\\)") {
        if let Ok(blocks) = parse_mapping(&s) {
            let _ = NodeMap::from_blocks(0, 7, blocks);
        }
    }

    #[test]
    fn agrees_with_expansion(blocks in prop::collection::vec(block(), 1..5), size in 1usize..40, r in 0usize..40) {
        let rank = r % size;
        let text = render(&blocks);
        prop_assert_eq!(parse_mapping(&text).unwrap(), blocks.clone());
        let m = NodeMap::from_pmi_mapping(&text, rank, size).unwrap();
        let ids = naive(&blocks, size);
        for (q, id) in ids.iter().enumerate() {
            prop_assert_eq!(m.node_of(q), Some(*id));
            prop_assert_eq!(m.is_local(q), *id == ids[rank]);
        }
        prop_assert_eq!(m.node_of(size), None);
        prop_assert_eq!(m.all_local(), ids.iter().all(|i| *i == ids[rank]));
    }
}
