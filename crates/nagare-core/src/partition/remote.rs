//! A partition of an external cluster (cluster mode): appends go to the cluster through
//! its [`RemoteLog`] and return once the cluster has acknowledged them, so there is no
//! fsync to wait for afterwards; the size limit is checked here as for the embedded log,
//! so every front end quotes the same number.

use std::sync::Arc;

use bytes::BytesMut;
use nagare_log::batch::{build_batch, decode_records, parse_header, NewRecord};
use nagare_log::AppendInfo;
use parking_lot::RwLock;
use tokio::sync::watch;

use super::{append, codec, sequence, Partition, Store};
use crate::store::{new_record, RemoteLog};
use crate::traffic::TrafficMeter;
use crate::{CoreError, TopicFlush};

/// Bytes of a record batch's header.
const BATCH_OVERHEAD: usize = 61;

impl Partition {
    /// A partition of `topic` in an external cluster.
    pub(crate) fn remote(
        topic: Arc<str>,
        index: i32,
        remote: Arc<dyn RemoteLog>,
        max_message_bytes: u32,
        meter: TrafficMeter,
    ) -> Partition {
        let (end_offset, _) = watch::channel(0);
        let (stable_offset, _) = watch::channel(0);
        Partition {
            topic,
            index,
            store: Store::Remote(remote),
            flush: RwLock::new(TopicFlush::Acks),
            max_message_bytes: RwLock::new(max_message_bytes),
            end_offset,
            stable_offset,
            appends: append::AppendQueue::default(),
            syncer: Default::default(),
            producers: sequence::ProducerStates::default(),
            meter,
            codec: codec::TopicCodec::default(),
            compacted: Default::default(),
        }
    }

    pub(super) async fn append_records_remote(
        &self,
        remote: &Arc<dyn RemoteLog>,
        records: &[NewRecord],
    ) -> Result<AppendInfo, CoreError> {
        let limit = self.max_message_bytes() as usize;
        let mut size = BATCH_OVERHEAD + records.iter().map(record_bound).sum::<usize>();
        if size > limit {
            // The bound is loose; the exact size decides, as it does for the embedded log.
            size = build_batch(records).len();
            if size > limit {
                return Err(CoreError::MessageTooLarge { size, limit });
            }
        }
        let info = remote.append(records).await?;
        self.meter.count_in(records.len() as u64, size as u64);
        Ok(info)
    }

    /// The batches of a produce request, each appended as its records. Producer ids and
    /// sequences of the batches are the sender's with the gateway, not with the cluster:
    /// the gateway's own idempotent producer makes the cluster's writes exactly-once.
    pub(super) async fn append_batches_remote(
        &self,
        remote: &Arc<dyn RemoteLog>,
        batches: Vec<BytesMut>,
    ) -> Vec<Result<AppendInfo, CoreError>> {
        let limit = self.max_message_bytes() as usize;
        let mut decoded = Vec::with_capacity(batches.len());
        let mut refused = None;
        for batch in &batches {
            if batch.len() > limit {
                refused = Some(CoreError::MessageTooLarge {
                    size: batch.len(),
                    limit,
                });
                break;
            }
            match parse_header(batch) {
                Ok(h) if h.is_transactional() || h.is_control() => {
                    refused = Some(CoreError::ClusterMode("transactions through a gateway"));
                    break;
                }
                Ok(_) => {}
                Err(e) => {
                    refused = Some(CoreError::Log(e.into()));
                    break;
                }
            }
            match decode_records(batch) {
                Ok(records) => decoded.push((
                    records.into_iter().map(new_record).collect::<Vec<_>>(),
                    batch.len(),
                )),
                Err(e) => {
                    refused = Some(CoreError::Log(e.into()));
                    break;
                }
            }
        }
        if let Some(e) = refused {
            // A request is validated as a whole, as by the embedded log.
            return batches.iter().map(|_| Err(e.same())).collect();
        }
        let mut answers = Vec::with_capacity(decoded.len());
        for (records, bytes) in decoded {
            let answer = remote.append(&records).await;
            if answer.is_ok() {
                self.meter.count_in(records.len() as u64, bytes as u64);
            }
            answers.push(answer);
        }
        answers
    }
}

/// The most bytes `r` can take inside a batch: every varint counted at its widest.
fn record_bound(r: &NewRecord) -> usize {
    40 + r.key.as_ref().map_or(0, |k| k.len())
        + r.value.as_ref().map_or(0, |v| v.len())
        + r.headers
            .iter()
            .map(|(k, v)| 10 + k.len() + v.as_ref().map_or(0, |v| v.len()))
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn the_bound_covers_the_encoded_size() {
        let records = vec![
            NewRecord::default(),
            NewRecord {
                key: Some(Bytes::from_static(b"key")),
                value: Some(Bytes::from(vec![1u8; 70_000])),
                headers: vec![
                    ("h".into(), Some(Bytes::from_static(b"v"))),
                    ("n".into(), None),
                ],
                timestamp: i64::MAX,
            },
        ];
        let bound = BATCH_OVERHEAD + records.iter().map(record_bound).sum::<usize>();
        assert!(build_batch(&records).len() <= bound);
    }
}
