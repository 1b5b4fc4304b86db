//! Records of the queue state log: key = queue name, value = JSON of the queue's whole
//! acknowledgement state (floor, acknowledged offsets above it as inclusive ranges,
//! delivered mark), so the latest record of a queue is its state and the log cleaner
//! compacts the log. The operations queues push are the small changes (offsets
//! acknowledged, a new delivered mark); the log's writer applies them to its copy of the
//! state and writes, per append, one record of each changed queue's whole state
//! ([`InternalOp::encode_in`]): a busy queue costs one record per append, not one per
//! acknowledgement, and nothing is copied per acknowledgement.
//!
//! Earlier versions also wrote deltas (a batch of newly acknowledged offsets, a new
//! delivered mark) beside such states: they are still read, and a log holding them is
//! rewritten once on open (see `internal_log.rs`). States written before the delivered
//! mark existed read as "nothing delivered".

use std::collections::HashMap;

use bytes::Bytes;
use nagare_log::batch::{NewRecord, Record};
use serde::{Deserialize, Serialize};

use super::AckState;
use crate::internal_log::{InternalOp, Replayed};

/// One change of one queue's state: the operation the internal-log engine stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueOp {
    pub queue: String,
    pub change: Change,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    Acked(Vec<i64>),
    /// Everything below this offset has been delivered at least once.
    Delivered(i64),
    /// The whole state (after a purge, and what records hold).
    Whole(AckState),
    /// The queue is forgotten (a share group's offsets deleted): a tombstone.
    Deleted,
    /// Delivery counts above 1 of unacknowledged messages.
    Counts(Vec<(i64, i16)>),
}

impl Change {
    fn apply(self, state: &mut AckState) {
        match self {
            Change::Acked(offsets) => offsets.into_iter().for_each(|o| state.ack(o)),
            Change::Delivered(mark) => state.delivered = state.delivered.max(mark),
            Change::Whole(s) => *state = s,
            // Removed by the caller, which holds the map.
            Change::Deleted => {}
            Change::Counts(counts) => {
                for (o, c) in counts {
                    if !state.is_acked(o) {
                        let e = state.counts.entry(o).or_insert(c);
                        *e = (*e).max(c);
                    }
                }
            }
        }
    }
}

impl InternalOp for QueueOp {
    type State = HashMap<String, AckState>;

    fn key(&self) -> Bytes {
        Bytes::copy_from_slice(self.queue.as_bytes())
    }

    /// Without the state it changes, a change is written as applied to a queue with
    /// nothing acknowledged; the writer always calls [`encode_in`](Self::encode_in).
    fn encode(&self, timestamp: i64) -> NewRecord {
        self.encode_in(&Self::State::default(), timestamp)
    }

    /// The queue's whole state once this change is applied to `state`.
    fn encode_in(&self, state: &Self::State, timestamp: i64) -> NewRecord {
        if self.change == Change::Deleted {
            return NewRecord {
                key: Some(self.key()),
                value: None,
                headers: Vec::new(),
                timestamp,
            };
        }
        let whole = match &self.change {
            Change::Whole(s) => s.clone(),
            change => {
                let mut s = state.get(&self.queue).cloned().unwrap_or_default();
                change.clone().apply(&mut s);
                s
            }
        };
        let stored = Stored::Snapshot {
            floor: whole.floor,
            above: ranges(whole.above.iter().copied()),
            delivered: whole.delivered,
            counts: whole.counts.iter().map(|(&o, &c)| (o, c)).collect(),
        };
        NewRecord {
            key: Some(self.key()),
            value: serde_json::to_vec(&stored).ok().map(Bytes::from),
            headers: Vec::new(),
            timestamp,
        }
    }

    fn decode(record: &Record) -> Option<Self> {
        if record.value.is_none() {
            let queue = String::from_utf8(record.key.as_deref()?.to_vec()).ok()?;
            return Some(QueueOp {
                queue,
                change: Change::Deleted,
            });
        }
        match read(record)? {
            (
                queue,
                Stored::Snapshot {
                    floor,
                    above,
                    delivered,
                    counts,
                },
            ) => Some(QueueOp {
                queue,
                change: Change::Whole(whole(floor, &above, delivered, &counts)?),
            }),
            _ => None,
        }
    }

    fn replay(record: &Record, state: &mut Self::State) -> Replayed {
        if record.value.is_none() {
            if let Some(key) = record.key.as_deref() {
                state.remove(&*String::from_utf8_lossy(key));
                return Replayed::Current;
            }
        }
        let Some((queue, stored)) = read(record) else {
            return Replayed::Unreadable;
        };
        match stored {
            Stored::Snapshot {
                floor,
                above,
                delivered,
                counts,
            } => match whole(floor, &above, delivered, &counts) {
                Some(s) => {
                    state.insert(queue, s);
                    Replayed::Current
                }
                None => Replayed::Unreadable,
            },
            Stored::Acked(rs) => match expand(&rs) {
                Some(offsets) => {
                    let s = state.entry(queue).or_default();
                    offsets.into_iter().for_each(|o| s.ack(o));
                    Replayed::Legacy
                }
                None => Replayed::Unreadable,
            },
            Stored::Delivered(mark) => {
                let s = state.entry(queue).or_default();
                s.delivered = s.delivered.max(mark);
                Replayed::Legacy
            }
        }
    }

