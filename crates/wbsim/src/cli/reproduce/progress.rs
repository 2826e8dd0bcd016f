//! Progress of `wbsim reproduce` on stderr: an indicatif bar on a terminal,
//! one plain line per finished run otherwise (CI logs, pipes).
//!
//! Lines come in completion order, which depends on thread scheduling;
//! nothing written to files does. Leaves out per-run progress (a run is
//! one step).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};

use indicatif::{ProgressBar, ProgressStyle};

/// Progress over `total` runs.
pub struct Progress {
    bar: Option<ProgressBar>,
    total: usize,
    done: AtomicUsize,
}

impl Progress {
    /// A bar if stderr is a terminal, plain lines otherwise.
    pub fn new(total: usize) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new(total as u64);
            if let Ok(style) =
                ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} runs {msg}")
            {
                b.set_style(style.progress_chars("=> "));
            }
            b
        });
        Progress {
            bar,
            total,
            done: AtomicUsize::new(0),
        }
    }

    /// One run finished: `what` names it, `outcome` is `ok (1.2 s)` or the
    /// error.
    pub fn finished(&self, what: &str, ok: bool, outcome: &str) {
        let n = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        match &self.bar {
            Some(b) => {
                if !ok {
                    b.println(format!("FAILED {what}: {outcome}"));
                }
                b.set_message(what.to_string());
                b.inc(1);
            }
            None => {
                let status = if ok { "ok" } else { "FAILED" };
                eprintln!("[{n}/{}] {what}: {status} {outcome}", self.total);
            }
        }
    }

    /// Clears the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
