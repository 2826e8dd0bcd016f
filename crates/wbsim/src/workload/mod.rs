//! Workloads: what the simulated user space does.
//!
//! - [`fio`]: fio job files (fio's ini syntax, as parsed by fio's `init.c`
//!   `parse_jobs_ini()` and `parse.c`), resolved into typed jobs, plus fio's JSON
//!   output shape (`stat.c` `show_thread_status_json()`) so fio tooling reads
//!   wbsim results. Parsing and validation only: the simulated I/O loop that runs
//!   a job lives elsewhere.
//!
//! The kernel paths these workloads drive are `pwrite(2)`/`pwritev2(2)` with
//! `RWF_DONTCACHE` (`mm/filemap.c`), `fsync(2)` and `O_DIRECT`; this module only
//! describes them.

pub mod actor;
pub mod actor_exec;
pub mod fio;
pub mod fio_exec;
pub mod world;
