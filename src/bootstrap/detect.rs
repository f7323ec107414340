//! Which launcher started this process, from its environment — and a clear
//! error when it was one we cannot speak.
//!
//! The decision is a pure function of a snapshot of the environment
//! ([`Mechanism::detect`]), so every case is unit-tested without setting
//! variables in the test process.

use std::collections::BTreeMap;
use std::ffi::OsString;

use crate::error::{Error, Result};

/// How this process joins its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// Our `onesided-run` (`ONESIDED_LAUNCHER_ADDR`).
    OnesidedRun,
    /// PMIx (`PMIX_RANK`, `PMIX_NAMESPACE`, `PMIX_SERVER_URI*`).
    Pmix,
    /// PMI-2 over `PMI_FD` (`SLURM_MPI_TYPE=pmi2` or `PMI_VERSION=2`).
    Pmi2,
    /// PMI-1 over `PMI_FD` (MPICH Hydra).
    Pmi1Fd,
    /// PMI-1 over `PMI_PORT` + `PMI_ID`.
    Pmi1Port,
    /// No launcher: rank 0 of 1.
    Singleton,
}

/// Variable-name prefixes the decision reads.
const PREFIXES: &[&str] = &["ONESIDED_LAUNCHER_ADDR", "PMI", "SLURM_", "OMPI_"];

/// The relevant part of an environment.
pub type EnvSnapshot = BTreeMap<String, OsString>;

/// The variables of this process that [`Mechanism::detect`] reads.
pub fn snapshot() -> EnvSnapshot {
    std::env::vars_os()
        .filter_map(|(k, v)| {
            let k = k.into_string().ok()?;
            PREFIXES.iter().any(|p| k.starts_with(p)).then_some((k, v))
        })
        .collect()
}

impl Mechanism {
    /// Detects the mechanism of this process (see [`Mechanism::detect`]).
    pub fn from_env() -> Result<Mechanism> {
        Self::detect(&snapshot(), pmix_sys::AVAILABLE)
    }

