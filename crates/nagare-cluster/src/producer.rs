//! The gateway's one producer: idempotent with `acks=all`, shared by every front end
//! and partition. An append hands all its records to librdkafka first (which batches
//! them with everything else being sent), then waits for each one's acknowledgement: it
//! returns only once the cluster has every record, and librdkafka's retries of a record
//! are never stored twice.
//!
//! While the cluster is known to be unreachable an append fails at once; otherwise it
//! waits at most `message.timeout.ms` (librdkafka's bound on a record's delivery).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nagare_core::log::batch::NewRecord;
use nagare_core::log::AppendInfo;
use nagare_core::CoreError;
use parking_lot::RwLock;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer as _};
use rdkafka::ClientConfig;

use crate::context::Context;
use crate::error::{core_error, ClusterError};
use crate::health::Health;

/// How long an append waits for room in librdkafka's queue before it gives up.
const QUEUE_WAIT: Duration = Duration::from_secs(5);

pub(crate) struct Producer {
    config: ClientConfig,
    health: Arc<Health>,
    /// Replaced after a fatal error (the old one cannot send any more).
    inner: RwLock<(FutureProducer<Context>, Context)>,
}

impl Producer {
    pub(crate) fn new(config: ClientConfig, health: Arc<Health>) -> Result<Producer, ClusterError> {
        let inner = make(&config, &health)?;
        Ok(Producer {
            config,
            health,
            inner: RwLock::new(inner),
        })
    }

    /// The current producer, made anew first if the last one failed for good.
    fn current(&self) -> Result<FutureProducer<Context>, CoreError> {
        {
            let inner = self.inner.read();
            if !inner.1.fatal.load(Ordering::SeqCst) {
                return Ok(inner.0.clone());
            }
        }
        let mut inner = self.inner.write();
        if inner.1.fatal.load(Ordering::SeqCst) {
            tracing::warn!("the producer failed for good; starting a new one");
            *inner = make(&self.config, &self.health)
                .map_err(|e| CoreError::Unavailable(e.to_string()))?;
        }
        Ok(inner.0.clone())
    }

    /// Sends `records` in order to `topic` (`partition`, or the partitioner's choice) and
    /// returns where the first and last landed, once the cluster has all of them.
    pub(crate) async fn send(
        &self,
        topic: &str,
        partition: Option<i32>,
        records: &[NewRecord],
    ) -> Result<AppendInfo, CoreError> {
        self.health.check().map_err(CoreError::Unavailable)?;
        let producer = self.current()?;
        let mut pending = Vec::with_capacity(records.len());
        let mut max_timestamp = -1;
        for r in records {
            max_timestamp = max_timestamp.max(r.timestamp);
            let mut headers = OwnedHeaders::new_with_capacity(r.headers.len());
            for (k, v) in &r.headers {
                headers = headers.insert(Header {
                    key: k.as_str(),
                    value: v.as_deref(),
                });
            }
            let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic)
                .timestamp(r.timestamp)
                .headers(headers);
            if let Some(p) = partition {
                record = record.partition(p);
            }
            if let Some(k) = &r.key {
                record = record.key(&k[..]);
            }
            if let Some(v) = &r.value {
                record = record.payload(&v[..]);
            }
            let queued_at = Instant::now();
            loop {
                match producer.send_result(record) {
                    Ok(delivery) => {
                        pending.push(delivery);
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back))
                        if queued_at.elapsed() < QUEUE_WAIT =>
                    {
                        // librdkafka's queue is full: wait for it to drain.
                        record = back;
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    Err((e, _)) => return Err(core_error(topic, &e)),
                }
            }
        }
        let mut info = AppendInfo {
            base_offset: -1,
            last_offset: -1,
            max_timestamp,
            record_count: u32::try_from(records.len()).unwrap_or(u32::MAX),
        };
        for delivery in pending {
            match delivery.await {
                Ok(Ok(d)) => {
                    if info.base_offset < 0 {
                        info.base_offset = d.offset;
                    }
                    info.last_offset = d.offset;
                }
                Ok(Err((e, _))) => return Err(core_error(topic, &e)),
                Err(_) => return Err(CoreError::Unavailable("the producer stopped".into())),
            }
        }
        Ok(info)
    }

    /// Waits up to `timeout` for everything queued to be acknowledged (at shutdown).
    pub(crate) fn flush(&self, timeout: Duration) {
        let producer = self.inner.read().0.clone();
        if let Err(e) = producer.flush(timeout) {
            tracing::warn!(error = %e, "records still unacknowledged at shutdown");
        }
    }
}

fn make(
    config: &ClientConfig,
    health: &Arc<Health>,
) -> Result<(FutureProducer<Context>, Context), ClusterError> {
    let context = Context::new(health, "producer");
    let producer = config.create_with_context(context.clone())?;
    Ok((producer, context))
}
