//! Which ranks share this node, without a per-rank table.
//!
//! * `onesided-run` starts every rank on the node it runs on (it is a
//!   single-node launcher: `spawn` forks local processes only), so all ranks
//!   are local.
//! * Under PMI-1 (Hydra, Slurm) the key `PMI_process_mapping` describes the
//!   placement as `(vector,(node,nodes,ranks_per_node),...)`: each block puts
//!   `ranks_per_node` consecutive ranks on node `node`, the next as many on
//!   `node + 1`, ... for `nodes` nodes; the blocks are concatenated and the
//!   whole pattern repeats until every rank is placed (MPICH's rule). E.g.
//!   `(vector,(0,2,4))` with 8 ranks: 0–3 on node 0, 4–7 on node 1;
//!   `(vector,(0,2,1))`: even ranks on node 0, odd ranks on node 1.
//!   The value comes from outside the process and is parsed as hostile input.
//!   A missing key means "unknown": only this rank is local (correct, just
//!   never direct).
//! * Under PMIx the launcher lists the ranks of this node
//!   (`PMIX_LOCAL_PEERS`, [`super::Bootstrap::local_ranks`]); the map keeps
//!   that list (O(ranks on this node), never O(job)).
//! * A singleton is alone.
//!
//! The representation is the list of blocks (bounded by the 1023-character
//! value), so a lookup costs O(blocks) and memory never grows with the job.

use super::Bootstrap;
use crate::error::{Error, Result};

/// The KVS key Hydra (and Slurm's PMI-1) provide.
pub const MAPPING_KEY: &str = "PMI_process_mapping";

/// Most blocks accepted (a 1023-character value holds fewer than 150).
const MAX_BLOCKS: usize = 256;
/// Largest node id, node count or ranks per node accepted.
const MAX_FIELD: u64 = 1 << 31;

/// One `(node, nodes, ranks_per_node)` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// First node id.
    pub node: u64,
    /// Number of consecutive nodes.
    pub nodes: u64,
    /// Consecutive ranks per node.
    pub ranks_per_node: u64,
}

/// Node membership of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeMap {
    rank: usize,
    size: usize,
    /// `None`: placement unknown, only `rank` is known to be local.
    blocks: Option<Vec<Block>>,
    period: u64,
    my_node: u64,
    all_local: bool,
    /// The ranks of this node, sorted, when the launcher gave them as a list.
    local: Option<Vec<usize>>,
}

impl NodeMap {
    /// Every rank of the job on this node.
    pub fn all(rank: usize, size: usize) -> NodeMap {
        Self::from_blocks(
            rank,
            size,
            vec![Block {
                node: 0,
                nodes: 1,
                ranks_per_node: size.max(1) as u64,
            }],
        )
        .unwrap_or_else(|_| Self::only_self(rank, size))
    }

    /// Placement unknown: only this rank counts as local.
    pub fn only_self(rank: usize, size: usize) -> NodeMap {
        NodeMap {
            rank,
            size,
            blocks: None,
            period: 1,
            my_node: 0,
            all_local: size == 1,
            local: None,
        }
    }

    /// The ranks of this node as a sorted list (PMIx's local peers); must
    /// contain `rank`.
    pub fn from_local_ranks(rank: usize, size: usize, local: Vec<usize>) -> Result<NodeMap> {
        if size == 0 || rank >= size {
            return Err(Error::InvalidArgument(format!(
                "node map: rank {rank} is not in 0..{size}"
            )));
        }
        if local.binary_search(&rank).is_err() || local.last().is_some_and(|&r| r >= size) {
            return Err(Error::InvalidArgument(format!(
                "node map: local ranks must contain {rank} and lie in 0..{size}"
            )));
        }
        Ok(NodeMap {
            rank,
            size,
            blocks: None,
            period: 1,
            my_node: 0,
            all_local: local.len() == size,
            local: Some(local),
        })
    }

    /// Parses a `PMI_process_mapping` value for rank `rank` of `size`.
    pub fn from_pmi_mapping(value: &str, rank: usize, size: usize) -> Result<NodeMap> {
        let blocks = parse_mapping(value).map_err(|m| Error::Protocol {
            peer: "PMI server".into(),
            message: format!("{MAPPING_KEY} '{}': {m}", super::wire::shorten(value)),
        })?;
        Self::from_blocks(rank, size, blocks)
    }

    fn from_blocks(rank: usize, size: usize, blocks: Vec<Block>) -> Result<NodeMap> {
        if size == 0 || rank >= size {
            return Err(Error::InvalidArgument(format!(
                "node map: rank {rank} is not in 0..{size}"
            )));
        }
        let mut period = 0u64;
        for b in &blocks {
            period = b
                .nodes
                .checked_mul(b.ranks_per_node)
                .and_then(|n| period.checked_add(n))
                .ok_or_else(|| Error::InvalidArgument("node map: block sizes overflow".into()))?;
        }
        let mut map = NodeMap {
            rank,
            size,
            blocks: Some(blocks),
            period: period.max(1),
            my_node: 0,
            all_local: false,
            local: None,
        };
        map.my_node = map.node_of(rank).unwrap_or(0);
        map.all_local = map.spans_one_node();
        Ok(map)
    }

