//! Fuzzes the forward-protocol decoder: any bytes, fed whole and in two pieces, must
//! decode or fail cleanly (never panic, never allocate from an unchecked length), and
//! every decoded record must convert to JSON or fail cleanly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nagare_forward::bytes::BytesMut;
use nagare_forward::{Decoder, Frame, Limits};

fn run(pieces: &[&[u8]]) {
    let limits = Limits {
        max_chunk_bytes: 1 << 20,
        max_decompressed_bytes: 4 << 20,
        max_events: 100_000,
    };
    let mut d = Decoder::new(limits);
    let mut buf = BytesMut::new();
    for p in pieces {
        buf.extend_from_slice(p);
        loop {
            match d.decode(&mut buf) {
                Ok(Some(Frame::Request(r))) => {
                    for e in &r.entries {
                        let mut out = Vec::new();
                        let _ =
                            nagare_forward::json::write_json(&r.source[e.record.clone()], &mut out);
                        let _ = e.time.millis();
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    run(&[data]);
    if data.len() > 1 {
        let cut = data[0] as usize % data.len();
        run(&[&data[..cut], &data[cut..]]);
    }
});
