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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::internal_log::{test_support, InternalLog};
    use crate::transactions::TxnState;

    fn meta(epoch: i16) -> TxnMetadata {
        TxnMetadata {
            producer_id: 5,
            last_producer_id: -1,
            producer_epoch: epoch,
            last_producer_epoch: -1,
            timeout_ms: 60_000,
            state: TxnState::CompleteCommit,
            partitions: Default::default(),
            groups: Default::default(),
            offsets: Vec::new(),
            start_ms: 1,
            last_update_ms: 2,
        }
    }

    /// The transactions log keeps its state through the cleaner: the last metadata of
    /// each id, and nothing of an expired one.
    #[tokio::test]
    async fn transactions_survive_a_clean_and_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::BrokerConfig {
            data_dir: dir.path().to_path_buf(),
            ..Default::default()
        };
        {
            let broker = crate::Broker::open(config.clone()).unwrap();
            let (log, _, writer) = InternalLog::<TxnOp>::open(&broker, TRANSACTIONS_LOG).unwrap();
            let task = tokio::spawn(writer.run());
            for epoch in 0..3 {
                for id in ["a", "b"] {
                    let put = TxnOp::Put {
                        id: id.into(),
                        meta: meta(epoch),
                    };
                    log.push([put], false).stored().await.unwrap();
                }
            }
            let gone = TxnOp::Remove { id: "b".into() };
            log.push([gone], true).stored().await.unwrap();
            drop(log);
            task.await.unwrap();
            test_support::clean_now(&broker, TRANSACTIONS_LOG);
            // a's last metadata, b's tombstone (dropped by a later clean).
            assert_eq!(test_support::records(&broker, TRANSACTIONS_LOG).len(), 2);
            broker.shutdown().unwrap();
        }
        let broker = crate::Broker::open(config).unwrap();
        let (_log, state, _writer) = InternalLog::<TxnOp>::open(&broker, TRANSACTIONS_LOG).unwrap();
        assert_eq!(state.len(), 1);
        assert_eq!(state["a"].producer_epoch, 2);
    }
}
