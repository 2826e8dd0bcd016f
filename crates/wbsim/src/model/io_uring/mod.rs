//! io_uring (`io_uring/`): a ring per task, the nonblocking first attempt
//! and the punt of blocking requests to io-wq workers. Only what fio's
//! io_uring engine needs for buffered and O_DIRECT writes is modelled; see
//! each file's doc for what is left out.

pub mod io_wq;
pub mod rw;