    /// The mechanism for environment `env`; `pmix_built` says whether this
    /// build has PMIx support. Errors name the variables that gave the
    /// launcher away and what to do.
    pub fn detect(env: &EnvSnapshot, pmix_built: bool) -> Result<Mechanism> {
        let present = |k: &str| env.get(k).is_some_and(|v| !v.is_empty());
        let text = |k: &str| {
            env.get(k)
                .map(|v| v.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        if present("ONESIDED_LAUNCHER_ADDR") {
            return Ok(Mechanism::OnesidedRun);
        }
        let pmix_vars: Vec<&str> = env
            .iter()
            .filter(|(k, v)| {
                !v.is_empty()
                    && (k.as_str() == "PMIX_RANK"
                        || k.as_str() == "PMIX_NAMESPACE"
                        || k.starts_with("PMIX_SERVER_URI"))
            })
            .map(|(k, _)| k.as_str())
            .collect();
        if !pmix_vars.is_empty() {
            if pmix_built {
                return Ok(Mechanism::Pmix);
            }
            return Err(Error::bootstrap(
                "pmix",
                format!(
                    "this process was started by a PMIx launcher ({} set{}: srun --mpi=pmix, \
                     Open MPI's mpirun or prterun), but PMIx support not built into this \
                     program (no libpmix-dev when the pmix-sys crate was compiled). Install \
                     libpmix-dev and rebuild, or launch with srun --mpi=pmi2, mpiexec.hydra \
                     or onesided-run",
                    pmix_vars.join(", "),
                    describe_namespace(&text("PMIX_NAMESPACE")),
                ),
            ));
        }
        if present("PMI_FD") {
            let slurm_pmi2 = text("SLURM_MPI_TYPE") == "pmi2";
            let pmi_version_2 = text("PMI_VERSION").trim() == "2";
            return Ok(if slurm_pmi2 || pmi_version_2 {
                Mechanism::Pmi2
            } else {
                Mechanism::Pmi1Fd
            });
        }
        if present("PMI_PORT") {
            return Ok(Mechanism::Pmi1Port);
        }
        // No launcher we speak. Refuse to be one of several singletons.
        if let Some(n) = count(env, "SLURM_STEP_NUM_TASKS").filter(|&n| n != 1) {
            let mpi = match text("SLURM_MPI_TYPE").as_str() {
                "" => "none".to_string(),
                t => t.to_string(),
            };
            return Err(Error::bootstrap(
                "slurm",
                format!(
                    "this process is task {} of a {n}-task srun step (SLURM_STEP_NUM_TASKS={n}) \
                     started with --mpi={mpi}, which gives it no PMI onesided can use; \
                     running it as a singleton would start {n} unrelated jobs. Launch with \
                     `srun --mpi=pmix`{} or `srun --mpi=pmi2`",
                    text("SLURM_PROCID"),
                    if pmix_built {
                        ""
                    } else {
                        " (needs PMIx support built)"
                    },
                ),
            ));
        }
        for var in ["OMPI_COMM_WORLD_SIZE", "OMPI_UNIVERSE_SIZE"] {
            if let Some(n) = count(env, var).filter(|&n| n != 1) {
                return Err(Error::bootstrap(
                    "open-mpi",
                    format!(
                        "this process was started by Open MPI ({var}={n}) without a PMIx \
                         environment (no PMIX_NAMESPACE, PMIX_RANK or PMIX_SERVER_URI*); \
                         running it as a singleton would start {n} unrelated jobs. Use an \
                         Open MPI whose mpirun provides PMIx (4.x does), srun --mpi=pmix, \
                         mpiexec.hydra or onesided-run"
                    ),
                ));
            }
        }
        if let Some(n) = count(env, "PMI_SIZE").filter(|&n| n != 1) {
            return Err(Error::bootstrap(
                "pmi1",
                format!(
                    "PMI_SIZE={n} is set but neither PMI_FD nor PMI_PORT: the launcher's PMI \
                     connection did not reach this process"
                ),
            ));
        }
        Ok(Mechanism::Singleton)
    }
}

/// A count variable: `Some(n)` when present; an unparsable value counts as
/// "several" (0 never matches 1), so it is reported rather than ignored.
fn count(env: &EnvSnapshot, var: &str) -> Option<u64> {
    let v = env.get(var)?;
    Some(v.to_str().and_then(|s| s.trim().parse().ok()).unwrap_or(0))
}

fn describe_namespace(ns: &str) -> String {
    if ns.is_empty() {
        String::new()
    } else {
        format!(", namespace '{}'", super::wire::shorten(ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> EnvSnapshot {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect()
    }

    fn ok(pairs: &[(&str, &str)], built: bool) -> Mechanism {
        Mechanism::detect(&env(pairs), built).unwrap()
    }

    fn err(pairs: &[(&str, &str)], built: bool) -> String {
        Mechanism::detect(&env(pairs), built)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn each_launcher() {
        use Mechanism::*;
        assert_eq!(ok(&[], true), Singleton);
        assert_eq!(ok(&[("ONESIDED_LAUNCHER_ADDR", "/x")], true), OnesidedRun);
        // Our launcher wins over an enclosing one.
        assert_eq!(
            ok(
                &[("ONESIDED_LAUNCHER_ADDR", "/x"), ("PMIX_RANK", "0")],
                false
            ),
            OnesidedRun
        );
        let slurm_pmix = [
            ("PMIX_RANK", "1"),
            ("PMIX_NAMESPACE", "slurm.pmix.2.0"),
            ("PMIX_SERVER_URI41", "pmix-server.1;tcp4://127.0.0.1:1"),
            ("SLURM_MPI_TYPE", "pmix"),
            ("SLURM_STEP_NUM_TASKS", "4"),
        ];
        assert_eq!(ok(&slurm_pmix, true), Pmix);
        assert_eq!(ok(&[("PMIX_SERVER_URI2", "x")], true), Pmix);
        let slurm_pmi2 = [
            ("PMI_FD", "11"),
            ("PMI_RANK", "0"),
            ("PMI_SIZE", "4"),
            ("PMI_JOBID", "1.0"),
            ("SLURM_MPI_TYPE", "pmi2"),
            ("SLURM_STEP_NUM_TASKS", "4"),
        ];
        assert_eq!(ok(&slurm_pmi2, true), Pmi2);
        assert_eq!(ok(&[("PMI_FD", "3"), ("PMI_VERSION", "2")], true), Pmi2);
        let hydra = [("PMI_FD", "3"), ("PMI_RANK", "0"), ("PMI_SIZE", "4")];
        assert_eq!(ok(&hydra, true), Pmi1Fd);
        assert_eq!(ok(&[("PMI_PORT", "h:1"), ("PMI_ID", "0")], true), Pmi1Port);
        // One-task steps and size-1 Open MPI jobs are singletons indeed.
        assert_eq!(ok(&[("SLURM_STEP_NUM_TASKS", "1")], true), Singleton);
        assert_eq!(ok(&[("OMPI_COMM_WORLD_SIZE", "1")], true), Singleton);
        // A Slurm allocation (salloc/sbatch shell) is not a step.
        assert_eq!(
            ok(&[("SLURM_JOB_ID", "5"), ("SLURM_NTASKS", "8")], true),
            Singleton
        );
        // Global Open MPI tuning variables are not a launch.
        assert_eq!(ok(&[("OMPI_MCA_btl", "self,tcp")], true), Singleton);
    }

    #[test]
    fn pmix_not_built_is_an_error() {
        let e = err(
            &[("PMIX_NAMESPACE", "prterun-vm-1@1"), ("PMIX_RANK", "0")],
            false,
        );
        assert!(e.contains("PMIx support not built"), "{e}");
        assert!(
            e.contains("PMIX_NAMESPACE") && e.contains("prterun-vm-1@1"),
            "{e}"
        );
        let e = err(&[("PMIX_SERVER_URI4", "x")], false);
        assert!(e.contains("PMIX_SERVER_URI4"), "{e}");
    }

    #[test]
    fn foreign_launchers_are_errors() {
        let e = err(
            &[
                ("SLURM_STEP_NUM_TASKS", "4"),
                ("SLURM_PROCID", "2"),
                ("SLURM_STEP_ID", "0"),
            ],
            true,
        );
        assert!(
            e.contains("task 2 of a 4-task srun step") && e.contains("--mpi=none"),
            "{e}"
        );
        let e = err(
            &[
                ("SLURM_STEP_NUM_TASKS", "2"),
                ("SLURM_MPI_TYPE", "cray_shasta"),
            ],
            false,
        );
        assert!(
            e.contains("--mpi=cray_shasta") && e.contains("needs PMIx support"),
            "{e}"
        );
        let e = err(&[("OMPI_COMM_WORLD_SIZE", "4")], true);
        assert!(
            e.contains("Open MPI") && e.contains("OMPI_COMM_WORLD_SIZE=4"),
            "{e}"
        );
        let e = err(&[("PMI_SIZE", "3"), ("PMI_RANK", "1")], true);
        assert!(e.contains("PMI_SIZE=3"), "{e}");
        // Garbage counts are reported, not taken for 1.
        let e = err(&[("SLURM_STEP_NUM_TASKS", "many")], true);
        assert!(e.contains("srun step"), "{e}");
    }
}
