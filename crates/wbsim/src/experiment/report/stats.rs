//! The little statistics the headline tables need: Welch's t-test over
//! repetitions (is the change between two variants larger than the spread
//! across seeds?), and `*` patterns over metric names.
//!
//! Welch's test is the two-sample t-test without the equal-variance
//! assumption; its two-sided p-value comes from Student's t distribution
//! (the `statrs` crate). Leaves out rank tests: with the 1-10
//! repetitions a scenario has, a Mann-Whitney U test cannot reach p < 0.05
//! below 4 runs per side, and its discreteness says little more.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// Significance level the report calls "significant".
pub const ALPHA: f64 = 0.05;

/// Whether `name` matches `pattern`, where `*` stands for any text
/// (possibly empty, dots included) and everything else is literal.
pub fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Mean and unbiased sample variance.
fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    let v = if x.len() > 1 {
        x.iter().map(|a| (a - m).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (m, v)
}

/// The outcome of comparing two samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Test {
    /// Fewer than two values on a side: no test possible.
    TooFew,
    /// Both sides have no spread: the values are either equal or not.
    Exact {
        /// Whether the two (constant) samples differ.
        differ: bool,
    },
    /// Welch's t-test.
    Welch {
        /// t statistic (b - a).
        t: f64,
        /// Welch-Satterthwaite degrees of freedom.
        df: f64,
        /// Two-sided p-value.
        p: f64,
    },
}

/// Welch's two-sided t-test of `a` against `b`.
pub fn welch(a: &[f64], b: &[f64]) -> Test {
    if a.len() < 2 || b.len() < 2 {
        return Test::TooFew;
    }
    let (ma, va) = mean_var(a);
    let (mb, vb) = mean_var(b);
    let (sa, sb) = (va / a.len() as f64, vb / b.len() as f64);
    let se2 = sa + sb;
    if se2 <= 0.0 || !se2.is_finite() {
        return Test::Exact { differ: ma != mb };
    }
    let t = (mb - ma) / se2.sqrt();
    let df = se2 * se2 / (sa * sa / (a.len() as f64 - 1.0) + sb * sb / (b.len() as f64 - 1.0));
    // Two-sided: twice the upper tail of Student's t with `df` degrees.
    let p = match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => (2.0 * dist.sf(t.abs())).clamp(0.0, 1.0),
        Err(_) => return Test::Exact { differ: ma != mb },
    };
    Test::Welch { t, df, p }
}

/// How a test reads in a table: `n too small (n=1/1)`, `p=0.003,
/// significant`, `p=0.41, not significant`, `no spread, differ`.
pub fn describe(test: Test, na: usize, nb: usize) -> String {
    match test {
        Test::TooFew => format!("n too small (n={na}/{nb})"),
        Test::Exact { differ: true } => format!("no spread over seeds, differ (n={na}/{nb})"),
        Test::Exact { differ: false } => format!("no spread over seeds, equal (n={na}/{nb})"),
        Test::Welch { p, .. } => {
            let verdict = if p < ALPHA {
                "significant"
            } else {
                "not significant"
            };
            let p_text = if p < 0.001 {
                "p<0.001".to_string()
            } else {
                format!("p={p:.3}")
            };
            format!("{p_text}, {verdict} (Welch, n={na}/{nb})")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_any_text_for_a_star() {
        assert!(glob("fio.*.write_bw", "fio.seq-write.write_bw"));
        assert!(glob(
            "fio.*dontcache*.write_bw",
            "fio.seq-write-4w-dontcache.2.write_bw"
        ));
        assert!(!glob(
            "fio.*dontcache*.write_bw",
            "fio.seq-write-buffered.write_bw"
        ));
        assert!(glob("write.bw", "write.bw"));
        assert!(!glob("write.bw", "write.bw2"));
        assert!(glob(
            "lock.xfs_agf:*.wait_total",
            "lock.xfs_agf:ag3.write.wait_total"
        ));
        assert!(!glob("a*a", "a"));
    }

    #[test]
    fn welch_matches_known_p_values() {
        // Equal variances and sizes: Welch's t equals Student's.
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [3.0, 4.0, 5.0, 6.0, 7.0];
        match welch(&a, &b) {
            Test::Welch { t, df, p } => {
                assert!((t - 2.0).abs() < 1e-12, "{t}");
                assert!((df - 8.0).abs() < 1e-9, "{df}");
                // t=2, df=8: two-sided p = 0.0805.
                assert!((p - 0.0805).abs() < 5e-4, "{p}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(welch(&[1.0], &[2.0, 3.0]), Test::TooFew);
        assert_eq!(
            welch(&[1.0, 1.0], &[2.0, 2.0]),
            Test::Exact { differ: true }
        );
        assert!(describe(Test::TooFew, 1, 1).contains("n too small"));
    }
}
