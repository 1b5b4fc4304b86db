//! Records of the share-group log (`__nagare_share_groups-0`): key = group id, value =
//! JSON of the group's config overrides (a group that exists has a record, maybe with no
//! overrides), a null value deleting the group. What a share group has delivered and
//! acknowledged is not here: it is the queue state of each of its share partitions, in
//! the queue log (`queues/persist.rs`).

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use nagare_log::batch::{NewRecord, Record};
use serde::{Deserialize, Serialize};

use crate::internal_log::InternalOp;

/// The internal log's name.
pub(super) const STATE_LOG: &str = "share_groups";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupOp {
    pub group: String,
    /// `None`: the group was deleted.
    pub overrides: Option<BTreeMap<String, String>>,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    configs: BTreeMap<String, String>,
}

impl InternalOp for GroupOp {
    type State = HashMap<String, BTreeMap<String, String>>;
    const COMPACT_MIN_RECORDS: i64 = 1_000;

    fn key(&self) -> Bytes {
        Bytes::copy_from_slice(self.group.as_bytes())
    }

    fn encode(&self, timestamp: i64) -> NewRecord {
        let value = self.overrides.as_ref().and_then(|c| {
            serde_json::to_vec(&Stored { configs: c.clone() })
                .ok()
                .map(Bytes::from)
        });
        NewRecord {
            key: Some(self.key()),
            value,
            headers: Vec::new(),
            timestamp,
        }
    }

    fn decode(record: &Record) -> Option<Self> {
        let group = String::from_utf8(record.key.as_deref()?.to_vec()).ok()?;
        let overrides = match record.value.as_deref() {
            None => None,
            Some(v) => Some(serde_json::from_slice::<Stored>(v).ok()?.configs),
        };
        Some(GroupOp { group, overrides })
    }

    fn apply(self, state: &mut Self::State) {
        match self.overrides {
            Some(c) => {
                state.insert(self.group, c);
            }
            None => {
                state.remove(&self.group);
            }
        }
    }

    fn snapshot(state: &Self::State) -> Vec<Self> {
        state
            .iter()
            .map(|(g, c)| GroupOp {
                group: g.clone(),
                overrides: Some(c.clone()),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_and_its_deletion_round_trip() {
        let op = GroupOp {
            group: "g".into(),
            overrides: Some(BTreeMap::from([(
                "share.auto.offset.reset".to_string(),
                "earliest".to_string(),
            )])),
        };
        let r = op.encode(0);
        let back = GroupOp::decode(&Record {
            offset: 0,
            timestamp: 0,
            key: r.key,
            value: r.value,
            headers: Vec::new(),
        });
        assert_eq!(back, Some(op));
        let gone = GroupOp {
            group: "g".into(),
            overrides: None,
        }
        .encode(0);
        assert!(gone.value.is_none());
    }
}
