//! The client of a build without PMIx: every call says so.

use crate::{Error, BUILD};

fn not_built() -> Error {
    Error {
        call: "PMIx_Init",
        status: 0,
        message: format!("PMIx support not built ({})", BUILD),
    }
}

/// Never constructed without PMIx.
#[derive(Debug)]
pub struct Client {
    _never: std::convert::Infallible,
}

impl Client {
    /// Always "PMIx support not built".
    pub fn init() -> Result<Client, Error> {
        Err(not_built())
    }
    /// Unreachable (no `Client` exists).
    pub fn rank(&self) -> u32 {
        match self._never {}
    }
    /// Unreachable.
    pub fn namespace(&self) -> &str {
        match self._never {}
    }
    /// Unreachable.
    pub fn put(&self, _key: &str, _value: &str) -> Result<(), Error> {
        match self._never {}
    }
    /// Unreachable.
    pub fn abort(&self, _status: i32, _msg: &str) -> Result<(), Error> {
        match self._never {}
    }
    /// Unreachable.
    pub fn commit(&self) -> Result<(), Error> {
        match self._never {}
    }
    /// Unreachable.
    pub fn fence(&self, _timeout_secs: Option<u32>) -> Result<(), Error> {
        match self._never {}
    }
    /// Unreachable.
    pub fn get_string(
        &self,
        _rank: u32,
        _key: &str,
        _timeout_secs: Option<u32>,
    ) -> Result<Option<String>, Error> {
        match self._never {}
    }
    /// Unreachable.
    pub fn job_u32(&self, _key: &str) -> Result<Option<u32>, Error> {
        match self._never {}
    }
    /// Unreachable.
    pub fn job_string(&self, _key: &str) -> Result<Option<String>, Error> {
        match self._never {}
    }
}
