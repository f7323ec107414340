//! What libfabric offers on this machine, for `onesided-info`.
//!
//! [`providers`] lists every distinct provider/fabric/domain with RDM
//! endpoints and RMA, under the constraints onesided opens domains with
//! (`mr_mode` bits it handles, `FI_THREAD_SAFE`, manual data progress).
//! [`atomic_matrix`] opens one domain and asks `fi_query_atomic` which
//! operation/datatype pairs it supports.

mod atomic;

use std::collections::HashSet;
use std::hash::Hash;

use libfabric_sys as fi;
use serde::Serialize;

use super::info::{self, mr_mode_names, progress_name, InfoList, InfoRef};
use crate::error::{Error, Result};

pub use atomic::{atomic_matrix, AtomicCell, AtomicMatrix, AtomicRow, DATATYPES, OPS};

/// Capabilities worth showing, in display order.
const CAPS_SHOWN: &[(u64, &str)] = &[
    (fi::FI_RMA, "RMA"),
    (fi::FI_ATOMIC, "ATOMIC"),
    (fi::FI_MSG, "MSG"),
    (fi::FI_TAGGED, "TAGGED"),
    (fi::FI_FENCE, "FENCE"),
    (fi::FI_RMA_EVENT, "RMA_EVENT"),
    (fi::FI_TRIGGER, "TRIGGER"),
    (fi::FI_HMEM, "HMEM"),
    (fi::FI_LOCAL_COMM, "LOCAL_COMM"),
    (fi::FI_REMOTE_COMM, "REMOTE_COMM"),
    (fi::FI_SHARED_AV, "SHARED_AV"),
];

/// Caps onesided asks for when it wants atomics (as `query_rdm(true)`).
const ATOMIC_CAPS: u64 = fi::FI_RMA | fi::FI_MSG | fi::FI_ATOMIC;

/// One provider on one fabric/domain, as onesided would open it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderReport {
    /// Full provider name, e.g. `tcp;ofi_rxm`.
    pub provider: String,
    /// Core provider, e.g. `tcp`.
    pub core_provider: String,
    /// Fabric name (for IP providers: the subnet).
    pub fabric: String,
    /// Domain name (the NIC or interface).
    pub domain: String,
    /// Endpoint type (`rdm`).
    pub endpoint: String,
    /// Capabilities of interest the provider lists without being asked.
    pub caps: Vec<String>,
    /// Whether the provider offers atomics when asked for `FI_ATOMIC`
    /// (`tcp;ofi_rxm` does not list them otherwise).
    pub atomics: bool,
    /// `mr_mode` bits the provider demands.
    pub mr_mode: Vec<String>,
    /// Data progress mode.
    pub data_progress: String,
    /// Control progress mode.
    pub control_progress: String,
    /// Threading model.
    pub threading: String,
    /// Largest `fi_inject` payload in bytes.
    pub inject_size: usize,
    /// Largest message in bytes.
    pub max_msg_size: usize,
    /// Whether the transmit side promises `FI_ORDER_RMA_RAW`.
    pub ordered_rma_raw: bool,
    /// How onesided completes writes at the target: `ordered read` with
    /// `FI_ORDER_RMA_RAW`, `delivery-complete` otherwise.
    pub flush: String,
    /// Whether onesided picks this entry when `ONESIDED_PROVIDER` is unset.
    pub auto_choice: bool,
}

impl ProviderReport {
    /// The (provider, fabric, domain) triple entries are de-duplicated by.
    pub fn key(&self) -> (&str, &str, &str) {
        (&self.provider, &self.fabric, &self.domain)
    }

    /// Whether `name` selects this provider, as `ONESIDED_PROVIDER` does:
    /// the full name (`tcp;ofi_rxm`) or the core name (`tcp`).
    pub fn matches(&self, name: &str) -> bool {
        self.provider == name || self.core_provider == name
    }

    fn from_entry(e: InfoRef<'_>, atomics: bool, auto_choice: bool) -> ProviderReport {
        let ordered = e.msg_order() & fi::FI_ORDER_RMA_RAW != 0;
        let (data, control) = e.progress();
        ProviderReport {
            provider: e.provider(),
            core_provider: e.core_provider(),
            fabric: e.fabric(),
            domain: e.domain(),
            endpoint: ep_type_name(e.ep_type()).into(),
            caps: caps_names(e.caps()),
            atomics,
            mr_mode: mr_mode_names(e.mr_mode())
                .into_iter()
                .map(String::from)
                .collect(),
            data_progress: progress_name(data).into(),
            control_progress: progress_name(control).into(),
            threading: threading_name(e.threading()).into(),
            inject_size: e.inject_size(),
            max_msg_size: e.max_msg_size(),
            ordered_rma_raw: ordered,
            flush: if ordered {
                "ordered read"
            } else {
                "delivery-complete"
            }
            .into(),
            auto_choice,
        }
    }
}

fn key_of(e: &InfoRef<'_>) -> (String, String, String) {
    (e.provider(), e.fabric(), e.domain())
}

