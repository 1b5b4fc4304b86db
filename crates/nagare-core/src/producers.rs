//! Idempotent producer ids: InitProducerId hands out ids and epochs, persisted in the
//! internal log `producers` and replayed on open. The sequence numbers of each producer's
//! batches are checked where batches are appended, by the partition (see
//! `partition/sequence.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use nagare_log::batch::NewRecord;
use thiserror::Error;

use crate::{AckLevel, Broker, CoreError, Partition};

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

/// Producer ids and their current epochs.
pub struct Producers {
    log: Arc<Partition>,
    /// Next producer id to hand out, and the current epoch of every id handed out.
    ids: tokio::sync::Mutex<(i64, HashMap<i64, i16>)>,
}

impl Producers {
    /// Opens the internal `producers` log and replays the id allocations in it.
    pub fn open(broker: &Broker) -> Result<Producers, CoreError> {
        let log = broker.internal_log("producers")?;
        let mut next = 0i64;
        let mut epochs = HashMap::new();
        crate::blocking::off_runtime(|| {
            log.replay_records(|r| {
                if let Some((id, epoch)) = r.value.as_deref().and_then(parse_allocation) {
                    next = next.max(id + 1);
                    epochs.insert(id, epoch);
                }
                Ok(())
            })
        })?;
        tracing::info!(
            producers = epochs.len(),
            next_id = next,
            "producer ids replayed"
        );
        Ok(Producers {
            log,
            ids: tokio::sync::Mutex::new((next, epochs)),
        })
    }

    /// Kafka InitProducerId for an idempotent producer: a new id at epoch 0, or, when the
    /// producer gives its current id and epoch, the same id with the epoch bumped (which
    /// fences anything still sending with the old epoch). Persisted before returning.
    pub async fn init_producer_id(
        &self,
        current: Option<(i64, i16)>,
    ) -> Result<(i64, i16), ProduceError> {
        let mut ids = self.ids.lock().await;
        let (id, epoch) = match current {
            Some((id, epoch)) => match ids.1.get(&id) {
                Some(&known) if known == epoch => {
                    if epoch >= i16::MAX - 1 {
                        (ids.0, 0)
                    } else {
                        (id, epoch + 1)
                    }
                }
                Some(&known) if epoch < known => {
                    return Err(ProduceError::InvalidProducerEpoch {
                        producer_id: id,
                        got: epoch,
                        current: known,
                    })
                }
                _ => return Err(ProduceError::UnknownProducerId(id)),
            },
            None => (ids.0, 0),
        };
        let record = NewRecord {
            key: Some(Bytes::from_static(b"producer")),
            value: Some(Bytes::from(format!("{id}:{epoch}"))),
            headers: Vec::new(),
            timestamp: now_ms(),
        };
        self.log
            .append_records(&[record], AckLevel::Durable)
            .await?;
        ids.0 = ids.0.max(id + 1);
        ids.1.insert(id, epoch);
        Ok((id, epoch))
    }
}

fn parse_allocation(v: &[u8]) -> Option<(i64, i16)> {
    let s = std::str::from_utf8(v).ok()?;
    let (id, epoch) = s.split_once(':')?;
    Some((id.parse().ok()?, epoch.parse().ok()?))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_records_parse() {
        assert_eq!(parse_allocation(b"42:3"), Some((42, 3)));
        assert_eq!(parse_allocation(b"x"), None);
    }
}
