//! Share sessions (KIP-932): per member, the share partitions it fetches from, and the
//! epoch the next ShareFetch/ShareAcknowledge must carry. Epoch 0 opens a session (a
//! full fetch), -1 closes it (its acquisitions are released), anything else must be the
//! expected one (then the next is expected).

use std::collections::BTreeSet;

use super::{ShareError, ShareGroups};

/// A share partition: topic and partition.
pub type SharePartition = (String, i32);

#[derive(Debug, Default)]
pub(super) struct Session {
    /// The epoch the next request must carry.
    next_epoch: i32,
    pub partitions: BTreeSet<SharePartition>,
}

fn next(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl ShareGroups {
    /// ShareFetch's session step: opens, checks and advances the session of `member`,
    /// adding `add` and dropping `forget` from its partitions. Returns the partitions to
    /// fetch from (none for the closing epoch -1: the caller then settles the
    /// acknowledgements and calls [`Self::end_session`]).
    pub fn fetch_session(
        &self,
        group: &str,
        member: &str,
        epoch: i32,
        add: &[SharePartition],
        forget: &[SharePartition],
    ) -> Result<Vec<SharePartition>, ShareError> {
        let mut inner = self.inner.lock();
        let key = (group.to_string(), member.to_string());
        if epoch == 0 {
            let session = Session {
                next_epoch: 1,
                partitions: add.iter().cloned().collect(),
            };
            let out = session.partitions.iter().cloned().collect();
            inner.sessions.insert(key, session);
            return Ok(out);
        }
        let Some(session) = inner.sessions.get_mut(&key) else {
            return Err(ShareError::SessionNotFound);
        };
        if epoch == -1 {
            return Ok(Vec::new());
        }
        if epoch != session.next_epoch {
            return Err(ShareError::InvalidSessionEpoch);
        }
        session.next_epoch = next(epoch);
        for p in forget {
            session.partitions.remove(p);
        }
        session.partitions.extend(add.iter().cloned());
        Ok(session.partitions.iter().cloned().collect())
    }

    /// ShareAcknowledge's session step: the session must exist and the epoch be the
    /// expected one (or -1, closing it once the acknowledgements are settled).
    pub fn ack_session(&self, group: &str, member: &str, epoch: i32) -> Result<(), ShareError> {
        let mut inner = self.inner.lock();
        let key = (group.to_string(), member.to_string());
        if epoch == 0 {
            return Err(ShareError::InvalidSessionEpoch);
        }
        let Some(session) = inner.sessions.get_mut(&key) else {
            return Err(ShareError::SessionNotFound);
        };
        if epoch == -1 {
            return Ok(());
        }
        if epoch != session.next_epoch {
            return Err(ShareError::InvalidSessionEpoch);
        }
        session.next_epoch = next(epoch);
        Ok(())
    }

    /// Closes `member`'s session (epoch -1): what it still holds goes back to the queue.
    pub fn end_session(&self, group: &str, member: &str) {
        self.release_member(group, member);
        self.close_session(group, member);
    }

    pub(super) fn close_session(&self, group: &str, member: &str) {
        self.inner
            .lock()
            .sessions
            .remove(&(group.to_string(), member.to_string()));
    }

    /// Forgets a member's holder number once it holds nothing (it left or expired).
    pub(super) fn forget_holder(&self, group: &str, member: &str) {
        self.inner
            .lock()
            .holders
            .remove(&(group.to_string(), member.to_string()));
    }
}