    /// The node id of `rank`, `None` if unknown (or `rank` out of range).
    pub fn node_of(&self, rank: usize) -> Option<u64> {
        if let Some(local) = &self.local {
            return local.binary_search(&rank).ok().map(|_| 0);
        }
        let blocks = self.blocks.as_ref()?;
        if rank >= self.size {
            return None;
        }
        let mut i = rank as u64 % self.period;
        for b in blocks {
            let span = b.nodes * b.ranks_per_node;
            if i < span {
                return Some(b.node + i / b.ranks_per_node);
            }
            i -= span;
        }
        None
    }

    /// Whether `rank` runs on this node.
    #[inline]
    pub fn is_local(&self, rank: usize) -> bool {
        if rank == self.rank {
            return true;
        }
        if self.all_local {
            // The usual single-node job: no lookup (`node_of` divides).
            return rank < self.size;
        }
        self.node_of(rank).is_some_and(|n| n == self.my_node)
    }

    /// This process's rank (the bootstrap's, kept here so that the hot
    /// paths read a field instead of calling through the bootstrap).
    #[inline]
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of processes of the job.
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether every rank of the job runs on this node.
    pub fn all_local(&self) -> bool {
        self.all_local
    }

    /// Every rank in 0..size on `my_node`? O(blocks): only the first
    /// `min(size, period)` ranks matter, the pattern repeats after that.
    fn spans_one_node(&self) -> bool {
        let Some(blocks) = &self.blocks else {
            return self.size == 1;
        };
        let mut start = 0u64;
        let size = self.size as u64;
        for b in blocks {
            if start >= size {
                break;
            }
            let span = b.nodes * b.ranks_per_node;
            let covered = span.min(size - start);
            let nodes_used = covered.div_ceil(b.ranks_per_node);
            if b.node != self.my_node || nodes_used > 1 {
                return false;
            }
            start += span;
        }
        true
    }
}

/// Learns the membership from how the job was started, or from
/// `overridden` (`ONESIDED_NODE_MAPPING`, same format as the PMI key; for
/// testing mixed local/remote placements on one machine).
pub fn discover(boot: &dyn Bootstrap, overridden: Option<&str>) -> Result<NodeMap> {
    let (rank, size) = (boot.rank(), boot.size());
    if let Some(v) = overridden {
        return parse_mapping(v)
            .map_err(|m| Error::Config {
                var: "ONESIDED_NODE_MAPPING",
                value: v.to_string(),
                message: m,
            })
            .and_then(|b| NodeMap::from_blocks(rank, size, b));
    }
    match boot.name() {
        "onesided-run" | "singleton" => Ok(NodeMap::all(rank, size)),
        _ => {
            if let Some(list) = boot.local_ranks()? {
                return NodeMap::from_local_ranks(rank, size, list);
            }
            match boot.get(MAPPING_KEY) {
                Ok(v) if !v.trim().is_empty() => NodeMap::from_pmi_mapping(&v, rank, size),
                Ok(_) | Err(_) => {
                    tracing::debug!("no {MAPPING_KEY}: treating only this rank as node-local");
                    Ok(NodeMap::only_self(rank, size))
                }
            }
        }
    }
}

/// Parses `(vector,(a,b,c),(d,e,f),...)` strictly: no spaces inside, at
/// least one block, every field a decimal in range, `nodes` and
/// `ranks_per_node` at least 1.
pub fn parse_mapping(value: &str) -> std::result::Result<Vec<Block>, String> {
    let s = value.trim();
    let inner = s
        .strip_prefix("(vector")
        .and_then(|r| r.strip_suffix(')'))
        .ok_or("expected '(vector,...)'")?;
    let mut rest = inner;
    let mut blocks = Vec::new();
    while !rest.is_empty() {
        let r = rest
            .strip_prefix(",(")
            .ok_or_else(|| format!("expected ',(' at '{}'", head(rest)))?;
        let end = r.find(')').ok_or("unterminated block")?;
        let fields: Vec<&str> = r[..end].split(',').collect();
        if fields.len() != 3 {
            return Err(format!("block '({})' needs 3 fields", head(&r[..end])));
        }
        let num = |f: &str, what: &str, min: u64| -> std::result::Result<u64, String> {
            if f.is_empty() || f.len() > 10 || !f.bytes().all(|c| c.is_ascii_digit()) {
                return Err(format!("{what} '{}' is not a number", head(f)));
            }
            let v: u64 = f.parse().map_err(|_| format!("{what} '{f}' is invalid"))?;
            if v < min || v > MAX_FIELD {
                return Err(format!("{what} {v} is outside {min}..={MAX_FIELD}"));
            }
            Ok(v)
        };
        let b = Block {
            node: num(fields[0], "node id", 0)?,
            nodes: num(fields[1], "node count", 1)?,
            ranks_per_node: num(fields[2], "ranks per node", 1)?,
        };
        if b.node + b.nodes > MAX_FIELD {
            return Err(format!(
                "nodes {}..{} out of range",
                b.node,
                b.node + b.nodes
            ));
        }
        blocks.push(b);
        if blocks.len() > MAX_BLOCKS {
            return Err(format!("more than {MAX_BLOCKS} blocks"));
        }
        rest = &r[end + 1..];
    }
    if blocks.is_empty() {
        return Err("no blocks".into());
    }
    Ok(blocks)
}

fn head(s: &str) -> String {
    s.chars().take(16).collect()
}

#[cfg(test)]
mod tests;
