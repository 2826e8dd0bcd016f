//! Sets of integer ranges (pages of a file, blocks of a device), kept as
//! disjoint, non-adjacent `[start, end)` intervals in a B-tree: the model's
//! stand-in for the kernel's interval trees and extent status trees
//! (lib/interval_tree.c, fs/ext4/extents_status.c), without their locking.

use std::collections::BTreeMap;

/// A set of ranges `[start, end)` of pages or blocks, disjoint and not
/// adjacent.
#[derive(Clone, Debug, Default)]
pub struct IntervalSet {
    ranges: BTreeMap<u64, u64>,
}

impl IntervalSet {
    /// Ranges overlapping or touching `[start, end)`, in order.
    pub fn touching(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        self.touching_iter(start, end).collect()
    }

    /// [`IntervalSet::touching`] without collecting: the one range that
    /// starts before `start` and reaches it (ranges are disjoint and not
    /// adjacent, so there is at most one), then every range starting in
    /// `[start, end]`.
    pub fn touching_iter(&self, start: u64, end: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let first = self
            .ranges
            .range(..start)
            .next_back()
            .filter(|&(_, &re)| re >= start)
            .map_or(start, |(&rs, _)| rs);
        (first <= end)
            .then(|| self.ranges.range(first..=end))
            .into_iter()
            .flatten()
            .map(|(&s, &e)| (s, e))
    }

    /// The end of the range holding page `p`, if one does.
    pub fn covering_end(&self, p: u64) -> Option<u64> {
        self.ranges
            .range(..=p)
            .next_back()
            .filter(|&(_, &re)| re > p)
            .map(|(_, &re)| re)
    }

    /// Adds `[start, end)`, merging with neighbours.
    pub fn insert(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let (mut s, mut e) = (start, end);
        for (rs, re) in self.touching(start, end) {
            self.ranges.remove(&rs);
            s = s.min(rs);
            e = e.max(re);
        }
        self.ranges.insert(s, e);
    }

    /// Removes `[start, end)`. Returns how many ranges it cut into and how
    /// many of those it split in two.
    pub fn remove(&mut self, start: u64, end: u64) -> (u64, u64) {
        let (mut hit, mut splits) = (0, 0);
        for (rs, re) in self.touching(start, end) {
            if re <= start || rs >= end {
                continue;
            }
            hit += 1;
            self.ranges.remove(&rs);
            if rs < start {
                self.ranges.insert(rs, start);
            }
            if re > end {
                self.ranges.insert(end, re);
            }
            if rs < start && re > end {
                splits += 1;
            }
        }
        (hit, splits)
    }

    /// Whether any page of `[start, end)` is in the set.
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        start < end
            && self
                .ranges
                .range(..end)
                .next_back()
                .is_some_and(|(_, &re)| re > start)
    }

    /// Pages of `[start, end)` not in the set, as ranges.
    pub fn gaps(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = start;
        for (rs, re) in self.touching_iter(start, end) {
            if rs > at {
                out.push((at, rs.min(end)));
            }
            at = at.max(re);
        }
        if at < end {
            out.push((at, end));
        }
        out
    }

    /// Number of ranges.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Pages in the set.
    pub fn pages(&self) -> u64 {
        self.ranges.iter().map(|(s, e)| e - s).sum()
    }

    /// Pages of `[start, end)` in the set.
    pub fn pages_in(&self, start: u64, end: u64) -> u64 {
        self.touching_iter(start, end)
            .map(|(s, e)| e.min(end).saturating_sub(s.max(start)))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_set_merges_and_cuts() {
        let mut u = IntervalSet::default();
        u.insert(0, 10);
        u.insert(10, 20);
        u.insert(30, 40);
        assert_eq!(u.len(), 2);
        assert!(u.overlaps(19, 21));
        assert!(!u.overlaps(20, 30));
        assert_eq!(u.gaps(0, 50), vec![(20, 30), (40, 50)]);
        assert_eq!(u.touching(20, 30), vec![(0, 20), (30, 40)]);
        assert_eq!(u.touching(21, 29), Vec::<(u64, u64)>::new());
        assert_eq!(u.touching(5, 5), vec![(0, 20)]);
        assert_eq!(u.touching(45, 41), Vec::<(u64, u64)>::new());
        assert_eq!(u.remove(5, 6), (1, 1));
        assert_eq!(u.remove(0, 1), (1, 0));
        assert_eq!(u.pages(), 28);
    }
}
