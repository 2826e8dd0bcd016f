//! wbsim: an executable model of the Linux writeback and mount-teardown
//! machinery. See DESIGN.md for the layers; `model` mirrors `linux/`.

pub mod model;