    fn apply(self, state: &mut Self::State) {
        if self.change == Change::Deleted {
            state.remove(&self.queue);
            return;
        }
        self.change.apply(state.entry(self.queue).or_default());
    }

    fn snapshot(state: &Self::State) -> Vec<Self> {
        state
            .iter()
            .map(|(queue, s)| QueueOp {
                queue: queue.clone(),
                change: Change::Whole(s.clone()),
            })
            .collect()
    }
}

/// A record's value. `Snapshot` (named so by the version that wrote it only on
/// compaction) is the one written today; the deltas are only read.
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
        /// Delivery counts above 1 (absent before share groups).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        counts: Vec<(i64, i16)>,
    },
}

fn read(r: &Record) -> Option<(String, Stored)> {
    let queue = String::from_utf8(r.key.as_deref()?.to_vec()).ok()?;
    let stored: Stored = serde_json::from_slice(r.value.as_deref()?).ok()?;
    Some((queue, stored))
}

/// A queue's state from a stored one; `None` for a corrupt one.
fn whole(
    floor: i64,
    above: &[(i64, i64)],
    delivered: i64,
    counts: &[(i64, i16)],
) -> Option<AckState> {
    Some(AckState {
        floor,
        above: expand(above)?.into_iter().collect(),
        delivered,
        counts: counts.iter().copied().collect(),
    })
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

    fn record(key: &'static [u8], value: &'static [u8]) -> Record {
        Record {
            offset: 0,
            timestamp: 0,
            key: Some(Bytes::from_static(key)),
            value: Some(Bytes::from_static(value)),
            headers: Vec::new(),
        }
    }

    #[test]
    fn states_without_a_delivered_mark_still_read() {
        let r = record(b"q", br#"{"snapshot":{"floor":3,"above":[[5,6]]}}"#);
        let Some(QueueOp {
            queue,
            change: Change::Whole(state),
        }) = QueueOp::decode(&r)
        else {
            panic!("unreadable");
        };
        assert_eq!(queue, "q");
        assert_eq!((state.floor, state.above.len(), state.delivered), (3, 2, 0));
    }

    #[test]
    fn deltas_of_earlier_versions_replay_as_legacy() {
        let mut state = HashMap::new();
        let current = record(
            b"q",
            br#"{"snapshot":{"floor":2,"above":[],"delivered":4}}"#,
        );
        assert_eq!(QueueOp::replay(&current, &mut state), Replayed::Current);
        let acked = record(b"q", br#"{"acked":[[2,3],[6,6]]}"#);
        assert_eq!(QueueOp::replay(&acked, &mut state), Replayed::Legacy);
        let delivered = record(b"q", br#"{"delivered":9}"#);
        assert_eq!(QueueOp::replay(&delivered, &mut state), Replayed::Legacy);
        let s = &state["q"];
        assert_eq!((s.floor, s.delivered), (4, 9));
        assert_eq!(s.above.iter().copied().collect::<Vec<_>>(), vec![6]);
        let junk = record(b"q", b"{}");
        assert_eq!(QueueOp::replay(&junk, &mut state), Replayed::Unreadable);
    }

    fn decoded(r: NewRecord) -> Option<QueueOp> {
        QueueOp::decode(&Record {
            offset: 0,
            timestamp: 0,
            key: r.key,
            value: r.value,
            headers: Vec::new(),
        })
    }

    #[test]
    fn a_state_round_trips() {
        let op = QueueOp {
            queue: "q".into(),
            change: Change::Whole(AckState {
                floor: 5,
                above: [7, 8, 10].into_iter().collect(),
                delivered: 11,
                counts: [(9, 3)].into_iter().collect(),
            }),
        };
        assert_eq!(decoded(op.encode(0)), Some(op));
    }

    /// A change is written as the queue's whole state once it is applied.
    #[test]
    fn a_change_is_written_as_the_whole_state() {
        let before = AckState {
            floor: 2,
            above: [4].into_iter().collect(),
            delivered: 5,
            ..AckState::default()
        };
        let state = HashMap::from([("q".to_string(), before)]);
        let acked = QueueOp {
            queue: "q".into(),
            change: Change::Acked(vec![3, 2, 6]),
        };
        let Some(QueueOp {
            change: Change::Whole(after),
            ..
        }) = decoded(acked.encode_in(&state, 0))
        else {
            panic!("unreadable");
        };
        assert_eq!((after.floor, after.delivered), (5, 5));
        assert_eq!(after.above.into_iter().collect::<Vec<_>>(), vec![6]);
        assert_eq!(state["q"].floor, 2, "the state itself is left alone");
    }

    #[test]
    fn ranges_round_trip() {
        let offs = vec![1, 2, 3, 7, 9, 10];
        let r = ranges(offs.clone());
        assert_eq!(r, vec![(1, 3), (7, 7), (9, 10)]);
        assert_eq!(expand(&r).unwrap(), offs);
    }
}