/// Keeps the first item of every key, in order. `fi_getinfo` repeats a
/// provider/domain once per address format and capability variant.
pub fn dedup_by_key<T, K: Hash + Eq>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(&T) -> K,
) -> Vec<T> {
    let mut seen = HashSet::new();
    items.into_iter().filter(|i| seen.insert(key(i))).collect()
}

/// Every distinct provider/fabric/domain offering RDM endpoints with RMA.
/// Fails with [`Error::NoProvider`] when libfabric finds none.
pub fn providers() -> Result<Vec<ProviderReport>> {
    // No caps in the hints: the entries then list all the provider's caps.
    let all = InfoList::query(0)?.ok_or_else(no_provider)?;
    let with_atomics = InfoList::query(ATOMIC_CAPS)?;
    let atomic_keys: HashSet<_> = with_atomics
        .iter()
        .flat_map(|l| l.iter())
        .map(|e| key_of(&e))
        .collect();
    let usable = InfoList::query_rdm(false).ok();
    let auto = usable
        .as_ref()
        .and_then(info::auto_choice)
        .map(|e| key_of(&e));

    let entries = all.iter().filter(|e| e.caps() & fi::FI_RMA != 0);
    let reports: Vec<ProviderReport> = dedup_by_key(entries, key_of)
        .into_iter()
        .map(|e| {
            let key = key_of(&e);
            ProviderReport::from_entry(e, atomic_keys.contains(&key), auto.as_ref() == Some(&key))
        })
        .collect();
    if reports.is_empty() {
        return Err(no_provider());
    }
    Ok(reports)
}

/// The atomic matrix of the provider/domain of `report`, or `None` when it
/// offers no atomics. Opens (and closes) a fabric and a domain.
pub fn atomic_matrix_for(report: &ProviderReport) -> Result<Option<AtomicMatrix>> {
    let Some(list) = InfoList::query(ATOMIC_CAPS)? else {
        return Ok(None);
    };
    let wanted = (
        report.provider.clone(),
        report.fabric.clone(),
        report.domain.clone(),
    );
    let found = list.iter().find(|e| key_of(e) == wanted);
    found.map(atomic_matrix).transpose()
}

/// Version of the libfabric library loaded at run time, as `major.minor`.
pub fn libfabric_version() -> String {
    // SAFETY: fi_version takes no arguments and has no preconditions.
    let v = unsafe { fi::fi_version() };
    format!("{}.{}", v >> 16, v & 0xffff)
}

fn no_provider() -> Error {
    Error::NoProvider(
        "libfabric lists no provider with RDM endpoints and RMA \
         (check `fi_info -l`, FI_PROVIDER and FI_PROVIDER_PATH)"
            .into(),
    )
}

fn caps_names(caps: u64) -> Vec<String> {
    CAPS_SHOWN
        .iter()
        .filter(|(bit, _)| caps & bit != 0)
        .map(|(_, n)| (*n).to_string())
        .collect()
}

fn ep_type_name(t: u32) -> &'static str {
    match t {
        fi::FI_EP_RDM => "rdm",
        fi::FI_EP_MSG => "msg",
        fi::FI_EP_DGRAM => "dgram",
        _ => "unspec",
    }
}

fn threading_name(t: u32) -> &'static str {
    match t {
        fi::FI_THREAD_SAFE => "safe",
        fi::FI_THREAD_FID => "fid",
        fi::FI_THREAD_DOMAIN => "domain",
        fi::FI_THREAD_COMPLETION => "completion",
        fi::FI_THREAD_ENDPOINT => "endpoint",
        _ => "unspec",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_keeps_first_of_each_key_in_order() {
        let entries = [
            ("tcp;ofi_rxm", "127.0.0.1/32", "lo", 1),
            ("tcp;ofi_rxm", "127.0.0.1/32", "lo", 2),
            ("tcp;ofi_rxm", "::1/128", "lo", 3),
            ("shm", "shm", "shm", 4),
            ("tcp;ofi_rxm", "127.0.0.1/32", "lo", 5),
            ("shm", "shm", "shm", 6),
            ("sockets", "127.0.0.1/32", "lo", 7),
        ];
        let kept = dedup_by_key(entries, |e| (e.0, e.1, e.2));
        let ids: Vec<i32> = kept.iter().map(|e| e.3).collect();
        assert_eq!(ids, [1, 3, 4, 7]);
    }

    #[test]
    fn survey_lists_distinct_entries() {
        let Ok(reports) = providers() else {
            eprintln!("SKIP: libfabric lists no RDM provider with RMA here");
            return;
        };
        let keys: HashSet<_> = reports.iter().map(|r| r.key()).collect();
        assert_eq!(keys.len(), reports.len(), "duplicate entries survived");
        assert!(reports.iter().filter(|r| r.auto_choice).count() <= 1);
        assert!(reports.iter().all(|r| r.caps.iter().any(|c| c == "RMA")));
    }
}
