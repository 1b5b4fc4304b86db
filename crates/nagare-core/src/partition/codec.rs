//! The topic settings a partition applies live, changed by AlterConfigs without reopening
//! the log: `compression.type` on append (a batch in another codec is re-encoded before
//! it reaches the log, as Kafka does, whichever front end sent it; `producer`, the
//! default, keeps batches as they come and costs nothing), the retention limits, and the
//! segment settings (`segment.bytes`, `segment.ms`, `index.interval.bytes`).

use bytes::BytesMut;
use nagare_log::batch::Compression;
use nagare_log::recompress::{recompress, stamp_log_append_time, TargetCodec};
use parking_lot::RwLock;

use super::Partition;
use crate::{CompressionType, CoreError, TimestampType, TopicConfig};

/// The codec a partition stores batches with (`None` keeps the producer's), and its
/// retention limits (`None` until set: the log's own, from when it was opened).
#[derive(Default)]
pub(super) struct TopicCodec {
    codec: RwLock<Option<TargetCodec>>,
    retention: RwLock<Option<RetentionLimits>>,
    /// `message.timestamp.type=LogAppendTime`.
    log_append_time: std::sync::atomic::AtomicBool,
}

#[derive(Clone, Copy)]
struct RetentionLimits {
    age: Option<std::time::Duration>,
    bytes: Option<u64>,
}

/// The log's codec and level for a topic's settings.
fn target(config: &TopicConfig) -> Option<TargetCodec> {
    let (codec, level) = match config.compression_type {
        CompressionType::Producer => return None,
        CompressionType::Uncompressed => (Compression::None, 0),
        CompressionType::Gzip => (Compression::Gzip, config.compression_gzip_level),
        CompressionType::Snappy => (Compression::Snappy, 0),
        CompressionType::Lz4 => (Compression::Lz4, config.compression_lz4_level),
        CompressionType::Zstd => (Compression::Zstd, config.compression_zstd_level),
    };
    Some(TargetCodec { codec, level })
}

impl Partition {
    /// Takes the topic's `compression.type` and retention limits (at open and on every
    /// config change).
    pub(crate) fn set_codec(&self, config: &TopicConfig) {
        *self.codec.codec.write() = target(config);
        self.codec.log_append_time.store(
            config.message_timestamp_type == TimestampType::LogAppendTime,
            std::sync::atomic::Ordering::Relaxed,
        );
        let log = config.log_config();
        // Segment size/age and index interval: from the next append / roll, as Kafka.
        if let Some(l) = self.log() {
            l.set_roll_settings(log.segment_bytes, log.segment_age, log.index_interval_bytes);
        }
        *self.codec.retention.write() = Some(RetentionLimits {
            age: log.retention,
            bytes: log.retention_bytes,
        });
    }

    /// Deletes whole old segments past the topic's current retention limits; returns
    /// how many. Blocking (deletes files): maintenance runs it on the blocking pool.
    pub(crate) fn apply_retention(&self, now_ms: i64) -> Result<usize, nagare_log::LogError> {
        let Some(log) = self.log() else {
            return Ok(0);
        };
        match *self.codec.retention.read() {
            Some(r) => log.apply_retention_limits(now_ms, r.age, r.bytes),
            None => log.apply_retention(now_ms),
        }
    }

    /// The batch as it is to be stored: re-encoded when the topic names another codec.
    /// With `LogAppendTime`, the batch is stamped with the broker's clock too.
    pub(super) fn apply_topic_codec(&self, batch: BytesMut) -> Result<BytesMut, CoreError> {
        let target = *self.codec.codec.read();
        let mut batch = match target.map(|t| recompress(&batch, t)) {
            None | Some(Ok(None)) => batch,
            Some(Ok(Some(rewritten))) => rewritten,
            Some(Err(e)) => return Err(CoreError::Log(e.into())),
        };
        if self
            .codec
            .log_append_time
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            stamp_log_append_time(&mut batch, nagare_log::now_ms())
                .map_err(|e| CoreError::Log(e.into()))?;
        }
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use crate::{AckLevel, Broker, BrokerConfig, TopicConfig};
    use nagare_log::batch::NewRecord;

    #[tokio::test]
    async fn retention_and_codec_follow_config_changes() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(BrokerConfig {
            data_dir: dir.path().to_path_buf(),
            ..BrokerConfig::default()
        })
        .unwrap();
        let mut config = TopicConfig::default();
        config.set("segment.bytes", "1024").unwrap();
        let t = broker.create_topic("t", Some(1), config.clone()).unwrap();
        let p = t.partition(0).unwrap();
        for i in 0..40 {
            let r = NewRecord {
                key: None,
                value: Some(vec![b'x'; 100].into()),
                headers: vec![],
                timestamp: 1_000 + i,
            };
            p.append_records(&[r], AckLevel::Leader).await.unwrap();
        }
        assert!(p.segment_count() > 2);
        // A week of retention keeps records stamped long ago only while it applies...
        assert_eq!(p.apply_retention(1_000).unwrap(), 0);
        config.set("retention.ms", "10").unwrap();
        config.set("compression.type", "zstd").unwrap();
        config
            .set("message.timestamp.type", "LogAppendTime")
            .unwrap();
        broker.update_topic_config("t", config).unwrap();
        // ...and the new limit applies without reopening the log.
        assert!(p.apply_retention(nagare_log::now_ms()).unwrap() > 0);
        let r = NewRecord {
            key: None,
            value: Some(vec![b'y'; 100].into()),
            headers: vec![],
            timestamp: 5,
        };
        let info = p.append_records(&[r], AckLevel::Leader).await.unwrap();
        let batches = p
            .log()
            .unwrap()
            .read_batches(info.base_offset, 1 << 20)
            .unwrap();
        let header = nagare_log::batch::parse_header(&batches[0]).unwrap();
        assert_eq!(
            header.compression().unwrap(),
            nagare_log::batch::Compression::Zstd
        );
        assert!(header.is_log_append_time() && header.max_timestamp > 5);
    }
}
