//! The command line: `wbsim reproduce | run | check | ...`. Each subcommand is a
//! thin layer over the experiment layer.

pub mod check;
pub mod compare;
pub mod fio_output;
pub mod fio_run;
pub mod live_tables;
pub mod probe;
pub mod report;
pub mod reproduce;
pub mod run;

use clap::{Parser, Subcommand};

/// wbsim: an executable model of Linux writeback and mount teardown.
#[derive(Parser, Debug)]
#[command(name = "wbsim", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run every built-in experiment (every variant) and write the report.
    Reproduce(reproduce::Args),
    /// Run a scenario's variants, or a fio job file, and write results JSON.
    Run(run::Args),
    /// Validate a scenario without running it.
    Check(check::Args),
    /// Regenerate report.md and index.html from results files.
    Report(report::Args),
    /// Run an experiment on the live kernel (Linux, root): umount, dontcache, buffered-write, uring, pressure, wakeup, parallel-write.
    Probe(probe::Args),
    /// Compare two results files metric by metric (B/A ratios, >2x flagged).
    Compare(compare::Args),
    /// Regenerate (or --check) the READMEs' live tables from docs/probe/*.json.
    LiveTables(live_tables::Args),
}

/// Runs the CLI; returns the process exit code.
pub fn main_with(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Reproduce(a) => reproduce::run(a),
        Command::Run(a) => run::run(a),
        Command::Check(a) => check::run(a),
        Command::Report(a) => report::run(a),
        Command::Probe(a) => probe::run(a),
        Command::Compare(a) => compare::run(a),
        Command::LiveTables(a) => live_tables::run(a),
    }
}
