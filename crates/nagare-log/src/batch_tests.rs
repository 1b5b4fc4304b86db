use std::io::Write;

use super::*;

fn rec(i: usize) -> NewRecord {
    NewRecord {
        key: if i.is_multiple_of(3) {
            None
        } else {
            Some(Bytes::from(format!("key-{i}")))
        },
        value: if i % 5 == 4 {
            None
        } else {
            Some(Bytes::from(vec![i as u8; i * 7]))
        },
        headers: (0..i % 3)
            .map(|h| {
                (
                    format!("h{h}"),
                    if h == 1 { None } else { Some(Bytes::from("v")) },
                )
            })
            .collect(),
        timestamp: 1_700_000_000_000 + (i as i64 * 13) % 50 - 20,
    }
}

fn records(n: usize) -> Vec<NewRecord> {
    (0..n).map(rec).collect()
}

fn check_decoded(decoded: &[Record], input: &[NewRecord], base: i64) {
    assert_eq!(decoded.len(), input.len());
    for (i, (d, r)) in decoded.iter().zip(input).enumerate() {
        assert_eq!(d.offset, base + i as i64);
        assert_eq!(d.timestamp, r.timestamp);
        assert_eq!(d.key, r.key);
        assert_eq!(d.value, r.value);
        assert_eq!(d.headers, r.headers);
    }
}

/// Recompresses an uncompressed batch's records with `codec`, fixing length and CRC.
pub(crate) fn compress_batch(batch: &[u8], codec: Compression) -> Vec<u8> {
    let payload = &batch[HEADER_LEN..];
    let (bits, body): (i16, Vec<u8>) = match codec {
        Compression::None => (0, payload.to_vec()),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(payload).unwrap();
            (1, e.finish().unwrap())
        }
        Compression::Snappy => (2, snap::raw::Encoder::new().compress_vec(payload).unwrap()),
        Compression::Lz4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(payload).unwrap();
            (3, e.finish().unwrap())
        }
        Compression::Zstd => (4, zstd::encode_all(payload, 1).unwrap()),
    };
    with_payload(batch, bits, &body)
}

