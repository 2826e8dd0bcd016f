//! The trace sink: events carrying kernel tracepoint names (`writeback_start`,
//! `balance_dirty_pages`, `inode_switch_wbs`...), each with its virtual time, the
//! task that emitted it and `key=value` fields as the kernel's TP_printk would.

use std::io::Write;

use crate::Time;

/// One traced event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// Virtual time, ns.
    pub time: Time,
    /// Name of the emitting task (`-` outside a task).
    pub task: String,
    /// Tracepoint name, as the kernel's.
    pub name: &'static str,
    /// Fields, formatted `key=value key=value`.
    pub fields: String,
}

impl TraceEvent {
    /// The event as one line in the style of the kernel's trace buffer.
    pub fn line(&self) -> String {
        format!(
            "{:>16} [{}.{:06}] {}: {}",
            self.task,
            self.time / 1_000_000_000,
            (self.time / 1_000) % 1_000_000,
            self.name,
            self.fields
        )
    }
}

/// Where trace events go.
pub enum TraceSink {
    /// Tracing off: events are not even formatted.
    Off,
    /// Kept in memory (tests, determinism checks).
    Memory(Vec<TraceEvent>),
    /// Written line by line.
    Writer(Box<dyn Write>),
}

impl TraceSink {
    pub(crate) fn enabled(&self) -> bool {
        !matches!(self, TraceSink::Off)
    }

    pub(crate) fn emit(&mut self, ev: TraceEvent) {
        match self {
            TraceSink::Off => {}
            TraceSink::Memory(v) => v.push(ev),
            TraceSink::Writer(w) => {
                // A trace that cannot be written is not worth aborting the run for;
                // the error surfaces when the writer is flushed at the end.
                let _ = writeln!(w, "{}", ev.line());
            }
        }
    }
}
