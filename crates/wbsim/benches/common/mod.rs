//! What the benchmarks share.

/// Peak resident set size of this process (`VmHWM` in /proc/self/status),
/// KiB; None where the file or the line is missing.
pub fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// "met" or "NOT met".
pub fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "NOT met"
    }
}
