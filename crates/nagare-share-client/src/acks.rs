//! Acknowledgements noted but not yet sent, per share partition, and their batching into
//! the wire's acknowledgement batches: sorted, non-overlapping offset ranges, each with one
//! acknowledge type for the whole range or one per offset.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::AckKind;

/// Kafka's AcknowledgeType, plus GAP for acquired offsets that hold no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckType {
    Gap = 0,
    Accept = 1,
    Release = 2,
    Reject = 3,
}

impl From<AckKind> for AckType {
    fn from(k: AckKind) -> AckType {
        match k {
            AckKind::Accept => AckType::Accept,
            AckKind::Release => AckType::Release,
            AckKind::Reject => AckType::Reject,
        }
    }
}

/// A share partition by name: (topic, partition).
pub(crate) type TopicPartition = (Arc<str>, i32);

/// Offsets `first..=last` settled as `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AckRange {
    pub first: i64,
    pub last: i64,
    pub kind: AckType,
}

/// One acknowledgement batch as the wire has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AckBatch {
    pub first: i64,
    pub last: i64,
    pub types: Vec<i8>,
}

/// Longest run of mixed types written as one batch with a type per offset; longer
/// runs are split (each type costs a byte on the wire).
const MAX_MIXED_SPAN: i64 = 512;

#[derive(Debug, Default)]
pub(crate) struct PendingAcks {
    /// Per partition, ranges by first offset.
    parts: HashMap<TopicPartition, BTreeMap<i64, AckRange>>,
}

