//! fio's value syntax: sizes, times, booleans and integers.
//!
//! Mirrors fio's `parse.c` (`str_to_decimal()`, `get_mult_bytes()`,
//! `get_mult_time()`, `check_int()`) as documented in fio's HOWTO ("Parameter
//! types", `kb_base`), for the default `kb_base=1024`:
//!
//! - sizes: plain numbers are bytes; `k`/`kb`, `m`/`mb`, `g`/`gb`, `t`/`tb`,
//!   `p`/`pb` are powers of 1024; the IEC spellings `ki`/`kib`, `mi`/`mib`, ...
//!   are powers of **1000** (fio's "compatibility mode": with `kb_base=1024` the
//!   prefixes are the opposite of SI/IEC, so `4KiB` is 4000 bytes and `4k` is
//!   4096). A trailing `b` alone means bytes. Not case sensitive. `0x` hex
//!   without suffix is accepted as fio does.
//! - times: default unit seconds (for `runtime`, `ramp_time`, `startdelay`);
//!   suffixes `us`/`usec`, `ms`/`msec`, `s`/`sec`, `m`, `h`, `d`, not case
//!   sensitive. Values are returned in nanoseconds.
//! - booleans: `0` or `1` (fio's `check_int()`; `true`/`false` are not accepted
//!   by fio, so they are rejected here too).
//!
//! Stricter than fio where fio silently misreads input: fio truncates `1.5g` to
//! 1 byte and reads an unknown time suffix such as `10min` as microseconds;
//! both are errors here. Percent sizes (`size=50%`), `kb_base=1000` and
//! arithmetic expressions (`(1+2)k`) are not supported.

/// Nanoseconds per microsecond, millisecond, second (exact by definition).
const NS_PER_US: u64 = 1_000;
const NS_PER_MS: u64 = 1_000_000;
const NS_PER_S: u64 = 1_000_000_000;

/// Hint appended to size errors.
pub const SIZE_HINT: &str = "expected a size like 4k or 1m (k/m/g/t = powers of 1024)";
/// Hint appended to time errors.
pub const TIME_HINT: &str = "expected a time like 30 (seconds), 500ms, 10s, 2m or 1h";

/// Splits `s` into its leading decimal digits and the rest.
fn split_digits(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s.split_at(end)
}

/// Parses a byte quantity the way fio does with the default `kb_base=1024`.
///
/// Returns the value in bytes, or a reason (without the hint) on error.
pub fn parse_size(raw: &str) -> Result<u64, String> {
    let s = raw.trim();
    if s.is_empty() {
        return Err("empty value".to_string());
    }
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).map_err(|_| "bad hexadecimal number".to_string());
    }
    if s.contains('%') {
        return Err("percentages are not supported".to_string());
    }
    let (digits, suffix) = split_digits(s);
    if digits.is_empty() {
        return Err("not a number".to_string());
    }
    if suffix.starts_with('.') {
        return Err("decimal point not allowed (fio would truncate it)".to_string());
    }
    if suffix.contains('-') || suffix.contains(':') {
        return Err("ranges are not supported".to_string());
    }
    let n: u64 = digits.parse().map_err(|_| "number too large".to_string())?;
    let suffix_lc = suffix.trim().to_ascii_lowercase();
    let (base, pow): (u64, u32) = match suffix_lc.as_str() {
        "" | "b" => (1024, 0),
        "k" | "kb" => (1024, 1),
        "m" | "mb" => (1024, 2),
        "g" | "gb" => (1024, 3),
        "t" | "tb" => (1024, 4),
        "p" | "pb" => (1024, 5),
        // kb_base=1024 compatibility mode: IEC prefixes mean powers of 10.
        "ki" | "kib" => (1000, 1),
        "mi" | "mib" => (1000, 2),
        "gi" | "gib" => (1000, 3),
        "ti" | "tib" => (1000, 4),
        "pi" | "pib" => (1000, 5),
        _ => return Err(format!("unknown size suffix '{suffix}'")),
    };
    base.checked_pow(pow)
        .and_then(|m| n.checked_mul(m))
        .ok_or_else(|| "value too large".to_string())
}

