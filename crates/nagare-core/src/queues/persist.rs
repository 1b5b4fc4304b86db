//! Records of the queue state log: key = queue name, value = JSON, either a batch of newly
//! acknowledged offsets or a snapshot of the whole state (written when the log is
//! compacted on start). Offsets are stored as inclusive ranges to stay small.

use bytes::Bytes;
use nagare_log::batch::{NewRecord, Record};
use serde::{Deserialize, Serialize};

use super::AckState;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StateOp {
    Acked(Vec<i64>),
    Snapshot(AckState),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Stored {
    Acked(Vec<(i64, i64)>),
    Snapshot { floor: i64, above: Vec<(i64, i64)> },
}

impl StateOp {
    pub fn to_record(&self, queue: &str, timestamp: i64) -> NewRecord {
        let stored = match self {
            StateOp::Acked(offsets) => {
                let mut sorted = offsets.clone();
                sorted.sort_unstable();
                Stored::Acked(ranges(sorted))
            }
            StateOp::Snapshot(s) => Stored::Snapshot {
                floor: s.floor,
                above: ranges(s.above.iter().copied()),
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
    pub fn from_record(r: &Record) -> Option<(String, StateOp)> {
        let queue = String::from_utf8(r.key.as_deref()?.to_vec()).ok()?;
        let stored: Stored = serde_json::from_slice(r.value.as_deref()?).ok()?;
        let op = match stored {
            Stored::Acked(rs) => StateOp::Acked(expand(&rs)?),
            Stored::Snapshot { floor, above } => StateOp::Snapshot(AckState {
                floor,
                above: expand(&above)?.into_iter().collect(),
            }),
        };
        Some((queue, op))
    }

    pub fn apply(self, state: &mut AckState) {
        match self {
            StateOp::Acked(offsets) => offsets.into_iter().for_each(|o| state.ack(o)),
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
    fn ranges_round_trip() {
        let offs = vec![1, 2, 3, 7, 9, 10];
        let r = ranges(offs.clone());
        assert_eq!(r, vec![(1, 3), (7, 7), (9, 10)]);
        assert_eq!(expand(&r).unwrap(), offs);
    }
}
