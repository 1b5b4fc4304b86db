//! Idempotent producer ids: InitProducerId hands out ids and epochs, kept in the internal
//! log `producers`: one record `id:epoch` per allocation, keyed by the id, so the log
//! cleaner keeps each id's current epoch, and the next id is the largest kept + 1 (ids
//! are never deleted). Earlier versions keyed every record `producer`; such a log is
//! rewritten once on open (see `internal_log.rs`). The sequence
//! numbers of each producer's batches are checked where batches are appended, by the
//! partition (see `partition/sequence.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use nagare_log::batch::{NewRecord, Record};
use parking_lot::Mutex;
use thiserror::Error;

use crate::internal_log::{InternalLog, InternalLogWriter, InternalOp, Replayed};
use crate::{Broker, CoreError};

/// The internal log holding the allocations (`DATA/__nagare_producers-0`).
pub const PRODUCERS_LOG: &str = "producers";
/// The one key earlier versions gave every allocation.
const LEGACY_KEY: &[u8] = b"producer";

#[derive(Debug, Error)]
pub enum ProduceError {
    /// InitProducerId with an epoch older than the producer's current one.
    #[error("producer {producer_id} epoch {got} is older than {current}")]
    InvalidProducerEpoch {
        producer_id: i64,
        got: i16,
        current: i16,
    },
    /// InitProducerId with an id/epoch pair that is not the current one.
    #[error("unknown producer id {0}")]
    UnknownProducerId(i64),
    #[error(transparent)]
    Core(#[from] CoreError),
}

/// One allocation: producer `id` now has epoch `epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    pub id: i64,
    pub epoch: i16,
}

/// The next id to hand out and the current epoch of every id handed out.
#[derive(Debug, Clone, Default)]
pub struct ProducerIds {
    next: i64,
    epochs: HashMap<i64, i16>,
}

impl InternalOp for Allocation {
    type State = ProducerIds;

    fn key(&self) -> Bytes {
        Bytes::from(self.id.to_string())
    }

    fn encode(&self, timestamp: i64) -> NewRecord {
        NewRecord {
            key: Some(self.key()),
            value: Some(Bytes::from(format!("{}:{}", self.id, self.epoch))),
            headers: Vec::new(),
            timestamp,
        }
    }

    fn decode(record: &Record) -> Option<Self> {
        let (id, epoch) = parse_allocation(record.value.as_deref()?)?;
        Some(Allocation { id, epoch })
    }

    fn replay(record: &Record, state: &mut ProducerIds) -> Replayed {
        let Some(op) = Self::decode(record) else {
            return Replayed::Unreadable;
        };
        op.apply(state);
        if record.key.as_deref() == Some(LEGACY_KEY) {
            Replayed::Legacy
        } else {
            Replayed::Current
        }
    }

    fn apply(self, state: &mut ProducerIds) {
        state.next = state.next.max(self.id + 1);
        state.epochs.insert(self.id, self.epoch);
    }

    fn snapshot(state: &ProducerIds) -> Vec<Self> {
        state
            .epochs
            .iter()
            .map(|(&id, &epoch)| Allocation { id, epoch })
            .collect()
    }
}

/// Producer ids and their current epochs.
pub struct Producers {
    log: Arc<InternalLog<Allocation>>,
    ids: Mutex<ProducerIds>,
}

impl Producers {
    /// Opens the internal `producers` log and replays the allocations in it. Blocking.
    /// The writer must be run for InitProducerId to complete.
    pub fn open(broker: &Broker) -> Result<(Producers, InternalLogWriter<Allocation>), CoreError> {
        let (log, ids, writer) = InternalLog::<Allocation>::open(broker, PRODUCERS_LOG)?;
        tracing::info!(
            producers = ids.epochs.len(),
            next_id = ids.next,
            "producer ids replayed"
        );
        let producers = Producers {
            log,
            ids: Mutex::new(ids),
        };
        Ok((producers, writer))
    }

    /// Kafka InitProducerId for an idempotent producer: a new id at epoch 0, or, when the
    /// producer gives its current id and epoch, the same id with the epoch bumped (which
    /// fences anything still sending with the old epoch). Stored (fsynced) before
    /// returning; concurrent calls share the fsync.
    pub async fn init_producer_id(
        &self,
        current: Option<(i64, i16)>,
    ) -> Result<(i64, i16), ProduceError> {
        self.log.reserve().await;
        let (allocation, stored) = {
            let mut ids = self.ids.lock();
            let allocation = decide(&ids, current)?;
            allocation.apply(&mut ids);
            // Pushed under the lock: the log sees allocations in the order they were made.
            (allocation, self.log.push([allocation], true))
        };
        stored.stored().await?;
        Ok((allocation.id, allocation.epoch))
    }
}

