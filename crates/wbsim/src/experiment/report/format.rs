//! Number and text formatting shared by the Markdown and HTML writers:
//! numbers to a few significant digits, "n/a" for what is missing, and
//! escaping for Markdown tables and HTML.
//!
//! Leaves out locale-aware formatting: reports always use `.` and no
//! thousands separator, so they are byte-identical everywhere.

/// What a missing or non-finite figure is shown as.
pub const NA: &str = "n/a";

/// `v` to about four significant digits (`67.60`, `0.02455`, `1234`);
/// [`NA`] for None or a non-finite value.
pub fn num(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => {
            let a = v.abs();
            let decimals = if a == 0.0 || a >= 1000.0 {
                0
            } else {
                // Digits after the point for 4 significant digits.
                (3 - a.log10().floor() as i32).clamp(0, 9) as usize
            };
            let s = format!("{v:.decimals$}");
            if s == "-0" {
                "0".to_string()
            } else {
                s
            }
        }
        _ => NA.to_string(),
    }
}

/// A ratio (`0.93x`), or [`NA`].
pub fn ratio(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{}x", num(Some(v))),
        _ => NA.to_string(),
    }
}

/// `a / b` when both are finite and `b` is not zero.
pub fn divide(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a.is_finite() && b.is_finite() && b != 0.0 => Some(a / b),
        _ => None,
    }
}

/// Text safe inside a Markdown table cell (pipes escaped, newlines folded).
pub fn md(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// Text safe inside HTML element content and attribute values.
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A simulated figure within this factor of the published one (either
/// way) is "within 1.5x"; outside it the report says so and colours it.
pub const TOLERANCE: f64 = 1.5;

/// Text of a ratio simulated / published with its verdict:
/// `1.04x (within 1.5x)` or `1.88x (outside 1.5x)`; n/a when missing.
pub fn verdict(ratio: Option<f64>) -> String {
    match ratio {
        Some(r) if r.is_finite() && r > 0.0 => {
            let within = (1.0 / TOLERANCE..=TOLERANCE).contains(&r);
            format!(
                "{}x ({} {TOLERANCE}x)",
                num(Some(r)),
                if within { "within" } else { "outside" }
            )
        }
        Some(r) if r.is_finite() => format!("{}x (outside {TOLERANCE}x)", num(Some(r))),
        _ => NA.to_string(),
    }
}

/// Whether a ratio is within [`TOLERANCE`].
pub fn within(r: f64) -> bool {
    r.is_finite() && (1.0 / TOLERANCE..=TOLERANCE).contains(&r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_four_significant_digits() {
        assert_eq!(num(Some(67.6)), "67.60");
        assert_eq!(num(Some(0.02455)), "0.02455");
        assert_eq!(num(Some(0.003194)), "0.003194");
        assert_eq!(num(Some(1234.56)), "1235");
        assert_eq!(num(Some(0.0)), "0");
        assert_eq!(num(Some(f64::NAN)), NA);
        assert_eq!(num(None), NA);
        assert_eq!(ratio(divide(Some(7.9), Some(7.9))), "1.000x");
        assert_eq!(divide(Some(1.0), Some(0.0)), None);
        assert_eq!(html("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
        assert_eq!(md("a|b"), "a\\|b");
    }
}
