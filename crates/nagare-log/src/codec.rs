//! Decompression of record batch payloads, bounded so a small bomb cannot exhaust memory.

use std::io::Read;

use crate::batch_layout::Compression;
use crate::reused_codecs;
use crate::BatchError;

/// Largest decompressed records body accepted.
pub(crate) const MAX_DECOMPRESSED: usize = 64 * 1024 * 1024;

/// xerial snappy-java's stream header: magic, then version and compatible version.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;

pub(crate) fn decompress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, BatchError> {
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => read_bounded(flate2::read::MultiGzDecoder::new(data)),
        Compression::Lz4 => read_bounded(lz4_flex::frame::FrameDecoder::new(data)),
        Compression::Zstd => reused_codecs::with_zstd_decoder(|ctx| {
            read_bounded(zstd::stream::read::Decoder::with_context(data, ctx))
        })
        .map_err(|e| BatchError::Decompression(format!("zstd: {e}")))?,
        Compression::Snappy => snappy(data),
    }
}

fn read_bounded(r: impl Read) -> Result<Vec<u8>, BatchError> {
    let mut out = Vec::new();
    r.take(MAX_DECOMPRESSED as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| BatchError::Decompression(e.to_string()))?;
    if out.len() > MAX_DECOMPRESSED {
        return Err(BatchError::Decompression(format!(
            "decompressed size exceeds {MAX_DECOMPRESSED} bytes"
        )));
    }
    Ok(out)
}

/// Kafka's Java client writes snappy in xerial's framing (a header, then blocks each
/// prefixed with a big-endian u32 length); other clients (librdkafka) may send a raw block.
fn snappy(data: &[u8]) -> Result<Vec<u8>, BatchError> {
    if data.len() < XERIAL_HEADER_LEN || &data[..8] != XERIAL_MAGIC {
        let mut out = Vec::new();
        snappy_block(data, &mut out)?;
        return Ok(out);
    }
    let mut out = Vec::new();
    let mut rest = &data[XERIAL_HEADER_LEN..];
    while !rest.is_empty() {
        if rest.len() < 4 {
            return Err(BatchError::Decompression(
                "xerial snappy block truncated".into(),
            ));
        }
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        rest = &rest[4..];
        if len > rest.len() {
            return Err(BatchError::Decompression(
                "xerial snappy block truncated".into(),
            ));
        }
        snappy_block(&rest[..len], &mut out)?;
        rest = &rest[len..];
    }
    Ok(out)
}

fn snappy_block(block: &[u8], out: &mut Vec<u8>) -> Result<(), BatchError> {
    let err = |e: snap::Error| BatchError::Decompression(format!("snappy: {e}"));
    let len = snap::raw::decompress_len(block).map_err(err)?;
    if out.len() + len > MAX_DECOMPRESSED {
        return Err(BatchError::Decompression(format!(
            "decompressed size exceeds {MAX_DECOMPRESSED} bytes"
        )));
    }
    let start = out.len();
    out.resize(start + len, 0);
    snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(err)?;
    Ok(())
}
