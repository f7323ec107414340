//! PMIx: Slurm's `srun --mpi=pmix`, Open MPI's `mpirun` (4.x), `prterun`.
//!
//! Through the safe client of the `pmix-sys` crate (libpmix, bindgen):
//!
//! * rank from `PMIx_Init`, size from the job's `PMIX_JOB_SIZE`, node-local
//!   ranks from `PMIX_LOCAL_PEERS` (asked when the node map is built);
//! * `put` = `PMIx_Put(PMIX_GLOBAL, key, string)`;
//! * `barrier` = `PMIx_Commit` + `PMIx_Fence` over the namespace **without
//!   collecting data** (`PMIX_COLLECT_DATA = false`): nothing is gathered at
//!   start-up, so a fence costs the same at any job size;
//! * `get` = `PMIx_Get` from the publishing rank, fetched on first contact
//!   (PMIx's direct modex), bounded by `ONESIDED_TIMEOUT`.
//!
//! PMIx stores values per process, while PMI keys are global. The publisher
//! of a key is its `-<rank>` suffix (the convention of every key onesided
//! publishes, see [`super::Bootstrap`]); a key without one is looked up
//! among our own values.
//!
//! Strings from PMIx are checked like any launcher input (bounded, UTF-8,
//! same key/value rules as PMI-1); the local-peers list is parsed strictly.
//! A build without PMIx (see `pmix_sys::BUILD`) never gets here:
//! [`super::init`] refuses a PMIx environment with "PMIx support not built".

use super::stats::{BootstrapStats, Counters};
use super::{wire, Bootstrap, MAX_KEY_LEN, MAX_VALUE_LEN};
use crate::error::{Error, Result};

const VIA: &str = "pmix";

/// `PMIX_JOB_SIZE`.
const JOB_SIZE: &str = "pmix.job.size";
/// `PMIX_LOCAL_PEERS`: comma-separated ranks of our namespace on this node.
const LOCAL_PEERS: &str = "pmix.lpeers";
/// Longest local-peers list accepted (characters).
const MAX_PEERS_LEN: usize = 1 << 22;

/// A joined PMIx job.
#[derive(Debug)]
pub struct Pmix {
    client: pmix_sys::Client,
    rank: usize,
    size: usize,
    get_timeout: Option<u32>,
    counters: Counters,
}

fn err(e: pmix_sys::Error) -> Error {
    Error::bootstrap(VIA, e)
}

impl Pmix {
    /// `PMIx_Init` with the server named by the environment.
    pub fn from_env() -> Result<Self> {
        let get_timeout = match std::env::var("ONESIDED_TIMEOUT") {
            Err(_) => Some(60),
            Ok(v) => match v.trim().parse::<u32>() {
                Ok(0) => None,
                Ok(s) => Some(s),
                Err(_) => {
                    return Err(Error::Config {
                        var: "ONESIDED_TIMEOUT",
                        value: v,
                        message: "not a number of seconds".into(),
                    })
                }
            },
        };
        let client = pmix_sys::Client::init().map_err(|e| {
            Error::bootstrap(
                VIA,
                format!(
                    "{e} (PMIX_NAMESPACE={:?}, PMIX_RANK={:?}); is the PMIx server of the \
                     launcher reachable?",
                    std::env::var("PMIX_NAMESPACE").unwrap_or_default(),
                    std::env::var("PMIX_RANK").unwrap_or_default()
                ),
            )
        })?;
        let counters = Counters::default();
        let size = client.job_u32(JOB_SIZE).map_err(err)?;
        counters.query(size.map(|_| 4));
        let size = size
            .ok_or_else(|| Error::bootstrap(VIA, "the launcher gave no job size (PMIX_JOB_SIZE)"))?
            as usize;
        let rank = client.rank() as usize;
        if size == 0 || rank >= size {
            return Err(Error::Protocol {
                peer: "PMIx server".into(),
                message: format!("rank {rank} is not in 0..{size}"),
            });
        }
        tracing::debug!(rank, size, namespace = client.namespace(), "pmix: joined");
        Ok(Pmix {
            client,
            rank,
            size,
            get_timeout,
            counters,
        })
    }

    /// The namespace (job id) PMIx gave us.
    pub fn namespace(&self) -> &str {
        self.client.namespace()
    }
}

/// The publisher of `key`: its `-<rank>` suffix when that is a rank of the
/// job, else `me`.
pub fn owner_of(key: &str, me: usize, size: usize) -> usize {
    key.rsplit_once('-')
        .filter(|(_, r)| !r.is_empty() && r.len() <= 10 && r.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|(_, r)| r.parse::<usize>().ok())
        .filter(|&r| r < size)
        .unwrap_or(me)
}

