//! The experiment layer: the built-in experiments, scenario files, variants,
//! repetitions, results JSON and reports.

pub mod catalog;
pub mod metrics;
pub mod report;
pub mod results;
pub mod runner;
pub mod scenario;
pub mod validate;
