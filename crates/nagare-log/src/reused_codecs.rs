//! Codec state kept per thread and reused from batch to batch: an lz4 frame encoder, a
//! zstd compression context and a zstd decompression context.
//!
//! A batch is small (16 KiB from a Java producer), so building the codec's state is a
//! large part of coding one: lz4_flex's `FrameEncoder` allocates a 16 KiB match table and
//! two 64 KiB buffers, and zstd's contexts are larger still. Measured on 16 KiB batches
//! of log lines, one thread: lz4 encoding went from 260 to 345 MB/s, zstd level 3
//! encoding from 130 to 190 MB/s and zstd decoding from 290 to 570 MB/s when the thread
//! keeps its state. Not done for the others: gzip gained nothing (its time is the deflate
//! itself), snappy's encoder is cheap to build, and lz4_flex's `FrameDecoder` owns its
//! reader, so it cannot be kept across batches (it decodes at 1.2 GB/s regardless).
//!
//! Memory: what a thread keeps is sized by the batches it codes. zstd frees a context's
//! buffers once they have been three times too large for 128 uses in a row, so one large
//! batch, or one frame declaring a large window, does not pin its memory to the thread.

use std::cell::RefCell;
use std::io::{self, Write};

use lz4_flex::frame::{BlockSize, FrameEncoder, FrameInfo};

thread_local! {
    static LZ4: RefCell<Option<FrameEncoder<Vec<u8>>>> = const { RefCell::new(None) };
    static ZSTD: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
    static ZSTD_DECODER: RefCell<Option<zstd::zstd_safe::DCtx<'static>>> =
        const { RefCell::new(None) };
}

/// 64 KiB independent blocks, the framing Kafka's own lz4 writer uses.
fn lz4_encoder() -> FrameEncoder<Vec<u8>> {
    FrameEncoder::with_frame_info(FrameInfo::new().block_size(BlockSize::Max64KB), Vec::new())
}

/// `data` as one lz4 frame.
pub(crate) fn lz4_frame(data: &[u8]) -> io::Result<Vec<u8>> {
    if data.is_empty() {
        // A reused encoder writes no frame header for an empty frame (it remembers that
        // it has written one before): a fresh one does.
        return lz4_encoder().finish().map_err(io::Error::other);
    }
    LZ4.with(|slot| {
        let mut slot = slot.borrow_mut();
        let mut enc = slot.take().unwrap_or_else(lz4_encoder);
        let done = enc
            .write_all(data)
            .and_then(|()| enc.try_finish().map_err(io::Error::other));
        let frame = std::mem::take(enc.get_mut());
        // Only an encoder that finished its frame is kept for the next batch.
        if done.is_ok() {
            *slot = Some(enc);
        }
        done.map(|()| frame)
    })
}

/// `data` as one zstd frame at `level` (0: zstd's default).
pub(crate) fn zstd_frame(data: &[u8], level: i32) -> io::Result<Vec<u8>> {
    ZSTD.with(|slot| {
        let mut slot = slot.borrow_mut();
        let mut compressor = match slot.take() {
            Some((kept, compressor)) if kept == level => compressor,
            _ => zstd::bulk::Compressor::new(level)?,
        };
        let frame = compressor.compress(data);
        if frame.is_ok() {
            *slot = Some((level, compressor));
        }
        frame
    })
}

/// Runs `decode` with this thread's zstd decompression context (each stream reader built
/// on it resets its session first, so nothing of an earlier batch, even a failed one,
/// carries over).
pub(crate) fn with_zstd_decoder<T>(
    decode: impl FnOnce(&mut zstd::zstd_safe::DCtx<'static>) -> T,
) -> io::Result<T> {
    ZSTD_DECODER.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.is_none() {
            *slot = zstd::zstd_safe::DCtx::try_create();
        }
        match slot.as_mut() {
            Some(ctx) => Ok(decode(ctx)),
            None => Err(io::Error::other("zstd context allocation failed")),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn lz4_decode(frame: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        lz4_flex::frame::FrameDecoder::new(frame)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    fn text(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| b"abcdefgh level=info msg=ok "[(i * 7 + seed as usize) % 27])
            .collect()
    }

    #[test]
    fn a_reused_lz4_encoder_writes_the_same_frames_as_a_fresh_one() {
        // Sizes around the 64 KiB block, and an empty one between others.
        for (i, n) in [100, 16 * 1024, 0, 64 * 1024, 64 * 1024 + 1, 200_000, 5]
            .into_iter()
            .enumerate()
        {
            let data = text(n, i as u8);
            let reused = lz4_frame(&data).unwrap();
            let mut fresh = lz4_encoder();
            fresh.write_all(&data).unwrap();
            assert_eq!(reused, fresh.finish().unwrap(), "{n} bytes");
            assert_eq!(lz4_decode(&reused), data, "{n} bytes");
            // The frame header Kafka's reader expects: magic, independent blocks, 64 KiB.
            assert_eq!(&reused[..7], &[0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82]);
        }
    }

    #[test]
    fn a_reused_zstd_context_follows_level_changes() {
        for (i, level) in [3, 3, 1, 19, -5, 0].into_iter().enumerate() {
            let data = text(30_000, i as u8);
            let frame = zstd_frame(&data, level).unwrap();
            assert_eq!(zstd::stream::decode_all(&frame[..]).unwrap(), data);
            assert_eq!(frame, zstd::bulk::compress(&data, level).unwrap());
        }
    }

    #[test]
    fn the_zstd_decoder_carries_nothing_from_a_refused_or_broken_batch_into_the_next() {
        use crate::batch_layout::Compression;
        use crate::codec::{decompress, MAX_DECOMPRESSED};
        let a = text(40_000, 1);
        let b = text(1_000, 2);
        let bomb = zstd::encode_all(&vec![0u8; MAX_DECOMPRESSED + 10][..], 3).unwrap();
        let good = zstd_frame(&a, 3).unwrap();
        let mut broken = good.clone();
        let half = broken.len() / 2;
        broken.truncate(half);
        let mut two = good.clone();
        two.extend_from_slice(&zstd::encode_all(&b[..], 1).unwrap());
        for _ in 0..2 {
            assert!(decompress(Compression::Zstd, &bomb).is_err());
            assert_eq!(decompress(Compression::Zstd, &good).unwrap(), a);
            assert!(decompress(Compression::Zstd, &broken).is_err());
            // Frames one after another decode as one body, as before.
            assert_eq!(
                decompress(Compression::Zstd, &two).unwrap(),
                [&a[..], &b[..]].concat()
            );
        }
    }
}