/// Parses `PMIX_LOCAL_PEERS` (`"0,1,2"`): sorted, unique ranks below
/// `size`, containing `me`. Hostile input gives an error, never a panic.
pub fn parse_local_peers(
    value: &str,
    me: usize,
    size: usize,
) -> std::result::Result<Vec<usize>, String> {
    if value.len() > MAX_PEERS_LEN {
        return Err(format!("list of {} characters", value.len()));
    }
    let mut out = Vec::new();
    for part in value.split(',') {
        let p = part.trim();
        if p.is_empty() || p.len() > 10 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("'{}' is not a rank", wire::shorten(p)));
        }
        let r: usize = p
            .parse()
            .map_err(|_| format!("'{}' is not a rank", wire::shorten(p)))?;
        if r >= size {
            return Err(format!("rank {r} is not in 0..{size}"));
        }
        out.push(r);
        if out.len() > size {
            return Err(format!("more than {size} ranks"));
        }
    }
    out.sort_unstable();
    if out.windows(2).any(|w| w[0] == w[1]) {
        return Err("a rank appears twice".into());
    }
    if out.binary_search(&me).is_err() {
        return Err(format!("our own rank {me} is not in it"));
    }
    Ok(out)
}

impl Bootstrap for Pmix {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn put(&self, key: &str, value: &str) -> Result<()> {
        let bad = |m| Error::InvalidArgument(format!("bootstrap put: {m}"));
        wire::validate_key(key, MAX_KEY_LEN).map_err(bad)?;
        wire::validate_value(value, MAX_VALUE_LEN).map_err(bad)?;
        self.client.put(key, value).map_err(err)?;
        self.counters.put(key, value);
        Ok(())
    }
    fn barrier(&self) -> Result<()> {
        self.client.commit().map_err(err)?;
        self.client.fence(None).map_err(err)?;
        self.counters.fence();
        Ok(())
    }
    fn get(&self, key: &str) -> Result<String> {
        wire::validate_key(key, MAX_KEY_LEN)
            .map_err(|m| Error::InvalidArgument(format!("bootstrap get: {m}")))?;
        let owner = owner_of(key, self.rank, self.size);
        let r = self
            .client
            .get_string(owner as u32, key, self.get_timeout)
            .map_err(|e| {
                if e.status == pmix_sys::ERR_TIMEOUT {
                    Error::timeout(format!("pmix: getting key '{key}' of rank {owner}"), self.get_timeout.unwrap_or(0) as u64).awaiting(owner)
                } else {
                    err(e)
                }
            })
            .and_then(|v| {
                v.ok_or_else(|| {
                    Error::bootstrap(VIA, format!("key '{key}' of rank {owner} not found"))
                })
            })
            .and_then(|v| {
                wire::validate_value(&v, MAX_VALUE_LEN)
                    .map(|_| v)
                    .map_err(|m| Error::Protocol {
                        peer: format!("rank {owner} (through PMIx)"),
                        message: format!("key '{key}': {m}"),
                    })
            });
        self.counters.get(r.as_ref().ok().map(|v| v.len()));
        r
    }
    fn name(&self) -> &'static str {
        VIA
    }
    fn stats(&self) -> BootstrapStats {
        self.counters.snapshot()
    }
    fn abort(&self, code: i32, msg: &str) {
        // Slurm's and Open MPI's PMIx servers end the whole namespace; the
        // call may not return before this process is killed.
        if let Err(e) = self.client.abort(code, msg) {
            tracing::debug!("pmix: PMIx_Abort failed: {e}");
        }
    }
    fn local_ranks(&self) -> Result<Option<Vec<usize>>> {
        let v = self.client.job_string(LOCAL_PEERS).map_err(err)?;
        self.counters.query(v.as_ref().map(|v| v.len()));
        match v {
            None => Ok(None),
            Some(v) => parse_local_peers(&v, self.rank, self.size)
                .map(Some)
                .map_err(|m| Error::Protocol {
                    peer: "PMIx server".into(),
                    message: format!("PMIX_LOCAL_PEERS '{}': {m}", wire::shorten(&v)),
                }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners() {
        assert_eq!(owner_of("os-3", 0, 4), 3);
        assert_eq!(owner_of("osh-0", 2, 4), 0);
        assert_eq!(owner_of("k-12", 1, 4), 1, "out of the job: ours");
        assert_eq!(owner_of("never-put", 1, 4), 1);
        assert_eq!(owner_of("x-", 1, 4), 1);
        assert_eq!(owner_of("x--1", 1, 4), 1);
        assert_eq!(owner_of("x-99999999999999999999", 1, 4), 1);
        assert_eq!(owner_of("plain", 2, 4), 2);
    }

    #[test]
    fn local_peers() {
        assert_eq!(
            parse_local_peers("0,1,2,3", 1, 4).unwrap(),
            vec![0, 1, 2, 3]
        );
        assert_eq!(parse_local_peers("3,1", 1, 4).unwrap(), vec![1, 3]);
        for bad in [
            "",
            "0,,1",
            "0,x",
            "0,4",
            "1,1",
            "0,2",
            "-1,1",
            "1 ,0;",
            "99999999999",
        ] {
            assert!(parse_local_peers(bad, 1, 4).is_err(), "accepted {bad:?}");
        }
    }
}