fn decide(ids: &ProducerIds, current: Option<(i64, i16)>) -> Result<Allocation, ProduceError> {
    let fresh = Allocation {
        id: ids.next,
        epoch: 0,
    };
    let Some((id, epoch)) = current else {
        return Ok(fresh);
    };
    match ids.epochs.get(&id) {
        Some(&known) if known == epoch => Ok(if epoch >= i16::MAX - 1 {
            fresh
        } else {
            Allocation {
                id,
                epoch: epoch + 1,
            }
        }),
        Some(&known) if epoch < known => Err(ProduceError::InvalidProducerEpoch {
            producer_id: id,
            got: epoch,
            current: known,
        }),
        _ => Err(ProduceError::UnknownProducerId(id)),
    }
}

fn parse_allocation(v: &[u8]) -> Option<(i64, i16)> {
    let s = std::str::from_utf8(v).ok()?;
    let (id, epoch) = s.split_once(':')?;
    Some((id.parse().ok()?, epoch.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::internal_log::test_support;

    #[test]
    fn allocation_records_parse() {
        assert_eq!(parse_allocation(b"42:3"), Some((42, 3)));
        assert_eq!(parse_allocation(b"x"), None);
    }

    #[test]
    fn epochs_bump_and_fence() {
        let mut ids = ProducerIds::default();
        let a = decide(&ids, None).ok().unwrap();
        assert_eq!((a.id, a.epoch), (0, 0));
        a.apply(&mut ids);
        let b = decide(&ids, Some((0, 0))).ok().unwrap();
        assert_eq!((b.id, b.epoch), (0, 1));
        b.apply(&mut ids);
        assert!(matches!(
            decide(&ids, Some((0, 0))),
            Err(ProduceError::InvalidProducerEpoch { .. })
        ));
        assert!(matches!(
            decide(&ids, Some((7, 0))),
            Err(ProduceError::UnknownProducerId(7))
        ));
        assert_eq!(decide(&ids, None).ok().map(|a| a.id), Some(1));
    }

    fn broker(dir: &std::path::Path) -> Arc<Broker> {
        Broker::open(crate::BrokerConfig {
            data_dir: dir.to_path_buf(),
            ..crate::BrokerConfig::default()
        })
        .unwrap()
    }

    /// Opens the producers, runs `f` with the writer running, waits for it to end.
    async fn with_producers<F, Fut>(dir: &std::path::Path, f: F)
    where
        F: FnOnce(Arc<Producers>) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let b = broker(dir);
        let (p, writer) = Producers::open(&b).unwrap();
        let task = tokio::spawn(writer.run());
        let p = Arc::new(p);
        f(p.clone()).await;
        p.log.flush().await.unwrap();
        drop(p);
        task.await.unwrap();
    }

    #[tokio::test]
    async fn ids_and_epochs_survive_a_clean_and_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        with_producers(dir.path(), |p| async move {
            assert_eq!(p.init_producer_id(None).await.unwrap(), (0, 0));
            assert_eq!(p.init_producer_id(None).await.unwrap(), (1, 0));
            assert_eq!(p.init_producer_id(Some((0, 0))).await.unwrap(), (0, 1));
        })
        .await;
        let b = broker(dir.path());
        test_support::clean_now(&b, PRODUCERS_LOG);
        assert_eq!(
            test_support::records(&b, PRODUCERS_LOG).len(),
            2,
            "one per id"
        );
        drop(b);
        with_producers(dir.path(), |p| async move {
            assert_eq!(p.init_producer_id(None).await.unwrap(), (2, 0));
            assert_eq!(p.init_producer_id(Some((0, 1))).await.unwrap(), (0, 2));
            assert!(p.init_producer_id(Some((0, 0))).await.is_err(), "fenced");
        })
        .await;
    }

    #[tokio::test]
    async fn a_log_of_one_key_is_rewritten_by_id() {
        let dir = tempfile::tempdir().unwrap();
        {
            let b = broker(dir.path());
            let old =
                ["0:0", "1:0", "0:1", "2:0", "0:2"].map(|v| test_support::raw("producer", Some(v)));
            test_support::append_raw(&b, PRODUCERS_LOG, old.to_vec());
        }
        with_producers(dir.path(), |p| async move {
            assert_eq!(p.ids.lock().next, 3);
            assert_eq!(p.init_producer_id(Some((0, 2))).await.unwrap(), (0, 3));
        })
        .await;
        let b = broker(dir.path());
        let records = test_support::records(&b, PRODUCERS_LOG);
        assert!(records.iter().all(|r| r.key.as_deref() != Some(LEGACY_KEY)));
        // The cleaner alone keeps the state now.
        test_support::clean_now(&b, PRODUCERS_LOG);
        drop(b);
        with_producers(dir.path(), |p| async move {
            assert_eq!(p.init_producer_id(None).await.unwrap(), (3, 0));
            assert_eq!(p.init_producer_id(Some((2, 0))).await.unwrap(), (2, 1));
            assert_eq!(p.init_producer_id(Some((0, 3))).await.unwrap(), (0, 4));
        })
        .await;
    }
}
