//! Kafka DeleteRecords: moving a partition's log start forward on request.

use nagare_log::LogError;

use super::Partition;
use crate::blocking::off_runtime;
use crate::CoreError;

impl Partition {
    /// Makes `offset` the first readable offset (-1: the high watermark), deleting the
    /// whole segments before it; returns the new low watermark. An offset past the high
    /// watermark, or negative, is out of range; one below the log start changes nothing.
    /// Blocking: deletes files (safe to call from async code, see `off_runtime`).
    pub fn delete_records_before(&self, offset: i64) -> Result<i64, CoreError> {
        let Some(log) = self.log() else {
            return Err(CoreError::ClusterMode("deleting records through a gateway"));
        };
        let high = self.high_watermark();
        let target = if offset == -1 { high } else { offset };
        if target < 0 || target > high {
            return Err(CoreError::Log(LogError::OffsetOutOfRange {
                offset,
                start: self.log_start_offset(),
                end: high,
            }));
        }
        off_runtime(|| log.delete_records_before(target)).map_err(|e| self.core_error(e))?;
        self.publish_end_offset();
        Ok(self.log_start_offset())
    }
}

#[cfg(test)]
mod tests {
    use crate::{AckLevel, Broker, BrokerConfig, TopicConfig};
    use nagare_log::batch::NewRecord;

    #[tokio::test]
    async fn moves_the_low_watermark() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(BrokerConfig {
            data_dir: dir.path().to_path_buf(),
            ..BrokerConfig::default()
        })
        .unwrap();
        let t = broker
            .create_topic("t", Some(1), TopicConfig::default())
            .unwrap();
        let p = t.partition(0).unwrap();
        for i in 0..5 {
            let r = NewRecord {
                key: None,
                value: Some(format!("v{i}").into_bytes().into()),
                headers: vec![],
                timestamp: 1,
            };
            p.append_records(&[r], AckLevel::Leader).await.unwrap();
        }
        assert_eq!(p.delete_records_before(3).unwrap(), 3);
        assert_eq!(p.log_start_offset(), 3);
        assert!(p.delete_records_before(9).is_err());
        assert!(p.delete_records_before(-7).is_err());
        assert_eq!(p.delete_records_before(1).unwrap(), 3);
        assert_eq!(p.delete_records_before(-1).unwrap(), 5);
        let read = p.records_from(5, 1 << 20).unwrap();
        assert!(read.records.is_empty());
    }
}
