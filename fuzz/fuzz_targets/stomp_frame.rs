//! Fuzzes the STOMP frame decoder: any bytes, fed whole and split in two, under each
//! protocol version, must decode or fail cleanly (never panic, never read past the
//! limits), and every decoded frame must re-encode and decode to the same frame.
//! `decode_raw` must find the same frames: parsed, each equals what `decode` gave.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nagare_stomp::bytes::BytesMut;
use nagare_stomp::{encode, Decoder, Frame, FrameError, Limits, RawFrame, Version};

fn limits() -> Limits {
    Limits {
        max_frame_bytes: 64 * 1024,
        max_headers: 32,
        max_header_bytes: 4096,
    }
}

/// Frames `next` takes off the pieces fed in turn, until its first error.
fn frames_of<T>(
    version: Version,
    pieces: &[&[u8]],
    next: impl Fn(&mut Decoder, &mut BytesMut) -> Result<Option<T>, FrameError>,
) -> Vec<T> {
    let mut d = Decoder::new(limits());
    d.version = version;
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for p in pieces {
        buf.extend_from_slice(p);
        loop {
            match next(&mut d, &mut buf) {
                Ok(Some(f)) => out.push(f),
                Ok(None) => break,
                Err(_) => return out,
            }
        }
    }
    out
}

fn decode_pieces(version: Version, pieces: &[&[u8]]) -> Vec<Frame> {
    let frames = frames_of(version, pieces, Decoder::decode);
    for f in &frames {
        assert!(f.body.len() <= limits().max_frame_bytes);
        assert!(f.headers.len() <= limits().max_headers);
    }
    frames
}

fn decode_raw_pieces(version: Version, pieces: &[&[u8]]) -> Vec<RawFrame> {
    let frames = frames_of(version, pieces, Decoder::decode_raw);
    for f in &frames {
        assert!(f.head.len() + f.body.len() <= 2 * limits().max_frame_bytes + 2);
    }
    frames
}

fuzz_target!(|data: &[u8]| {
    for version in [Version::V1_0, Version::V1_1, Version::V1_2] {
        let whole = decode_pieces(version, &[data]);
        // Raw decoding checks less (no header limits until parsed), so it may find more
        // frames, never fewer, and the ones both find are the same.
        let raw = decode_raw_pieces(version, &[data]);
        assert!(
            raw.len() >= whole.len(),
            "decode_raw stopped earlier than decode"
        );
        for (r, f) in raw.iter().zip(&whole) {
            assert_eq!(r.to_frame(&limits()).as_ref(), Ok(f));
        }
        if data.len() > 1 {
            let cut = data[0] as usize % data.len();
            let split = decode_pieces(version, &[&data[..cut], &data[cut..]]);
            assert_eq!(whole, split, "splitting the input changed the frames");
        }
        // Round trip: what we encode, we decode back (1.1/1.2 escape every header).
        if version != Version::V1_0 {
            for f in &whole {
                let mut buf = BytesMut::new();
                encode(f, version, &mut buf);
                let mut d = Decoder::new(Limits {
                    max_frame_bytes: 1 << 20,
                    max_headers: 64,
                    max_header_bytes: 1 << 16,
                });
                d.version = version;
                if let Ok(Some(back)) = d.decode(&mut buf) {
                    assert_eq!(back.command, f.command);
                    assert_eq!(back.body, f.body);
                }
            }
        }
    }
});
