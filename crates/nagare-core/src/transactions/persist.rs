//! How transaction state is kept in the internal `transactions` log: one record per
//! stored transition, keyed by the transactional id, the value being the whole metadata
//! (JSON) or a tombstone (no value) when the id expires. Replaying keeps the last value
//! per key, which is also what the log cleaner keeps.

use std::collections::BTreeMap;

use bytes::Bytes;
use nagare_log::batch::{NewRecord, Record};

use super::TxnMetadata;
use crate::internal_log::InternalOp;

/// The internal log (`DATA/__nagare_transactions-0`).
pub const TRANSACTIONS_LOG: &str = "transactions";

/// One stored change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnOp {
    Put { id: String, meta: TxnMetadata },
    Remove { id: String },
}

/// The state the log replays to: the metadata of every transactional id.
pub type StoredTransactions = BTreeMap<String, TxnMetadata>;

impl InternalOp for TxnOp {
    type State = StoredTransactions;

    fn key(&self) -> Bytes {
        let (TxnOp::Put { id, .. } | TxnOp::Remove { id }) = self;
        Bytes::copy_from_slice(id.as_bytes())
    }

    fn encode(&self, timestamp: i64) -> NewRecord {
        let value = match self {
            TxnOp::Put { meta, .. } => serde_json::to_vec(meta).ok().map(Bytes::from),
            TxnOp::Remove { .. } => None,
        };
        NewRecord {
            key: Some(self.key()),
            value,
            headers: Vec::new(),
            timestamp,
        }
    }

    fn decode(record: &Record) -> Option<Self> {
        let id = String::from_utf8(record.key.as_deref()?.to_vec()).ok()?;
        match record.value.as_deref() {
            None => Some(TxnOp::Remove { id }),
            Some(v) => Some(TxnOp::Put {
                id,
                meta: serde_json::from_slice(v).ok()?,
            }),
        }
    }

    fn apply(self, state: &mut StoredTransactions) {
        match self {
            TxnOp::Put { id, meta } => {
                state.insert(id, meta);
            }
            TxnOp::Remove { id } => {
                state.remove(&id);
            }
        }
    }

    fn snapshot(state: &StoredTransactions) -> Vec<Self> {
        state
            .iter()
            .map(|(id, meta)| TxnOp::Put {
                id: id.clone(),
                meta: meta.clone(),
            })
            .collect()
    }
}
