//! A set of half-open `u64` ranges, kept coalesced.
//!
//! Used for the bytes a sender must (re)schedule and for the ranges a receiver has seen above
//! its cumulative ACK. Every operation is `O(log n + k)` for `k` ranges touched.

use std::collections::BTreeMap;

/// Non-overlapping, non-adjacent half-open ranges `start..end`, with their total length.
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct RangeSet {
    map: BTreeMap<u64, u64>,
    len: u64,
}

impl RangeSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Total number of values covered.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing is covered.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Number of disjoint ranges.
    pub fn ranges(&self) -> usize {
        self.map.len()
    }

    /// The ranges in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, u64)> + '_ {
        self.map.iter().map(|(&s, &e)| (s, e))
    }

    /// The lowest range.
    pub fn first(&self) -> Option<(u64, u64)> {
        self.map.first_key_value().map(|(&s, &e)| (s, e))
    }

    /// True when `v` is covered.
    pub fn contains(&self, v: u64) -> bool {
        self.map
            .range(..=v)
            .next_back()
            .is_some_and(|(_, &e)| v < e)
    }

    /// Adds `start..end`, merging with neighbours. Returns how many values were new.
    pub fn insert(&mut self, start: u64, end: u64) -> u64 {
        if start >= end {
            return 0;
        }
        let mut s = start;
        let mut e = end;
        let mut removed = 0;
        // A range that starts at or before `start` and reaches it.
        if let Some((&ps, &pe)) = self.map.range(..=start).next_back() {
            if pe >= start {
                if pe >= end {
                    return 0;
                }
                s = ps;
                e = e.max(pe);
                removed += pe - ps;
                self.map.remove(&ps);
            }
        }
        // Ranges that start inside `start..=end`.
        while let Some((&ns, &ne)) = self.map.range(s..=e).next() {
            e = e.max(ne);
            removed += ne - ns;
            self.map.remove(&ns);
        }
        self.map.insert(s, e);
        let added = (e - s) - removed;
        self.len += added;
        added
    }

    /// Removes `start..end`. Returns how many values were removed.
    pub fn remove(&mut self, start: u64, end: u64) -> u64 {
        if start >= end {
            return 0;
        }
        let mut removed = 0;
        // Collect overlapping ranges: the one before `start`, and those starting in the range.
        let mut touched: Vec<(u64, u64)> = Vec::new();
        if let Some((&ps, &pe)) = self.map.range(..start).next_back() {
            if pe > start {
                touched.push((ps, pe));
            }
        }
        touched.extend(self.map.range(start..end).map(|(&s, &e)| (s, e)));
        for (s, e) in touched {
            self.map.remove(&s);
            if s < start {
                self.map.insert(s, start);
            }
            if e > end {
                self.map.insert(end, e);
            }
            removed += e.min(end) - s.max(start);
        }
        self.len -= removed;
        removed
    }

    /// Removes every value below `v`.
    pub fn remove_below(&mut self, v: u64) -> u64 {
        match self.first() {
            Some((s, _)) if s < v => self.remove(s, v),
            _ => 0,
        }
    }

    /// Removes and returns up to `max` values from the front of the lowest range.
    pub fn pop_front(&mut self, max: u64) -> Option<(u64, u64)> {
        let (s, e) = self.first()?;
        let end = e.min(s.saturating_add(max.max(1)));
        self.remove(s, end);
        Some((s, end))
    }

    /// Number of covered values in `start..end`.
    pub fn covered(&self, start: u64, end: u64) -> u64 {
        if start >= end {
            return 0;
        }
        let mut n = 0;
        if let Some((&ps, &pe)) = self.map.range(..start).next_back() {
            if pe > start {
                n += pe.min(end) - start.max(ps);
            }
        }
        for (&s, &e) in self.map.range(start..end) {
            n += e.min(end) - s;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn insert_merges_and_counts() {
        let mut r = RangeSet::new();
        assert_eq!(r.insert(10, 20), 10);
        assert_eq!(r.insert(30, 40), 10);
        assert_eq!(r.insert(15, 35), 10);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![(10, 40)]);
        assert_eq!(r.insert(40, 41), 1, "adjacent ranges merge");
        assert_eq!(r.ranges(), 1);
        assert_eq!(r.insert(12, 13), 0);
        assert_eq!(r.len(), 31);
    }

    #[test]
    fn remove_splits() {
        let mut r = RangeSet::new();
        r.insert(0, 100);
        assert_eq!(r.remove(10, 20), 10);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![(0, 10), (20, 100)]);
        assert_eq!(r.remove_below(50), 40);
        assert_eq!(r.pop_front(10), Some((50, 60)));
        assert_eq!(r.covered(0, 70), 10);
        assert!(r.contains(99) && !r.contains(100) && !r.contains(59));
    }

    proptest! {
        /// The set agrees with a bitmap model under random inserts and removes.
        #[test]
        fn matches_bitmap(ops in proptest::collection::vec((any::<bool>(), 0u64..200, 0u64..60), 1..60)) {
            let mut r = RangeSet::new();
            let mut model = [false; 260];
            for (ins, s, l) in ops {
                let e = s + l;
                let expect = (s..e).filter(|&i| model[i as usize] != ins).count() as u64;
                let got = if ins { r.insert(s, e) } else { r.remove(s, e) };
                prop_assert_eq!(got, expect);
                for i in s..e { model[i as usize] = ins; }
                prop_assert_eq!(r.len(), model.iter().filter(|&&b| b).count() as u64);
                for i in 0..260u64 { prop_assert_eq!(r.contains(i), model[i as usize]); }
                // coalesced: no two ranges touch
                let v: Vec<_> = r.iter().collect();
                for w in v.windows(2) { prop_assert!(w[0].1 < w[1].0); }
            }
        }
    }
}
