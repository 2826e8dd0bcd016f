//! The modelled kernel, laid out like `linux/`.

pub mod kernel;