impl PendingAcks {
    /// Notes a range; a later note of the same first offset replaces the earlier one.
    pub(crate) fn note(&mut self, tp: TopicPartition, range: AckRange) {
        if range.last < range.first {
            return;
        }
        self.parts.entry(tp).or_default().insert(range.first, range);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    pub(crate) fn partitions(&self) -> impl Iterator<Item = &TopicPartition> {
        self.parts.keys()
    }

    /// Takes the ranges of the partitions `pick` chooses.
    pub(crate) fn take(
        &mut self,
        mut pick: impl FnMut(&TopicPartition) -> bool,
    ) -> Vec<(TopicPartition, Vec<AckRange>)> {
        let chosen: Vec<TopicPartition> =
            self.parts.keys().filter(|tp| pick(tp)).cloned().collect();
        chosen
            .into_iter()
            .filter_map(|tp| {
                let ranges = self.parts.remove(&tp)?;
                Some((tp, ranges.into_values().collect()))
            })
            .collect()
    }

    /// Puts back ranges that could not be sent; a range noted again since they were
    /// taken is the newer word and stays.
    pub(crate) fn put_back(&mut self, taken: Vec<(TopicPartition, Vec<AckRange>)>) {
        for (tp, ranges) in taken {
            let part = self.parts.entry(tp).or_default();
            for r in ranges {
                part.entry(r.first).or_insert(r);
            }
        }
    }
}

/// The wire batches of one partition's ranges (sorted by first offset, as taken): a run
/// of adjacent ranges becomes one batch, with a single type when they agree and one type
/// per offset otherwise. A range overlapping the one before it is dropped: the broker
/// refuses overlapping batches, and only a caller's mistake makes one.
pub(crate) fn to_batches(ranges: &[AckRange]) -> Vec<AckBatch> {
    let mut out: Vec<AckBatch> = Vec::new();
    // The ranges of the batch being built.
    let mut run: Vec<AckRange> = Vec::new();
    let close = |run: &mut Vec<AckRange>, out: &mut Vec<AckBatch>| {
        let (Some(first), Some(last)) = (run.first(), run.last()) else {
            return;
        };
        let types = if run.iter().all(|r| r.kind == first.kind) {
            vec![first.kind as i8]
        } else {
            run.iter()
                .flat_map(|r| (r.first..=r.last).map(move |_| r.kind as i8))
                .collect()
        };
        out.push(AckBatch {
            first: first.first,
            last: last.last,
            types,
        });
        run.clear();
    };
    for r in ranges {
        if let Some(prev) = run.last() {
            if r.first <= prev.last {
                continue;
            }
            let start = run[0].first;
            let uniform = run.iter().all(|x| x.kind == r.kind);
            let adjacent = r.first == prev.last + 1;
            // A mixed batch lists every offset's type: keep those short.
            let fits = uniform
                || r.last - start < MAX_MIXED_SPAN
                    && run.iter().all(|x| x.last - x.first < MAX_MIXED_SPAN);
            if !adjacent || !fits {
                close(&mut run, &mut out);
            }
        }
        run.push(*r);
    }
    close(&mut run, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use AckType::*;

    fn r(first: i64, last: i64, kind: AckType) -> AckRange {
        AckRange { first, last, kind }
    }

    fn b(first: i64, last: i64, types: &[i8]) -> AckBatch {
        AckBatch {
            first,
            last,
            types: types.to_vec(),
        }
    }

    #[test]
    fn adjacent_ranges_of_one_kind_make_one_batch() {
        let ranges = [
            r(0, 0, Accept),
            r(1, 1, Accept),
            r(2, 9, Accept),
            r(20, 20, Accept),
        ];
        assert_eq!(to_batches(&ranges), [b(0, 9, &[1]), b(20, 20, &[1])]);
    }

    #[test]
    fn mixed_adjacent_ranges_list_a_type_per_offset() {
        let ranges = [
            r(5, 5, Accept),
            r(6, 7, Gap),
            r(8, 8, Reject),
            r(9, 9, Release),
        ];
        assert_eq!(to_batches(&ranges), [b(5, 9, &[1, 0, 0, 3, 2])]);
    }

    #[test]
    fn a_long_mixed_run_is_split_at_range_boundaries() {
        let ranges = [
            r(0, 0, Accept),
            r(1, 10_000, Gap),
            r(10_001, 10_001, Accept),
        ];
        assert_eq!(
            to_batches(&ranges),
            [b(0, 0, &[1]), b(1, 10_000, &[0]), b(10_001, 10_001, &[1])]
        );
    }

    #[test]
    fn overlaps_are_dropped() {
        let ranges = [r(0, 5, Gap), r(3, 3, Accept), r(6, 6, Accept)];
        assert_eq!(to_batches(&ranges), [b(0, 6, &[0, 0, 0, 0, 0, 0, 1])]);
        let ranges = [r(0, 1000, Gap), r(600, 600, Accept), r(2000, 2000, Accept)];
        assert_eq!(to_batches(&ranges), [b(0, 1000, &[0]), b(2000, 2000, &[1])]);
    }

    #[test]
    fn take_and_put_back_keep_the_newer_word() {
        let tp = |p: i32| (Arc::<str>::from("t"), p);
        let mut acks = PendingAcks::default();
        acks.note(tp(0), r(1, 1, Accept));
        acks.note(tp(0), r(0, 0, Release));
        acks.note(tp(1), r(7, 7, Reject));
        acks.note(tp(1), r(9, 8, Reject));
        let taken = acks.take(|(_, p)| *p == 0);
        assert_eq!(taken, [(tp(0), vec![r(0, 0, Release), r(1, 1, Accept)])]);
        assert_eq!(acks.partitions().count(), 1);
        // Noted again while the taken ones were in flight: the new word stays.
        acks.note(tp(0), r(1, 1, Reject));
        acks.put_back(taken);
        let again = acks.take(|_| true);
        let p0 = again.iter().find(|(t, _)| t.1 == 0).unwrap();
        assert_eq!(p0.1, [r(0, 0, Release), r(1, 1, Reject)]);
        let p1 = again.iter().find(|(t, _)| t.1 == 1).unwrap();
        assert_eq!(p1.1, [r(7, 7, Reject)]);
        assert!(acks.is_empty());
    }
}
