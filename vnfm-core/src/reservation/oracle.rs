//! The naive model of the ledger's capacity arithmetic: a list of intervals, scanned on every
//! question. It is the oracle of the property tests and the baseline of the benchmark; the
//! ledger never uses it.

use chrono::{DateTime, Utc};

use super::model::{Capacity, ResourceLine};
use crate::id::ZoneId;

/// What an interval does to the zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NaiveKind {
    /// Capacity (a pool); negative amounts are not modelled, use [`NaiveKind::Loss`].
    Total,
    /// A capacity decrease.
    Loss,
    /// A reservation's hold.
    Reserved,
    /// An allocation outside any reservation.
    Used,
}

/// One interval `[start, end)` (`end` `None`: forever).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NaiveEntry {
    /// Zone.
    pub zone: ZoneId,
    /// Kind.
    pub kind: NaiveKind,
    /// Start (ms).
    pub start: i64,
    /// End (ms), `i64::MAX` for forever.
    pub end: i64,
    /// Amounts.
    pub amounts: Capacity,
}

impl NaiveEntry {
    /// An interval over `[start, end)`.
    pub fn new(
        zone: impl Into<ZoneId>,
        kind: NaiveKind,
        start: DateTime<Utc>,
        end: Option<DateTime<Utc>>,
        amounts: Capacity,
    ) -> Self {
        NaiveEntry {
            zone: zone.into(),
            kind,
            start: start.timestamp_millis(),
            end: end.map_or(i64::MAX, |e| e.timestamp_millis()),
            amounts,
        }
    }

    fn sign(&self) -> i128 {
        match self.kind {
            NaiveKind::Total => 1,
            NaiveKind::Loss | NaiveKind::Reserved | NaiveKind::Used => -1,
        }
    }
}

/// Intervals, scanned.
#[derive(Clone, Debug, Default)]
pub struct NaiveLedger {
    /// Every interval; removed ones are `None` so that indexes stay stable.
    pub entries: Vec<Option<NaiveEntry>>,
}

impl NaiveLedger {
    /// Empty.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an interval; returns its index.
    pub fn push(&mut self, e: NaiveEntry) -> usize {
        self.entries.push(Some(e));
        self.entries.len() - 1
    }

    /// Removes interval `i`.
    pub fn remove(&mut self, i: usize) {
        if let Some(e) = self.entries.get_mut(i) {
            *e = None;
        }
    }

    /// Ends interval `i` at `end` (if earlier).
    pub fn truncate(&mut self, i: usize, end: DateTime<Utc>) {
        if let Some(Some(e)) = self.entries.get_mut(i) {
            e.end = e.end.min(end.timestamp_millis());
        }
    }

    /// Available on `line` of `zone` at instant `t` (ms): one scan.
    pub fn available_at_ms(&self, zone: &ZoneId, line: ResourceLine, t: i64) -> i128 {
        self.entries
            .iter()
            .flatten()
            .filter(|e| &e.zone == zone && e.start <= t && t < e.end)
            .map(|e| e.sign() * i128::from(e.amounts.get(line)))
            .sum()
    }

    /// Least available on `line` of `zone` over `[s, e)`: one scan collecting the intervals
    /// that touch the window, then a sweep over their boundaries.
    pub fn min_available(
        &self,
        zone: &ZoneId,
        line: ResourceLine,
        s: DateTime<Utc>,
        e: DateTime<Utc>,
    ) -> i128 {
        self.min_available_ms(zone, line, s.timestamp_millis(), e.timestamp_millis())
    }

    /// [`NaiveLedger::min_available`] in milliseconds.
    pub fn min_available_ms(&self, zone: &ZoneId, line: ResourceLine, s: i64, e: i64) -> i128 {
        let mut base = 0i128;
        let mut steps: Vec<(i64, i128)> = Vec::new();
        for x in self.entries.iter().flatten() {
            if &x.zone != zone || x.end <= s || x.start >= e {
                continue;
            }
            let a = x.sign() * i128::from(x.amounts.get(line));
            if a == 0 {
                continue;
            }
            if x.start <= s {
                base += a;
            } else {
                steps.push((x.start, a));
            }
            if x.end < e {
                steps.push((x.end, -a));
            }
        }
        steps.sort_unstable();
        let mut min = base;
        let mut cur = base;
        let mut i = 0;
        while i < steps.len() {
            let t = steps.get(i).map_or(0, |p| p.0);
            while let Some((k, d)) = steps.get(i) {
                if *k != t {
                    break;
                }
                cur += d;
                i += 1;
            }
            min = min.min(cur);
        }
        min
    }

    /// True when `amounts` fit in `zone` at every instant of `[s, e)`.
    pub fn fits(
        &self,
        zone: &ZoneId,
        amounts: &Capacity,
        s: DateTime<Utc>,
        e: DateTime<Utc>,
    ) -> bool {
        amounts
            .lines()
            .all(|(l, a)| self.min_available(zone, l, s, e) >= i128::from(a))
    }

    /// Every instant (ms) at which a value of `zone` changes.
    pub fn breakpoints(&self, zone: &ZoneId) -> Vec<i64> {
        let mut v: Vec<i64> = self
            .entries
            .iter()
            .flatten()
            .filter(|e| &e.zone == zone)
            .flat_map(|e| [e.start, e.end])
            .filter(|t| *t != i64::MAX)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(ms).unwrap()
    }

    #[test]
    fn oracle_scans_the_worst_instant() {
        let z = ZoneId::new("z");
        let mut o = NaiveLedger::new();
        o.push(NaiveEntry::new(
            "z",
            NaiveKind::Total,
            t(0),
            None,
            Capacity::compute(10, 0, 0),
        ));
        let r = o.push(NaiveEntry::new(
            "z",
            NaiveKind::Reserved,
            t(5),
            Some(t(6)),
            Capacity::compute(7, 0, 0),
        ));
        assert_eq!(o.min_available(&z, ResourceLine::Cores, t(0), t(10)), 3);
        assert_eq!(o.min_available(&z, ResourceLine::Cores, t(6), t(10)), 10);
        assert_eq!(o.available_at_ms(&z, ResourceLine::Cores, 5), 3);
        assert_eq!(o.breakpoints(&z), vec![0, 5, 6]);
        o.remove(r);
        assert_eq!(o.min_available(&z, ResourceLine::Cores, t(0), t(10)), 10);
    }
}
