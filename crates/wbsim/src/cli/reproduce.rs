//! `wbsim reproduce`: run every built-in experiment, say which are still to come.

use clap::Args as ClapArgs;

use crate::experiment::catalog::{self, EXPERIMENTS};

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Shortened runs (for tests and a first look).
    #[arg(long)]
    pub quick: bool,
    /// Only this experiment (id like `lazy-umount` or code like `E3`); repeatable.
    #[arg(long = "only", value_name = "ID")]
    pub only: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    for name in &args.only {
        if catalog::find(name).is_none() {
            let known: Vec<_> = EXPERIMENTS.iter().map(|e| e.id).collect();
            anyhow::bail!(
                "--only {name}: no such experiment (known: {})",
                known.join(", ")
            );
        }
    }
    let selected: Vec<_> = EXPERIMENTS
        .iter()
        .filter(|e| {
            args.only.is_empty()
                || args
                    .only
                    .iter()
                    .any(|n| catalog::find(n).is_some_and(|f| f.id == e.id))
        })
        .collect();
    println!(
        "wbsim reproduce{}",
        if args.quick { " --quick" } else { "" }
    );
    let mut ran = 0;
    for e in &selected {
        match e.scenario {
            Some(_) => {
                ran += 1;
                println!("{} {:<24} runs (switch {})", e.code, e.id, e.switch);
            }
            None => println!(
                "{} {:<24} still to come: no built-in scenario yet (comes with {})",
                e.code, e.id, e.comes_with
            ),
        }
    }
    println!(
        "{ran} of {} experiment(s) have a built-in scenario in this build.",
        selected.len()
    );
    Ok(0)
}
