//! Block sizes and random offsets that vary per I/O: fio's `bsrange=`,
//! `bssplit=` and `random_distribution=`.
//!
//! Models fio, not the kernel: `io_u.c` `get_next_buflen()` (a size drawn
//! per I/O: from `bssplit`'s weighted list, else uniform in `bsrange` rounded
//! up to a multiple of the smallest size) and `io_u.c` `get_off_rand()` with
//! `lib/zipf.c` (zipf, pareto), `lib/gauss.c` (normal) and `zoned` (a zone
//! picked by its access share, then a uniform offset in it). Values come from
//! the clone's seeded RNG.
//!
//! Simplified: fio scatters zipf/pareto ranks over the file with a hash so
//! the hot blocks are not adjacent; here rank r is block r (hot blocks at the
//! start of the file). The page cache and writeback see the same number of
//! distinct hot blocks; only their placement differs.

use rand::Rng;
use rand_distr::{Distribution, Normal, Zipf};
use serde::{Deserialize, Serialize};

/// fio's `random_distribution=`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RandomDistribution {
    /// `random` (default): uniform.
    Random,
    /// `zipf:theta` (theta > 0, != 1 in fio; any > 0 here).
    Zipf(f64),
    /// `pareto:h` (0 < h < 1).
    Pareto(f64),
    /// `normal:dev` (dev = standard deviation, percent of the range;
    /// fio's gauss).
    Normal(f64),
    /// `zoned:a/s:a/s...` (a = percent of accesses, s = percent of the file,
    /// each list summing to 100).
    Zoned(Vec<(f64, f64)>),
}

impl RandomDistribution {
    /// Parses fio's spelling.
    pub fn from_fio(v: &str) -> Result<Self, String> {
        let (name, arg) = v.split_once(':').unwrap_or((v, ""));
        let num = |s: &str| -> Result<f64, String> {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| format!("'{s}' is not a number"))
        };
        match name {
            "random" => Ok(Self::Random),
            "zipf" => {
                let t = num(arg.split(':').next().unwrap_or(""))?;
                if t <= 0.0 {
                    return Err("zipf theta must be > 0".into());
                }
                Ok(Self::Zipf(t))
            }
            "pareto" => {
                let h = num(arg.split(':').next().unwrap_or(""))?;
                if !(h > 0.0 && h < 1.0) {
                    return Err("pareto h must be in (0, 1)".into());
                }
                Ok(Self::Pareto(h))
            }
            "normal" | "gauss" => {
                let d = num(arg.split(':').next().unwrap_or(""))?;
                if !(d > 0.0 && d <= 100.0) {
                    return Err("normal deviation must be in (0, 100] percent".into());
                }
                Ok(Self::Normal(d))
            }
            "zoned" => {
                let mut zones = Vec::new();
                let mut open_size = None;
                for z in arg.split(':').filter(|z| !z.is_empty()) {
                    let (a, s) = z
                        .split_once('/')
                        .ok_or_else(|| format!("zone '{z}' must be access%/size%"))?;
                    if s.trim().is_empty() {
                        // fio: a zone without a size takes what is left.
                        if open_size.replace(zones.len()).is_some() {
                            return Err("at most one zone may leave its size out".into());
                        }
                        zones.push((num(a)?, 0.0));
                    } else {
                        zones.push((num(a)?, num(s)?));
                    }
                }
                if let Some(i) = open_size {
                    let given: f64 = zones.iter().map(|z| z.1).sum();
                    zones[i].1 = 100.0 - given;
                }
                let (sa, ss) = zones
                    .iter()
                    .fold((0.0, 0.0), |(x, y), (a, s)| (x + a, y + s));
                if zones.is_empty() || (sa - 100.0).abs() > 1e-9 || (ss - 100.0).abs() > 1e-9 {
                    return Err(
                        "zoned needs access%/size% pairs, each column summing to 100".into(),
                    );
                }
                Ok(Self::Zoned(zones))
            }
            _ => Err(
                "expected random, zipf:THETA, pareto:H, normal:DEV or zoned:A/S:A/S...".to_string(),
            ),
        }
    }

    /// A block index in `0..slots`.
    pub fn pick(&self, slots: u64, rng: &mut impl Rng) -> u64 {
        let slots = slots.max(1);
        let last = slots - 1;
        match self {
            Self::Random => rng.random_range(0..slots),
            Self::Zipf(theta) => match Zipf::new(slots as f64, *theta) {
                Ok(z) => (z.sample(rng) as u64).saturating_sub(1).min(last),
                Err(_) => 0,
            },
            Self::Pareto(h) => {
                // lib/zipf.c pareto_next(): n = (nranges - 1) * rand^pow,
                // pow = log(h) / log(1 - h).
                let pow = h.ln() / (1.0 - h).ln();
                let r: f64 = rng.random();
                ((last as f64) * r.powf(pow)) as u64
            }
            Self::Normal(dev) => {
                let mean = last as f64 / 2.0;
                let sd = (slots as f64) * dev / 100.0;
                match Normal::new(mean, sd) {
                    Ok(n) => n.sample(rng).round().clamp(0.0, last as f64) as u64,
                    Err(_) => slots / 2,
                }
            }
            Self::Zoned(zones) => {
                let x: f64 = rng.random_range(0.0..100.0);
                let mut acc_a = 0.0;
                let mut start = 0.0;
                for (i, (a, s)) in zones.iter().enumerate() {
                    acc_a += a;
                    if x < acc_a || i + 1 == zones.len() {
                        let lo = (start / 100.0 * slots as f64) as u64;
                        let hi = (((start + s) / 100.0) * slots as f64) as u64;
                        let hi = hi.clamp(lo + 1, slots);
                        return rng.random_range(lo.min(last)..hi);
                    }
                    start += s;
                }
                rng.random_range(0..slots)
            }
        }
    }
}