fn with_payload(batch: &[u8], codec_bits: i16, body: &[u8]) -> Vec<u8> {
    let mut out = batch[..HEADER_LEN].to_vec();
    out.extend_from_slice(body);
    let len = (out.len() - LOG_OVERHEAD) as i32;
    out[pos::BATCH_LENGTH..pos::BATCH_LENGTH + 4].copy_from_slice(&len.to_be_bytes());
    let attrs = (be_i16(&out, pos::ATTRIBUTES) & !7) | codec_bits;
    out[pos::ATTRIBUTES..pos::ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
    let crc = crc32c::crc32c(&out[pos::ATTRIBUTES..]);
    out[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

#[test]
fn build_validate_decode_roundtrip() {
    let input = records(20);
    let mut b = build_batch(&input);
    let h = validate(&b, usize::MAX).unwrap();
    assert_eq!(h.record_count, 20);
    assert_eq!(h.last_offset_delta, 19);
    assert_eq!(h.base_timestamp, input[0].timestamp);
    assert_eq!(
        h.max_timestamp,
        input.iter().map(|r| r.timestamp).max().unwrap()
    );
    assert_eq!(h.producer_id, -1);
    assert_eq!(h.compression().unwrap(), Compression::None);
    set_base_offset(&mut b, 1000);
    let h = validate(&b, usize::MAX).unwrap();
    assert_eq!(h.base_offset, 1000);
    assert_eq!(h.last_offset(), 1019);
    check_decoded(&decode_records(&b).unwrap(), &input, 1000);
}

#[test]
fn decode_every_codec() {
    let input = records(50);
    let mut plain = build_batch(&input);
    set_base_offset(&mut plain, 7);
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let b = compress_batch(&plain, codec);
        let h = validate(&b, usize::MAX).unwrap();
        assert_eq!(h.compression().unwrap(), codec);
        check_decoded(&decode_records(&b).unwrap(), &input, 7);
    }
}

#[test]
fn decode_xerial_snappy() {
    let input = records(30);
    let plain = build_batch(&input);
    let payload = &plain[HEADER_LEN..];
    let mut body = b"\x82SNAPPY\x00".to_vec();
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&1i32.to_be_bytes());
    // Two blocks, as snappy-java writes them for large inputs.
    let mid = payload.len() / 2;
    for part in [&payload[..mid], &payload[mid..]] {
        let c = snap::raw::Encoder::new().compress_vec(part).unwrap();
        body.extend_from_slice(&(c.len() as u32).to_be_bytes());
        body.extend_from_slice(&c);
    }
    let b = with_payload(&plain, 2, &body);
    validate(&b, usize::MAX).unwrap();
    check_decoded(&decode_records(&b).unwrap(), &input, 0);
}

#[test]
fn log_append_time_uses_max_timestamp() {
    let input = records(4);
    let mut b = build_batch(&input).to_vec();
    b[pos::ATTRIBUTES + 1] |= 0x08;
    let d = decode_records(&b).unwrap();
    let max = input.iter().map(|r| r.timestamp).max().unwrap();
    assert!(d.iter().all(|r| r.timestamp == max));
}

#[test]
fn control_batch_decodes_to_nothing() {
    let mut b = build_batch(&records(1)).to_vec();
    b[pos::ATTRIBUTES + 1] |= 0x20;
    assert!(decode_records(&b).unwrap().is_empty());
}

#[test]
fn validate_rejects_bad_batches() {
    let b = build_batch(&records(3)).to_vec();
    // CRC
    let mut bad = b.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert!(matches!(
        validate(&bad, usize::MAX),
        Err(BatchError::CrcMismatch { .. })
    ));
    // magic
    let mut bad = b.clone();
    bad[pos::MAGIC] = 1;
    assert_eq!(
        validate(&bad, usize::MAX),
        Err(BatchError::UnsupportedMagic(1))
    );
    // truncated
    assert!(matches!(
        validate(&b[..b.len() - 1], usize::MAX),
        Err(BatchError::Truncated { .. })
    ));
    assert!(matches!(
        validate(&b[..10], usize::MAX),
        Err(BatchError::Truncated { .. })
    ));
    // too large
    assert!(matches!(
        validate(&b, b.len() - 1),
        Err(BatchError::TooLarge { .. })
    ));
    // trailing garbage
    let mut bad = b.clone();
    bad.push(0);
    assert!(validate(&bad, usize::MAX).is_err());
    // absurd length field
    let mut bad = b.clone();
    bad[pos::BATCH_LENGTH..pos::BATCH_LENGTH + 4].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(matches!(
        validate(&bad, 1 << 20),
        Err(BatchError::TooLarge { .. })
    ));
    bad[pos::BATCH_LENGTH..pos::BATCH_LENGTH + 4].copy_from_slice(&(-5i32).to_be_bytes());
    assert_eq!(validate(&bad, 1 << 20), Err(BatchError::InvalidLength(-5)));
    // record count mismatching the offset delta, and zero records
    let mut bad = with_payload(&b, 0, &b[HEADER_LEN..]);
    bad[pos::RECORD_COUNT..pos::RECORD_COUNT + 4].copy_from_slice(&4i32.to_be_bytes());
    let bad = with_payload(&bad, 0, &b[HEADER_LEN..]);
    assert!(validate(&bad, usize::MAX).is_err());
    assert!(validate(&build_batch(&[]), usize::MAX).is_err());
    // unknown codec
    let bad = with_payload(&b, 5, &b[HEADER_LEN..]);
    assert_eq!(
        validate(&bad, usize::MAX),
        Err(BatchError::UnsupportedCompression(5))
    );
}

#[test]
fn split_batches_finds_boundaries() {
    let a = build_batch(&records(2));
    let b = build_batch(&records(5));
    let mut buf = a.to_vec();
    buf.extend_from_slice(&b);
    let ranges = split_batches(&buf).unwrap();
    assert_eq!(ranges, vec![0..a.len(), a.len()..a.len() + b.len()]);
    assert!(split_batches(&buf[..buf.len() - 3]).is_err());
    assert!(split_batches(&buf[..a.len() + 5]).is_err());
    assert!(split_batches(&[]).unwrap().is_empty());
}

#[test]
fn decode_never_panics_on_damaged_records() {
    let b = build_batch(&records(10)).to_vec();
    for i in HEADER_LEN..b.len() {
        for x in [0x00u8, 0xff, 0x80, 0x7f] {
            let mut bad = b.clone();
            bad[i] = x;
            let _ = decode_records(&bad);
        }
    }
    for cut in 0..b.len() {
        let _ = decode_records(&b[..cut]);
        let _ = validate(&b[..cut], usize::MAX);
    }
}

#[test]
fn decompression_is_bounded() {
    let plain = build_batch(&records(1));
    // A small zstd frame that expands beyond the limit.
    let zeros = vec![0u8; crate::codec::MAX_DECOMPRESSED + 10];
    let body = zstd::encode_all(&zeros[..], 3).unwrap();
    let b = with_payload(&plain, 4, &body);
    assert!(matches!(
        decode_records(&b),
        Err(BatchError::Decompression(_))
    ));
}
