//! The cleaner's per-partition checkpoint (Kafka keeps one `cleaner-offset-checkpoint`
//! per log directory; one small file per partition fits this crate's layout better):
//!
//! ```text
//! dirty 1234            first offset not yet cleaned
//! pass 1234 1700000000  a pass cleaned everything below 1234 at that time (ms)
//! horizon 1700086400000 the earliest a marker or tombstone kept may go (ms)
//! ```
//!
//! The `pass` lines date when records became part of the clean section, which is what
//! `delete.retention.ms` counts from for tombstones. They only ever grow in both fields,
//! so a few suffice: older lines are merged (keeping the later time, so a tombstone is
//! never dropped early).

/// File name inside the partition directory.
pub(crate) const FILE: &str = "cleaner-checkpoint";
/// Pass lines kept at most.
const MAX_PASSES: usize = 32;

/// The first dirty offset `dir`'s checkpoint records (0 without one).
pub(crate) fn first_dirty(io: &crate::segment::Io, dir: &std::path::Path) -> i64 {
    match io.read_opt(&dir.join(FILE)) {
        Ok(Some(bytes)) => Checkpoint::parse(&String::from_utf8_lossy(&bytes)).dirty,
        _ => 0,
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub dirty: i64,
    /// (end offset, time ms), both increasing.
    pub passes: Vec<(i64, i64)>,
    /// When the earliest marker or tombstone the last pass kept reaches its delete
    /// horizon: a pass is due then even with nothing dirty.
    pub horizon: Option<i64>,
}

impl Checkpoint {
    pub(crate) fn parse(text: &str) -> Checkpoint {
        let mut c = Checkpoint::default();
        for line in text.lines() {
            let mut it = line.split_whitespace();
            match (it.next(), it.next(), it.next()) {
                (Some("dirty"), Some(o), None) => c.dirty = o.parse().unwrap_or(0),
                (Some("horizon"), Some(t), None) => c.horizon = t.parse().ok(),
                (Some("pass"), Some(o), Some(t)) => {
                    if let (Ok(o), Ok(t)) = (o.parse(), t.parse()) {
                        c.passes.push((o, t));
                    }
                }
                _ => {}
            }
        }
        c
    }

    pub(crate) fn render(&self) -> String {
        let mut s = format!("dirty {}\n", self.dirty);
        for (o, t) in &self.passes {
            s.push_str(&format!("pass {o} {t}\n"));
        }
        if let Some(t) = self.horizon {
            s.push_str(&format!("horizon {t}\n"));
        }
        s
    }

    /// Records a pass that cleaned everything below `end` at `now_ms`.
    pub(crate) fn record_pass(&mut self, end: i64, now_ms: i64) {
        self.dirty = self.dirty.max(end);
        if self.passes.last().is_some_and(|&(o, _)| o >= end) {
            return;
        }
        self.passes.push((end, now_ms));
        while self.passes.len() > MAX_PASSES {
            // Merge the two oldest: the earlier range takes the later time.
            let (_, t) = self.passes[1];
            self.passes[0].1 = t;
            self.passes[0].0 = self.passes[1].0;
            self.passes.remove(1);
        }
    }

    /// Tombstones below this offset have been clean for at least `retention_ms`.
    pub(crate) fn tombstone_horizon(&self, now_ms: i64, retention_ms: i64) -> i64 {
        let cutoff = now_ms.saturating_sub(retention_ms);
        self.passes
            .iter()
            .filter(|&&(_, t)| t <= cutoff)
            .map(|&(o, _)| o)
            .max()
            .unwrap_or(i64::MIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_dates_tombstones() {
        let mut c = Checkpoint::default();
        c.record_pass(100, 1_000);
        c.record_pass(250, 5_000);
        let back = Checkpoint::parse(&c.render());
        assert_eq!(back, c);
        c.horizon = Some(77);
        assert_eq!(Checkpoint::parse(&c.render()), c);
        c.horizon = None;
        assert_eq!(back.dirty, 250);
        assert_eq!(c.tombstone_horizon(1_500, 1_000), i64::MIN);
        assert_eq!(c.tombstone_horizon(2_000, 1_000), 100);
        assert_eq!(c.tombstone_horizon(9_000, 1_000), 250);
        for i in 0..100 {
            c.record_pass(300 + i, 6_000 + i);
        }
        assert!(c.passes.len() <= MAX_PASSES);
        // Merging never makes a range look older than it is.
        assert!(c.tombstone_horizon(6_050 + 1_000, 1_000) <= 350);
    }
}