/// Parses a time whose default unit is seconds; returns nanoseconds.
pub fn parse_time_secs_default_ns(raw: &str) -> Result<u64, String> {
    let s = raw.trim();
    if s.is_empty() {
        return Err("empty value".to_string());
    }
    let (digits, suffix) = split_digits(s);
    if digits.is_empty() {
        return Err("not a number".to_string());
    }
    if suffix.starts_with('.') {
        return Err("decimal point not allowed (fio would truncate it)".to_string());
    }
    if suffix.contains('-') || suffix.contains(':') {
        return Err("ranges are not supported".to_string());
    }
    let n: u64 = digits.parse().map_err(|_| "number too large".to_string())?;
    let suffix_lc = suffix.trim().to_ascii_lowercase();
    let mult = match suffix_lc.as_str() {
        "" | "s" | "sec" => NS_PER_S,
        "ms" | "msec" => NS_PER_MS,
        "us" | "usec" => NS_PER_US,
        "m" => 60 * NS_PER_S,
        "h" => 3600 * NS_PER_S,
        "d" => 86_400 * NS_PER_S,
        _ => {
            return Err(format!(
                "unknown time suffix '{suffix}' (fio knows us, ms, s, m, h, d; \
                 it would read '{suffix}' as microseconds)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| "value too large".to_string())
}

/// Parses a fio boolean: `0` or `1`.
pub fn parse_bool(raw: &str) -> Result<bool, String> {
    match raw.trim() {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err("expected 0 or 1".to_string()),
    }
}

/// Parses a fio integer option (`FIO_OPT_INT`): fio runs these through the same
/// size parser, so `1k` is 1024; the result must lie in `min..=max`.
pub fn parse_int(raw: &str, min: u64, max: u64) -> Result<u64, String> {
    let v = parse_size(raw)?;
    if v < min || v > max {
        return Err(format!("out of range {min}..={max}"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_kb_base_1024() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4096b"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("4KB"), Ok(4096));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("1024k"), Ok(1 << 20));
        assert_eq!(parse_size("10G"), Ok(10 << 30));
        assert_eq!(parse_size("1t"), Ok(1 << 40));
        // HOWTO, kb_base=1024: 1mi = 1 MB = 1000000; 1ti = 1000000000000.
        assert_eq!(parse_size("1mi"), Ok(1_000_000));
        assert_eq!(parse_size("4KiB"), Ok(4000));
        assert_eq!(parse_size("1000ki"), Ok(1_000_000));
        assert_eq!(parse_size("1ti"), Ok(1_000_000_000_000));
        assert_eq!(parse_size("0x1000"), Ok(4096));
    }

    #[test]
    fn sizes_reject_garbage() {
        assert!(parse_size("fast").is_err());
        assert!(parse_size("1.5g").unwrap_err().contains("decimal"));
        assert!(parse_size("50%").unwrap_err().contains("percent"));
        assert!(parse_size("4x").unwrap_err().contains("suffix"));
        assert!(parse_size("4k-8k").unwrap_err().contains("range"));
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999p").is_err());
    }

    #[test]
    fn times_default_to_seconds() {
        assert_eq!(parse_time_secs_default_ns("30"), Ok(30 * NS_PER_S));
        assert_eq!(parse_time_secs_default_ns("30s"), Ok(30 * NS_PER_S));
        assert_eq!(parse_time_secs_default_ns("30sec"), Ok(30 * NS_PER_S));
        assert_eq!(parse_time_secs_default_ns("500ms"), Ok(500 * NS_PER_MS));
        assert_eq!(parse_time_secs_default_ns("500MSEC"), Ok(500 * NS_PER_MS));
        assert_eq!(parse_time_secs_default_ns("250us"), Ok(250 * NS_PER_US));
        assert_eq!(parse_time_secs_default_ns("250usec"), Ok(250 * NS_PER_US));
        assert_eq!(parse_time_secs_default_ns("2m"), Ok(120 * NS_PER_S));
        assert_eq!(parse_time_secs_default_ns("1h"), Ok(3600 * NS_PER_S));
        assert_eq!(parse_time_secs_default_ns("1d"), Ok(86_400 * NS_PER_S));
        assert!(parse_time_secs_default_ns("10min")
            .unwrap_err()
            .contains("microseconds"));
        assert!(parse_time_secs_default_ns("1.5s").is_err());
        assert!(parse_time_secs_default_ns("5-10").is_err());
    }

    #[test]
    fn bools_and_ints() {
        assert_eq!(parse_bool("1"), Ok(true));
        assert_eq!(parse_bool("0"), Ok(false));
        assert!(parse_bool("true").is_err());
        assert!(parse_bool("2").is_err());
        assert_eq!(parse_int("32", 1, 100), Ok(32));
        assert_eq!(parse_int("1k", 1, 65536), Ok(1024));
        assert!(parse_int("0", 1, 100).is_err());
        assert!(parse_int("101", 0, 100).is_err());
    }
}
