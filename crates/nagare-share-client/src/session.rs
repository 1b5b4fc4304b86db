//! A share session with one broker (KIP-932): epoch 0 opens it with the partitions to
//! fetch, each later request carries the next epoch (1, 2, ... wrapping to 1) and only the
//! partitions added or forgotten since, and -1 closes it. A request that failed, or an
//! answer of SHARE_SESSION_NOT_FOUND / INVALID_SHARE_SESSION_EPOCH, resets it: the next
//! request opens a new one.

use std::collections::BTreeSet;
use std::sync::Arc;

use uuid::Uuid;

/// The epoch that closes a session.
pub(crate) const FINAL_EPOCH: i32 = -1;

/// A partition as share requests name it (topic id), with its topic name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SharePartition {
    pub topic: Arc<str>,
    pub partition: i32,
    pub id: Uuid,
}

/// What the next share fetch of a session says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct FetchStep {
    pub epoch: i32,
    pub add: Vec<SharePartition>,
    pub forget: Vec<SharePartition>,
}

#[derive(Debug, Default)]
pub(crate) struct ShareSession {
    /// The epoch of the next request; 0 when no session is open.
    epoch: i32,
    /// The partitions the broker has in the session.
    partitions: BTreeSet<SharePartition>,
}

/// Kafka's `ShareRequestMetadata.nextEpoch`.
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl ShareSession {
    /// Whether a session is open (so acknowledgements can be sent in it).
    pub(crate) fn is_open(&self) -> bool {
        self.epoch > 0
    }

    pub(crate) fn epoch(&self) -> i32 {
        self.epoch
    }

    pub(crate) fn partitions(&self) -> &BTreeSet<SharePartition> {
        &self.partitions
    }

    /// The next fetch of `wanted`: everything when opening, else the changes.
    pub(crate) fn step(&self, wanted: &BTreeSet<SharePartition>) -> FetchStep {
        if !self.is_open() {
            return FetchStep {
                epoch: 0,
                add: wanted.iter().cloned().collect(),
                forget: Vec::new(),
            };
        }
        FetchStep {
            epoch: self.epoch,
            add: wanted.difference(&self.partitions).cloned().collect(),
            forget: self.partitions.difference(wanted).cloned().collect(),
        }
    }

    /// The broker answered the fetch of `wanted` without a top-level error.
    pub(crate) fn fetched(&mut self, wanted: BTreeSet<SharePartition>) {
        self.partitions = wanted;
        self.epoch = next_epoch(self.epoch);
    }

    /// The broker answered a ShareAcknowledge in the session.
    pub(crate) fn acknowledged(&mut self) {
        if self.is_open() {
            self.epoch = next_epoch(self.epoch);
        }
    }

    /// Forgets the session: the next request opens a new one.
    pub(crate) fn reset(&mut self) {
        self.epoch = 0;
        self.partitions.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(topic: &str, partition: i32) -> SharePartition {
        SharePartition {
            topic: topic.into(),
            partition,
            id: Uuid::from_u128(topic.len() as u128),
        }
    }

    fn set(ps: &[SharePartition]) -> BTreeSet<SharePartition> {
        ps.iter().cloned().collect()
    }

    #[test]
    fn opens_at_zero_then_sends_changes_with_incrementing_epochs() {
        let mut s = ShareSession::default();
        assert!(!s.is_open());
        let wanted = set(&[sp("a", 0), sp("a", 1)]);
        let step = s.step(&wanted);
        assert_eq!(step.epoch, 0);
        assert_eq!(step.add.len(), 2);
        s.fetched(wanted.clone());
        assert!(s.is_open());
        // Nothing changed: epoch 1, no partitions named.
        let step = s.step(&wanted);
        assert_eq!(
            step,
            FetchStep {
                epoch: 1,
                add: vec![],
                forget: vec![]
            }
        );
        s.fetched(wanted);
        s.acknowledged();
        assert_eq!(s.epoch(), 3);
        // The assignment moved: one added, one forgotten.
        let wanted = set(&[sp("a", 1), sp("bb", 0)]);
        let step = s.step(&wanted);
        assert_eq!(step.epoch, 3);
        assert_eq!(step.add, [sp("bb", 0)]);
        assert_eq!(step.forget, [sp("a", 0)]);
        s.fetched(wanted.clone());
        assert_eq!(s.partitions(), &wanted);
    }

    #[test]
    fn reset_reopens_with_everything() {
        let mut s = ShareSession::default();
        s.fetched(set(&[sp("a", 0)]));
        s.reset();
        assert!(!s.is_open());
        s.acknowledged();
        assert_eq!(s.epoch(), 0, "no session to acknowledge in");
        let step = s.step(&set(&[sp("a", 0)]));
        assert_eq!((step.epoch, step.add.len(), step.forget.len()), (0, 1, 0));
    }

    #[test]
    fn the_epoch_wraps_to_one() {
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(0), 1);
        assert_eq!(next_epoch(41), 42);
    }
}
