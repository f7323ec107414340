//! No launcher: the process is rank 0 of a job of 1.
//!
//! `put`/`get` use a local map with the same key and value rules as the
//! launched mechanisms (so a program that works alone does not break under a
//! launcher); `barrier` has nobody to wait for.

use std::collections::HashMap;
use std::sync::Mutex;

use super::stats::{BootstrapStats, Counters};
use super::{wire, Bootstrap, MAX_KEY_LEN, MAX_VALUE_LEN};
use crate::error::{Error, Result};

/// Rank 0 of 1.
#[derive(Debug, Default)]
pub struct Singleton {
    kvs: Mutex<HashMap<String, String>>,
    counters: Counters,
}

impl Singleton {
    /// A fresh, empty singleton job.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Bootstrap for Singleton {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn put(&self, key: &str, value: &str) -> Result<()> {
        let bad = |m| Error::InvalidArgument(format!("bootstrap put: {m}"));
        wire::validate_key(key, MAX_KEY_LEN).map_err(bad)?;
        wire::validate_value(value, MAX_VALUE_LEN).map_err(bad)?;
        self.kvs
            .lock()
            .map_err(|_| Error::bootstrap("singleton", "store lock poisoned"))?
            .insert(key.to_string(), value.to_string());
        self.counters.put(key, value);
        Ok(())
    }
    fn barrier(&self) -> Result<()> {
        self.counters.fence();
        Ok(())
    }
    fn get(&self, key: &str) -> Result<String> {
        let r = self
            .kvs
            .lock()
            .map_err(|_| Error::bootstrap("singleton", "store lock poisoned"))?
            .get(key)
            .cloned()
            .ok_or_else(|| Error::bootstrap("singleton", format!("key '{key}' not found")));
        self.counters.get(r.as_ref().ok().map(|v| v.len()));
        r
    }
    fn name(&self) -> &'static str {
        "singleton"
    }
    fn stats(&self) -> BootstrapStats {
        self.counters.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_store() {
        let s = Singleton::new();
        assert_eq!((s.rank(), s.size(), s.name()), (0, 1, "singleton"));
        s.put("k", "v").unwrap();
        s.barrier().unwrap();
        assert_eq!(s.get("k").unwrap(), "v");
        assert!(s.get("missing").is_err());
        assert!(s.put("a b", "v").is_err());
        assert!(s.put("k", &"v".repeat(MAX_VALUE_LEN + 1)).is_err());
    }
}
