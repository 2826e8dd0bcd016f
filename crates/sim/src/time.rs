//! Virtual time: nanoseconds since the start of the run, as `u64`
//! (enough for 584 years of simulated time).

/// A point in (or span of) virtual time, in nanoseconds.
pub type Time = u64;

/// One nanosecond.
pub const NSEC: Time = 1;
/// One microsecond, in ns.
pub const USEC: Time = 1_000;
/// One millisecond, in ns.
pub const MSEC: Time = 1_000_000;
/// One second, in ns.
pub const SEC: Time = 1_000_000_000;

/// Formats a time in the most readable unit (`1.500ms`, `42us`, `3.000s`).
pub fn fmt_ns(t: Time) -> String {
    if t >= SEC {
        format!("{:.3}s", t as f64 / SEC as f64)
    } else if t >= MSEC {
        format!("{:.3}ms", t as f64 / MSEC as f64)
    } else if t >= USEC {
        format!("{:.3}us", t as f64 / USEC as f64)
    } else {
        format!("{t}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_units() {
        assert_eq!(fmt_ns(1_500_000), "1.500ms");
        assert_eq!(fmt_ns(999), "999ns");
        assert_eq!(fmt_ns(3 * SEC), "3.000s");
        assert_eq!(fmt_ns(42 * USEC), "42.000us");
    }
}