/// A per-I/O block size choice for one direction: `bssplit` entries, or a
/// `bsrange`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BlockSizes {
    /// `bsrange=min-max`: uniform, rounded up to a multiple of `min`.
    Range(u64, u64),
    /// `bssplit=size/pct:...`: (bytes, percent); a 0 percent entry shares the
    /// percentage left over, as fio does.
    Split(Vec<(u64, u32)>),
}

impl BlockSizes {
    /// One block size.
    pub fn pick(&self, rng: &mut impl Rng) -> u64 {
        match self {
            Self::Range(lo, hi) => {
                if hi <= lo {
                    return *lo;
                }
                let b = rng.random_range(*lo..=*hi);
                b.div_ceil(*lo).saturating_mul(*lo).min(*hi).max(*lo)
            }
            Self::Split(list) => {
                let x = rng.random_range(0..100u32);
                let mut acc = 0;
                for (bs, pct) in list {
                    acc += pct;
                    if x < acc {
                        return *bs;
                    }
                }
                list.last().map_or(4096, |(b, _)| *b)
            }
        }
    }

    /// The mean block size (for `rate_iops`).
    pub fn mean(&self) -> u64 {
        match self {
            Self::Range(lo, hi) => (lo + hi) / 2,
            Self::Split(list) => list.iter().map(|(b, p)| b * u64::from(*p)).sum::<u64>() / 100,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn zipf_is_skewed_to_low_ranks() {
        let d = RandomDistribution::from_fio("zipf:1.2").unwrap();
        let mut rng = sim::SimRng::seed_from_u64(1);
        let hits = (0..10_000).filter(|_| d.pick(1000, &mut rng) < 10).count();
        // Uniform would put 1% in the first 10 of 1000 blocks.
        assert!(hits > 3000, "{hits}");
    }

    #[test]
    fn zoned_respects_shares() {
        let d = RandomDistribution::from_fio("zoned:90/10:10/90").unwrap();
        let mut rng = sim::SimRng::seed_from_u64(2);
        let hot = (0..10_000).filter(|_| d.pick(1000, &mut rng) < 100).count();
        assert!((8500..9500).contains(&hot), "{hot}");
        assert!(RandomDistribution::from_fio("zoned:50/10:40/90").is_err());
    }

    #[test]
    fn bssplit_and_bsrange() {
        let mut rng = sim::SimRng::seed_from_u64(3);
        let s = BlockSizes::Split(vec![(4096, 75), (65536, 25)]);
        let big = (0..10_000).filter(|_| s.pick(&mut rng) == 65536).count();
        assert!((2200..2800).contains(&big), "{big}");
        let r = BlockSizes::Range(4096, 16384);
        for _ in 0..1000 {
            let b = r.pick(&mut rng);
            assert!(b.is_multiple_of(4096) && (4096..=16384).contains(&b), "{b}");
        }
    }
}
