//! Durations and sizes as written in scenario files.
//!
//! Not kernel code: this is the scenario language. Durations are a number and
//! a unit (`"10s"`, `"250ms"`, `"5us"`, `"1ns"`, `"1.5s"`, `"2min"`, `"1h"`),
//! returned in nanoseconds. Sizes are a number with an optional binary suffix
//! (`"4k"`, `"24g"`, `"512MiB"`, `"1.5g"`; k = 1024, so `k`, `kb`, `kib` all
//! mean 1024 bytes), returned in bytes. Both accept a decimal fraction as long
//! as the result is a whole number of nanoseconds or bytes; both reject
//! spaces, signs and unknown units with a message listing what is accepted.
//! (Scenario sizes differ from fio's on purpose: fio reads `4KiB` as 4000
//! bytes; here every spelling of k is 1024.)

/// What a duration looks like (appended to duration errors).
pub const DURATION_HINT: &str =
    "expected a number and a unit, e.g. \"10s\", \"250ms\", \"5us\", \"1ns\" (units: ns, us, ms, s, min, h)";
/// What a size looks like (appended to size errors).
pub const SIZE_HINT: &str =
    "expected a number with an optional unit, e.g. \"4k\", \"24g\", \"512MiB\" (k/m/g/t/p = powers of 1024)";

/// Nanoseconds per unit (exact by definition).
const DURATION_UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("min", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Bytes per unit (powers of 1024, case-insensitive).
const SIZE_UNITS: &[(&str, u64)] = &[
    ("", 1),
    ("b", 1),
    ("k", 1 << 10),
    ("kb", 1 << 10),
    ("kib", 1 << 10),
    ("m", 1 << 20),
    ("mb", 1 << 20),
    ("mib", 1 << 20),
    ("g", 1 << 30),
    ("gb", 1 << 30),
    ("gib", 1 << 30),
    ("t", 1 << 40),
    ("tb", 1 << 40),
    ("tib", 1 << 40),
    ("p", 1 << 50),
    ("pb", 1 << 50),
    ("pib", 1 << 50),
];

/// A decimal number split into integer digits and fraction digits.
struct Decimal<'a> {
    int: &'a str,
    frac: &'a str,
}

/// Splits `s` into a leading unsigned decimal number and the rest.
fn split_number(s: &str) -> Option<(Decimal<'_>, &str)> {
    let int_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (int, rest) = s.split_at(int_end);
    let (frac, rest) = match rest.strip_prefix('.') {
        Some(r) => {
            let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            r.split_at(end)
        }
        None => ("", rest),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    Some((Decimal { int, frac }, rest))
}

/// `number * mult`, exactly, if it is a whole number that fits in u64.
fn scale(d: &Decimal<'_>, mult: u64) -> Result<u64, &'static str> {
    if d.int.len() + d.frac.len() > 30 {
        return Err("number too large");
    }
    let digits: String = format!("{}{}", d.int, d.frac);
    let whole: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| "number too large")?
    };
    let den: u128 = 10u128.pow(u32::try_from(d.frac.len()).unwrap_or(u32::MAX).min(30));
    let num = whole
        .checked_mul(u128::from(mult))
        .ok_or("number too large")?;
    if !num.is_multiple_of(den) {
        return Err("not a whole number after applying the unit");
    }
    u64::try_from(num / den).map_err(|_| "number too large")
}

/// Parses a duration such as `"10s"` or `"250ms"` into nanoseconds.
/// `"0"` alone is accepted; any other number needs a unit.
pub fn parse_duration(raw: &str) -> Result<u64, String> {
    let bad = |why: &str| format!("invalid duration \"{raw}\": {why}; {DURATION_HINT}");
    if raw.is_empty() {
        return Err(bad("empty"));
    }
    if raw.chars().any(char::is_whitespace) {
        return Err(bad("spaces are not allowed"));
    }
    let Some((num, unit)) = split_number(raw) else {
        return Err(bad("it must start with a number"));
    };
    if unit.is_empty() {
        if num.int.bytes().all(|b| b == b'0') && num.frac.bytes().all(|b| b == b'0') {
            return Ok(0);
        }
        return Err(bad("missing unit"));
    }
    let Some(&(_, mult)) = DURATION_UNITS.iter().find(|(u, _)| *u == unit) else {
        return Err(bad(&format!("unknown unit '{unit}'")));
    };
    scale(&num, mult).map_err(bad)
}

