//! The little statistics the headline tables need: Welch's t-test over
//! repetitions (is the change between two variants larger than the spread
//! across seeds?), and `*` patterns over metric names.
//!
//! Welch's test is the two-sample t-test without the equal-variance
//! assumption; its two-sided p-value comes from Student's t distribution
//! through the regularized incomplete beta function (Lentz's continued
//! fraction, Lanczos' log-gamma). Leaves out rank tests: with the 1-10
//! repetitions a scenario has, a Mann-Whitney U test cannot reach p < 0.05
//! below 4 runs per side, and its discreteness says little more.

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
    let p = betai(df / 2.0, 0.5, df / (df + t * t)).clamp(0.0, 1.0);
    Test::Welch { t, df, p }
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut s = G[0];
    for (i, g) in G.iter().enumerate().skip(1) {
        s += g / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + s.ln()
}

/// Regularized incomplete beta I_x(a, b).
fn betai(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * betacf(a, b, x) / a
    } else {
        1.0 - front * betacf(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of the incomplete beta (modified Lentz).
fn betacf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-12 {
            break;
        }
    }
    h
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
        // Two-sided p of t with df: t=2.228, df=10 -> 0.05 (t table).
        let p = betai(5.0, 0.5, 10.0 / (10.0 + 2.228f64.powi(2)));
        assert!((p - 0.05).abs() < 1e-3, "{p}");
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
