//! A topic's `compression.type` applied on append: a batch in another codec is
//! re-encoded before it reaches the log (Kafka does the same), whichever front end sent
//! it. `producer` (the default) keeps batches as they come and costs nothing.

use bytes::BytesMut;
use nagare_log::batch::Compression;
use nagare_log::recompress::{recompress, TargetCodec};
use parking_lot::RwLock;

use super::Partition;
use crate::{CompressionType, CoreError, TopicConfig};

/// The codec a partition stores batches with; `None` keeps the producer's.
#[derive(Default)]
pub(super) struct TopicCodec(RwLock<Option<TargetCodec>>);

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
    /// Takes the topic's `compression.type` (at open and on every config change).
    pub(crate) fn set_codec(&self, config: &TopicConfig) {
        *self.codec.0.write() = target(config);
    }

    /// The batch as it is to be stored: re-encoded when the topic names another codec.
    pub(super) fn apply_topic_codec(&self, batch: BytesMut) -> Result<BytesMut, CoreError> {
        let Some(target) = *self.codec.0.read() else {
            return Ok(batch);
        };
        match recompress(&batch, target) {
            Ok(Some(rewritten)) => Ok(rewritten),
            Ok(None) => Ok(batch),
            Err(e) => Err(CoreError::Log(e.into())),
        }
    }
}
