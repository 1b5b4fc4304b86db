//! CPU cost of the STOMP codec without sockets: decoding the frames the busy paths carry
//! (a fan-out subscriber's MESSAGE with its escaped message id, an RPC request's SEND)
//! and encoding a MESSAGE. `cargo bench -p nagare-stomp`.

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nagare_stomp::{encode, Command, Decoder, Frame, Headers, Limits, Version};

/// 64 copies of one frame, read from one buffer as a pipelining peer's read would be.
const FRAMES: usize = 64;

fn frames(frame: &Frame) -> Bytes {
    let mut out = BytesMut::new();
    for _ in 0..FRAMES {
        encode(frame, Version::V1_2, &mut out);
    }
    out.freeze()
}

fn message() -> Frame {
    let headers: Headers = [
        ("destination", "/topic/bench-fan-1a2b3c"),
        ("subscription", "t3"),
        ("message-id", "bench-fan-1a2b3c@0:123456"),
        ("content-type", "application/octet-stream"),
    ]
    .into_iter()
    .collect();
    Frame {
        command: Command::Message,
        headers,
        body: Bytes::from(vec![b'x'; 100]),
    }
}

fn send() -> Frame {
    let headers: Headers = [
        ("destination", "/queue/rpc-requests"),
        ("reply-to", "/temp-queue/replies-17"),
        ("correlation-id", "17-123456"),
    ]
    .into_iter()
    .collect();
    Frame {
        command: Command::Send,
        headers,
        body: Bytes::from(vec![b'x'; 100]),
    }
}

/// Decodes every frame in `wire`; returns the headers seen (so nothing is optimised out).
fn decode_all(wire: &Bytes) -> usize {
    let mut d = Decoder::new(Limits::default());
    d.version = Version::V1_2;
    let mut buf = BytesMut::from(&wire[..]);
    let mut n = 0;
    while let Ok(Some(f)) = d.decode(&mut buf) {
        n += f.headers.len();
    }
    n
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("stomp_codec");
    g.throughput(Throughput::Elements(FRAMES as u64));
    for (name, frame) in [("decode_message", message()), ("decode_send", send())] {
        let wire = frames(&frame);
        // Every header and the content-length came back.
        assert_eq!(decode_all(&wire), FRAMES * (frame.headers.len() + 1));
        g.bench_function(name, |b| b.iter(|| decode_all(&wire)));
    }
    let msg = message();
    let mut out = BytesMut::with_capacity(FRAMES * 512);
    g.bench_function("encode_message", |b| {
        b.iter(|| {
            out.clear();
            for _ in 0..FRAMES {
                encode(&msg, Version::V1_2, &mut out);
            }
            out.len()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
