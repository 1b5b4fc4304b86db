//! Records of the queue state log: key = queue name, value = JSON: a batch of newly
//! acknowledged offsets, a new delivered-up-to mark, or a snapshot of the whole state
//! (written when the log is compacted). Offsets are stored as inclusive ranges to stay
//! small. Logs written before the delivered mark existed read as "nothing delivered".

use std::collections::HashMap;

use bytes::Bytes;
use nagare_log::batch::{NewRecord, Record};
use serde::{Deserialize, Serialize};

use super::AckState;
use crate::internal_log::InternalOp;

/// One change of one queue's state: the operation the internal-log engine stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueOp {
    pub queue: String,
    pub op: StateOp,
}

impl InternalOp for QueueOp {
    type State = HashMap<String, AckState>;

    fn encode(&self, timestamp: i64) -> NewRecord {
        self.op.to_record(&self.queue, timestamp)
    }

    fn decode(record: &Record) -> Option<Self> {
        let (queue, op) = StateOp::from_record(record)?;
        Some(QueueOp { queue, op })
    }

    fn apply(self, state: &mut Self::State) {
        self.op.apply(state.entry(self.queue).or_default());
    }

    fn snapshot(state: &Self::State) -> Vec<Self> {
        state
            .iter()
            .map(|(queue, s)| QueueOp {
                queue: queue.clone(),
                op: StateOp::Snapshot(s.clone()),
            })
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StateOp {
    Acked(Vec<i64>),
    /// Everything below this offset has been delivered at least once.
    Delivered(i64),
    Snapshot(AckState),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Stored {
    Acked(Vec<(i64, i64)>),
    Delivered(i64),
    Snapshot {
        floor: i64,
        above: Vec<(i64, i64)>,
        #[serde(default)]
        delivered: i64,
    },
}

impl StateOp {
    pub(super) fn to_record(&self, queue: &str, timestamp: i64) -> NewRecord {
        let stored = match self {
            StateOp::Acked(offsets) => {
                let mut sorted = offsets.clone();
                sorted.sort_unstable();
                Stored::Acked(ranges(sorted))
            }
            StateOp::Delivered(mark) => Stored::Delivered(*mark),
            StateOp::Snapshot(s) => Stored::Snapshot {
                floor: s.floor,
                above: ranges(s.above.iter().copied()),
                delivered: s.delivered,
            },
        };
        NewRecord {
            key: Some(Bytes::copy_from_slice(queue.as_bytes())),
            value: serde_json::to_vec(&stored).ok().map(Bytes::from),
            headers: Vec::new(),
            timestamp,
        }
    }

    /// The queue and change a record holds; `None` for records this version cannot read.
    pub(super) fn from_record(r: &Record) -> Option<(String, StateOp)> {
        let queue = String::from_utf8(r.key.as_deref()?.to_vec()).ok()?;
        let stored: Stored = serde_json::from_slice(r.value.as_deref()?).ok()?;
        let op = match stored {
            Stored::Acked(rs) => StateOp::Acked(expand(&rs)?),
            Stored::Delivered(mark) => StateOp::Delivered(mark),
            Stored::Snapshot {
                floor,
                above,
                delivered,
            } => StateOp::Snapshot(AckState {
                floor,
                above: expand(&above)?.into_iter().collect(),
                delivered,
            }),
        };
        Some((queue, op))
    }

    pub(super) fn apply(self, state: &mut AckState) {
        match self {
            StateOp::Acked(offsets) => offsets.into_iter().for_each(|o| state.ack(o)),
            StateOp::Delivered(mark) => state.delivered = state.delivered.max(mark),
            StateOp::Snapshot(s) => *state = s,
        }
    }
}

/// Sorted offsets to inclusive ranges.
fn ranges(sorted: impl IntoIterator<Item = i64>) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for o in sorted {
        match out.last_mut() {
            Some((_, end)) if o <= *end + 1 => *end = (*end).max(o),
            _ => out.push((o, o)),
        }
    }
    out
}

/// Ranges back to offsets; refuses absurd ranges from a corrupt record.
fn expand(rs: &[(i64, i64)]) -> Option<Vec<i64>> {
    let total: i64 = rs.iter().map(|(a, b)| (b - a + 1).max(0)).sum();
    if total > 10_000_000 {
        return None;
    }
    Some(rs.iter().flat_map(|&(a, b)| a..=b).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_without_a_delivered_mark_still_read() {
        let r = nagare_log::batch::Record {
            offset: 0,
            timestamp: 0,
            key: Some(Bytes::from_static(b"q")),
            value: Some(Bytes::from_static(
                br#"{"snapshot":{"floor":3,"above":[[5,6]]}}"#,
            )),
            headers: Vec::new(),
        };
        let Some((q, StateOp::Snapshot(s))) = StateOp::from_record(&r) else {
            panic!("unreadable");
        };
        assert_eq!(q, "q");
        assert_eq!((s.floor, s.above.len(), s.delivered), (3, 2, 0));
    }

    #[test]
    fn ranges_round_trip() {
        let offs = vec![1, 2, 3, 7, 9, 10];
        let r = ranges(offs.clone());
        assert_eq!(r, vec![(1, 3), (7, 7), (9, 10)]);
        assert_eq!(expand(&r).unwrap(), offs);
    }
}
