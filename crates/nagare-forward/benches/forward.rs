//! CPU cost of the receiver's hot path without sockets or disk: decoding a PackedForward
//! chunk of 1000 events (~100 B each) and turning it into a record batch (JSON values,
//! headers, CRC). `cargo bench -p nagare-forward`.

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nagare_forward::ingest::build_batch;
use nagare_forward::{Decoder, Format, Frame, Limits};

fn chunk(events: usize) -> Vec<u8> {
    let mut entries = Vec::new();
    for i in 0..events {
        let rec = rmpv::Value::Map(vec![
            (rmpv::Value::from("seq"), rmpv::Value::from(i)),
            (
                rmpv::Value::from("host"),
                rmpv::Value::from("bench-host-01"),
            ),
            (rmpv::Value::from("msg"), rmpv::Value::from("m".repeat(60))),
        ]);
        let mut t = 1_700_000_000u32.to_be_bytes().to_vec();
        t.extend_from_slice(&(i as u32).to_be_bytes());
        let e = rmpv::Value::Array(vec![rmpv::Value::Ext(0, t), rec]);
        rmpv::encode::write_value(&mut entries, &e).unwrap();
    }
    let frame = rmpv::Value::Array(vec![
        rmpv::Value::from("bench.forward"),
        rmpv::Value::Binary(entries),
        rmpv::Value::Map(vec![(
            rmpv::Value::from("chunk"),
            rmpv::Value::from("0123456789abcdef"),
        )]),
    ]);
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, &frame).unwrap();
    out
}

fn bench(c: &mut Criterion) {
    let frame = chunk(1000);
    let mut g = c.benchmark_group("packed_forward_1000_events");
    g.throughput(Throughput::Elements(1000));
    g.bench_function("decode", |b| {
        b.iter(|| {
            let mut d = Decoder::new(Limits::default());
            let mut buf = BytesMut::from(&frame[..]);
            d.decode(&mut buf).unwrap().unwrap()
        })
    });
    for (name, format) in [
        ("decode_and_batch_json", Format::Json),
        ("decode_and_batch_msgpack", Format::Msgpack),
    ] {
        let mut json = Vec::new();
        let mut rejected = Vec::new();
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut d = Decoder::new(Limits::default());
                let mut buf = BytesMut::from(&frame[..]);
                let Some(Frame::Request(req)) = d.decode(&mut buf).unwrap() else {
                    unreachable!()
                };
                build_batch(&req, 0, format, 64 << 20, &mut json, &mut rejected).unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