/// Parses a size such as `"4k"`, `"24g"` or `"512MiB"` into bytes.
pub fn parse_size(raw: &str) -> Result<u64, String> {
    let bad = |why: &str| format!("invalid size \"{raw}\": {why}; {SIZE_HINT}");
    if raw.is_empty() {
        return Err(bad("empty"));
    }
    if raw.chars().any(char::is_whitespace) {
        return Err(bad("spaces are not allowed"));
    }
    let Some((num, unit)) = split_number(raw) else {
        return Err(bad("it must start with a number"));
    };
    let lower = unit.to_ascii_lowercase();
    let Some(&(_, mult)) = SIZE_UNITS.iter().find(|(u, _)| *u == lower) else {
        return Err(bad(&format!("unknown unit '{unit}'")));
    };
    scale(&num, mult).map_err(bad)
}

/// Parses a bandwidth: a size per second, written `"2g"` or `"2g/s"`.
pub fn parse_bandwidth(raw: &str) -> Result<u64, String> {
    parse_size(raw.strip_suffix("/s").unwrap_or(raw))
        .map_err(|e| format!("{e} (a bandwidth is a size per second, e.g. \"2g/s\")"))
}

/// Formats nanoseconds with the largest unit that keeps it exact
/// (`250_000_000` -> `"250ms"`), for messages and reports.
pub fn format_duration(ns: u64) -> String {
    if ns == 0 {
        return "0s".to_string();
    }
    for (unit, mult) in [
        ("h", 3_600_000_000_000u64),
        ("min", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if ns.is_multiple_of(mult) {
            return format!("{}{unit}", ns / mult);
        }
    }
    format!("{ns}ns")
}

/// Formats bytes with the largest binary unit that keeps it exact
/// (`4096` -> `"4k"`), for messages and reports.
pub fn format_size(bytes: u64) -> String {
    if bytes == 0 {
        return "0".to_string();
    }
    for (unit, shift) in [("p", 50), ("t", 40), ("g", 30), ("m", 20), ("k", 10)] {
        if bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let ok: &[(&str, u64)] = &[
            ("10s", 10_000_000_000),
            ("250ms", 250_000_000),
            ("5us", 5_000),
            ("5µs", 5_000),
            ("1ns", 1),
            ("1.5s", 1_500_000_000),
            (".5ms", 500_000),
            ("2min", 120_000_000_000),
            ("1h", 3_600_000_000_000),
            ("0", 0),
            ("0s", 0),
        ];
        for (s, want) in ok {
            assert_eq!(parse_duration(s), Ok(*want), "{s}");
        }
        let bad: &[(&str, &str)] = &[
            ("10 sec", "spaces are not allowed"),
            ("10sec", "unknown unit 'sec'"),
            ("10", "missing unit"),
            ("", "empty"),
            ("s", "must start with a number"),
            ("-1s", "must start with a number"),
            ("1.5ns", "not a whole number"),
            ("99999999999999999999h", "too large"),
            ("10m", "unknown unit 'm'"),
        ];
        for (s, want) in bad {
            let e = parse_duration(s).unwrap_err();
            assert!(e.contains(want), "{s}: {e}");
            assert!(e.contains("units: ns, us, ms, s, min, h"), "{e}");
        }
    }

    #[test]
    fn sizes() {
        let ok: &[(&str, u64)] = &[
            ("4k", 4096),
            ("4K", 4096),
            ("4KiB", 4096),
            ("4kb", 4096),
            ("24g", 24 << 30),
            ("512MiB", 512 << 20),
            ("1.5g", 3 << 29),
            ("100", 100),
            ("100b", 100),
            ("1t", 1 << 40),
            ("0", 0),
        ];
        for (s, want) in ok {
            assert_eq!(parse_size(s), Ok(*want), "{s}");
        }
        let bad: &[(&str, &str)] = &[
            ("4 k", "spaces"),
            ("4x", "unknown unit 'x'"),
            ("k", "must start with a number"),
            ("0.3k", "not a whole number"),
            ("99999999999p", "too large"),
        ];
        for (s, want) in bad {
            let e = parse_size(s).unwrap_err();
            assert!(e.contains(want), "{s}: {e}");
        }
        assert_eq!(parse_bandwidth("2g/s"), Ok(2 << 30));
        assert_eq!(parse_bandwidth("2g"), Ok(2 << 30));
    }

    #[test]
    fn formatting_round_trips() {
        for ns in [
            0,
            1,
            999,
            5_000,
            250_000_000,
            10_000_000_000,
            120_000_000_000,
        ] {
            assert_eq!(parse_duration(&format_duration(ns)), Ok(ns));
        }
        for b in [0, 1, 4096, 512 << 20, 24 << 30, 4097] {
            assert_eq!(parse_size(&format_size(b)), Ok(b));
        }
        assert_eq!(format_duration(250_000_000), "250ms");
        assert_eq!(format_size(4096), "4k");
    }
}
