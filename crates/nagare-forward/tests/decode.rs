//! The decoder against hand-built frames: every mode, every time form, str vs bin
//! entries, gzip (as bin and as str), zstd, the chunk echo, heartbeats, garbage, bombs,
//! oversized requests, and requests split at every byte.

use std::io::Write;

use bytes::BytesMut;
use nagare_forward::decode::{EventTime, Mode};
use nagare_forward::{DecodeError, Decoder, Frame, Limits, Request};
use rmpv::Value as V;

fn pack(v: &V) -> Vec<u8> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, v).unwrap();
    out
}

fn rec(i: i64) -> V {
    V::Map(vec![
        (V::from("seq"), V::from(i)),
        (V::from("msg"), V::from(format!("event {i}"))),
    ])
}

fn event_time(secs: u32, nanos: u32) -> V {
    let mut b = secs.to_be_bytes().to_vec();
    b.extend_from_slice(&nanos.to_be_bytes());
    V::Ext(0, b)
}

fn decode_all(bytes: &[u8], limits: Limits) -> Result<Vec<Frame>, DecodeError> {
    let mut d = Decoder::new(limits);
    let mut buf = BytesMut::from(bytes);
    let mut out = Vec::new();
    while let Some(f) = d.decode(&mut buf)? {
        out.push(f);
    }
    assert!(buf.is_empty(), "{} bytes left", buf.len());
    Ok(out)
}

fn one(bytes: &[u8]) -> Request {
    match decode_all(bytes, Limits::default()).unwrap().pop() {
        Some(Frame::Request(r)) => r,
        other => panic!("not a request: {other:?}"),
    }
}

fn record_of(r: &Request, i: usize) -> V {
    rmpv::decode::read_value(&mut &r.source[r.entries[i].record.clone()]).unwrap()
}

fn packed(entries: &[V]) -> Vec<u8> {
    entries.iter().flat_map(pack).collect()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    gzip_at(data, flate2::Compression::fast())
}

fn gzip_at(data: &[u8], level: flate2::Compression) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), level);
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[test]
fn message_mode_with_every_time_form() {
    let times = [
        (
            V::from(1_700_000_000u32),
            EventTime {
                secs: 1_700_000_000,
                nanos: 0,
            },
        ),
        (
            V::F64(1_700_000_000.5),
            EventTime {
                secs: 1_700_000_000,
                nanos: 500_000_000,
            },
        ),
        (
            event_time(1_700_000_000, 123_456_789),
            EventTime {
                secs: 1_700_000_000,
                nanos: 123_456_789,
            },
        ),
        (
            V::Array(vec![
                event_time(5, 6),
                V::Map(vec![(V::from("k"), V::from("v"))]),
            ]),
            EventTime { secs: 5, nanos: 6 },
        ),
    ];
    for (t, want) in times {
        let r = one(&pack(&V::Array(vec![V::from("app.web"), t, rec(1)])));
        assert_eq!(r.mode, Mode::Message);
        assert_eq!(&r.tag[..], b"app.web");
        assert_eq!(r.entries[0].time, want);
        assert_eq!(record_of(&r, 0), rec(1));
        assert!(r.chunk.is_none());
    }
}

#[test]
fn event_time_as_ext8_is_accepted() {
    // ext8 (0xc7) with length 8 and type 0, instead of fixext8.
    let mut b = vec![0x93, 0xa1, b't', 0xc7, 8, 0];
    b.extend_from_slice(&7u32.to_be_bytes());
    b.extend_from_slice(&9u32.to_be_bytes());
    b.extend_from_slice(&pack(&rec(0)));
    let r = one(&b);
    assert_eq!(r.entries[0].time, EventTime { secs: 7, nanos: 9 });
}

#[test]
fn nil_and_zero_times_mean_now() {
    let r = one(&pack(&V::Array(vec![V::from("t"), V::Nil, rec(1)])));
    assert!(r.entries[0].time.secs > 1_600_000_000);
}

#[test]
fn forward_mode_with_chunk_and_fluent_bit_entries() {
    let v = V::Array(vec![
        V::from("fb"),
        V::Array(vec![
            V::Array(vec![V::from(10), rec(0)]),
            // Fluent Bit 2.x: [[time, {metadata}], record]
            V::Array(vec![
                V::Array(vec![event_time(11, 1), V::Map(vec![])]),
                rec(1),
            ]),
        ]),
        V::Map(vec![
            (V::from("chunk"), V::from("Y2h1bmsK\n")),
            (V::from("size"), V::from(999)),
        ]),
    ]);
    let r = one(&pack(&v));
    assert_eq!(r.mode, Mode::Forward);
    assert_eq!(r.entries.len(), 2);
    assert_eq!(r.entries[1].time, EventTime { secs: 11, nanos: 1 });
    assert_eq!(record_of(&r, 1), rec(1));
    // The chunk is kept exactly as encoded, trailing newline included.
    assert_eq!(&r.chunk.unwrap()[..], &pack(&V::from("Y2h1bmsK\n"))[..]);
}

#[test]
fn packed_forward_as_bin_and_as_str() {
    let entries: Vec<V> = (0..50)
        .map(|i| V::Array(vec![event_time(100 + i as u32, i as u32), rec(i)]))
        .collect();
    let stream = packed(&entries);
    for as_str in [false, true] {
        let second = if as_str {
            // Old senders put the entries in a raw str (not valid UTF-8 in general).
            let mut b = vec![0xdb];
            b.extend_from_slice(&(stream.len() as u32).to_be_bytes());
            b.extend_from_slice(&stream);
            b
        } else {
            pack(&V::Binary(stream.clone()))
        };
        let mut frame = vec![0x93];
        frame.extend_from_slice(&pack(&V::from("p")));
        frame.extend_from_slice(&second);
        frame.extend_from_slice(&pack(&V::Map(vec![(V::from("chunk"), V::from("abc"))])));
        let r = one(&frame);
        assert_eq!(r.mode, Mode::PackedForward);
        assert_eq!(r.entries.len(), 50);
        for i in 0..50 {
            assert_eq!(record_of(&r, i), rec(i as i64));
            assert_eq!(
                r.entries[i].time,
                EventTime {
                    secs: 100 + i as i64,
                    nanos: i as u32
                }
            );
        }
    }
}

#[test]
fn compressed_packed_forward_gzip_bin_str_multi_member_and_zstd() {
    let entries: Vec<V> = (0..20)
        .map(|i| V::Array(vec![V::from(i), rec(i)]))
        .collect();
    let stream = packed(&entries);
    let (a, b) = stream.split_at(stream.len() / 2);
    // Fluentd's out_forward appends one gzip member per write: concatenated members.
    let mut multi = gzip(a);
    multi.extend_from_slice(&gzip(b));
    let zstd = zstd::encode_all(&stream[..], 1).unwrap();
    let cases = [
        (V::Binary(gzip(&stream)), "gzip"),
        (V::Binary(multi), "gzip"),
        (V::Binary(zstd), "zstd"),
    ];
    for (body, opt) in cases {
        let r = one(&pack(&V::Array(vec![
            V::from("c"),
            body,
            V::Map(vec![(V::from("compressed"), V::from(opt))]),
        ])));
        assert_eq!(r.mode, Mode::CompressedPackedForward);
        assert_eq!(r.entries.len(), 20);
        assert_eq!(record_of(&r, 19), rec(19));
    }
    // gzip in a str, and "compressed": "text" for plain entries.
    let gz = gzip(&stream);
    let mut frame = vec![0x93, 0xa1, b'c', 0xdb];
    frame.extend_from_slice(&(gz.len() as u32).to_be_bytes());
    frame.extend_from_slice(&gz);
    frame.extend_from_slice(&pack(&V::Map(vec![(
        V::from("compressed"),
        V::from("gzip"),
    )])));
    assert_eq!(one(&frame).entries.len(), 20);
    let r = one(&pack(&V::Array(vec![
        V::from("c"),
        V::Binary(stream.clone()),
        V::Map(vec![(V::from("compressed"), V::from("text"))]),
    ])));
    assert_eq!(r.mode, Mode::PackedForward);
}

#[test]
fn heartbeat_nil_and_pipelined_requests() {
    let mut b = vec![0xc0];
    b.extend_from_slice(&pack(&V::Array(vec![V::from("a"), V::from(1), rec(1)])));
    b.push(0xc0);
    b.extend_from_slice(&pack(&V::Array(vec![V::from("b"), V::from(2), rec(2)])));
    let frames = decode_all(&b, Limits::default()).unwrap();
    assert_eq!(frames.len(), 4);
    assert!(matches!(frames[0], Frame::Nil));
    assert!(matches!(&frames[3], Frame::Request(r) if &r.tag[..] == b"b"));
}

#[test]
fn split_at_every_byte_decodes_the_same() {
    let entries: Vec<V> = (0..5).map(|i| V::Array(vec![V::from(i), rec(i)])).collect();
    let frame = pack(&V::Array(vec![
        V::from("s"),
        V::Binary(packed(&entries)),
        V::Map(vec![(V::from("chunk"), V::from("x"))]),
    ]));
    for cut in 0..frame.len() {
        let mut d = Decoder::new(Limits::default());
        let mut buf = BytesMut::from(&frame[..cut]);
        assert!(d.decode(&mut buf).unwrap().is_none(), "complete at {cut}");
        buf.extend_from_slice(&frame[cut..]);
        match d.decode(&mut buf).unwrap() {
            Some(Frame::Request(r)) => assert_eq!(r.entries.len(), 5),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn malformed_requests_are_refused() {
    let bad: Vec<(Vec<u8>, &str)> = vec![
        (b"GET / HTTP/1.1\r\n\r\n".to_vec(), "not an array"),
        (vec![0xc1], "reserved byte"),
        (pack(&V::from(5)), "number"),
        (pack(&V::Array(vec![V::from("t")])), "one element"),
        (
            pack(&V::Array(vec![V::from(1), V::from(1), rec(1)])),
            "tag not a string",
        ),
        (
            pack(&V::Array(vec![V::from("t"), V::from(1), V::from(2)])),
            "record not a map",
        ),
        (
            pack(&V::Array(vec![V::from("t"), V::from("x"), V::from(2)])),
            "option not a map",
        ),
        (
            pack(&V::Array(vec![V::from("t"), V::Array(vec![V::from(1)])])),
            "entry not an array",
        ),
        (
            pack(&V::Array(vec![V::from("t"), V::Binary(vec![0x92, 0x01])])),
            "truncated entry",
        ),
        (
            pack(&V::Array(vec![V::from("t"), V::from(true), rec(1)])),
            "bool time",
        ),
        (
            pack(&V::Array(vec![V::from("t"), V::Ext(1, vec![0; 8]), rec(1)])),
            "ext 1 time",
        ),
        (
            pack(&V::Array(vec![
                V::from("t"),
                V::Binary(vec![1, 2, 3]),
                V::Map(vec![(V::from("compressed"), V::from("gzip"))]),
            ])),
            "gzip without gzip",
        ),
        (
            pack(&V::Array(vec![
                V::from("t"),
                V::Binary(vec![0x1f, 0x8b, 0, 0]),
                V::Map(vec![(V::from("compressed"), V::from("gzip"))]),
            ])),
            "broken gzip",
        ),
        (
            pack(&V::Array(vec![
                V::from("t"),
                V::Binary(vec![]),
                V::Map(vec![(V::from("compressed"), V::from("lz77"))]),
            ])),
            "unknown compression",
        ),
    ];
    for (bytes, why) in bad {
        assert!(
            decode_all(&bytes, Limits::default()).is_err(),
            "{why} was accepted"
        );
    }
}

#[test]
fn decompression_bomb_is_refused() {
    let zeros = vec![0u8; 8 << 20];
    let frame = pack(&V::Array(vec![
        V::from("bomb"),
        // As small as deflate makes it (about 1,000 to 1): zlib-rs's fastest level
        // packs zeros only about 100 to 1.
        V::Binary(gzip_at(&zeros, flate2::Compression::best())),
        V::Map(vec![(V::from("compressed"), V::from("gzip"))]),
    ]));
    let limits = Limits {
        max_decompressed_bytes: 1 << 20,
        ..Limits::default()
    };
    assert!(frame.len() < 64 << 10);
    assert_eq!(
        decode_all(&frame, limits).unwrap_err(),
        DecodeError::DecompressedTooLarge { limit: 1 << 20 }
    );
}

#[test]
fn oversized_request_is_refused_before_it_is_buffered() {
    let limits = Limits {
        max_chunk_bytes: 1000,
        ..Limits::default()
    };
    // A bin32 head announcing 1 MB: refused from the first 6 bytes.
    let mut d = Decoder::new(limits);
    let mut buf = BytesMut::from(&[0x92, 0xa1, b't', 0xc6, 0x00, 0x10, 0x00, 0x00][..]);
    assert!(matches!(
        d.decode(&mut buf),
        Err(DecodeError::TooLarge { .. })
    ));
}

/// A cheap stand-in for the fuzz target in `cargo test`: random bytes and random
/// mutations of valid frames, whole and split, must decode or fail, never panic.
#[test]
fn random_and_mutated_input_never_panics() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(6);
    let entries: Vec<V> = (0..8)
        .map(|i| V::Array(vec![event_time(i, i), rec(i as i64)]))
        .collect();
    let seeds = [
        pack(&V::Array(vec![
            V::from("a"),
            V::from(1),
            rec(1),
            V::Map(vec![(V::from("chunk"), V::from("c"))]),
        ])),
        pack(&V::Array(vec![V::from("b"), V::Array(entries.clone())])),
        pack(&V::Array(vec![V::from("c"), V::Binary(packed(&entries))])),
        pack(&V::Array(vec![
            V::from("d"),
            V::Binary(gzip(&packed(&entries))),
            V::Map(vec![(V::from("compressed"), V::from("gzip"))]),
        ])),
    ];
    let limits = Limits {
        max_chunk_bytes: 1 << 16,
        max_decompressed_bytes: 1 << 16,
        max_events: 1000,
    };
    for round in 0..20_000 {
        let mut input = if round % 4 == 0 {
            (0..rng.gen_range(0..64))
                .map(|_| rng.gen())
                .collect::<Vec<u8>>()
        } else {
            seeds[round % seeds.len()].clone()
        };
        if !input.is_empty() {
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..input.len());
                input[at] = rng.gen();
            }
        }
        let cut = if input.is_empty() {
            0
        } else {
            rng.gen_range(0..input.len())
        };
        let mut d = Decoder::new(limits);
        let mut buf = BytesMut::from(&input[..cut]);
        let feed = |buf: &mut BytesMut, d: &mut Decoder| {
            while let Ok(Some(f)) = d.decode(buf) {
                if let Frame::Request(r) = f {
                    for e in &r.entries {
                        let mut out = Vec::new();
                        let _ =
                            nagare_forward::json::write_json(&r.source[e.record.clone()], &mut out);
                    }
                }
            }
        };
        feed(&mut buf, &mut d);
        buf.extend_from_slice(&input[cut..]);
        feed(&mut buf, &mut d);
    }
}

/// A large Forward-mode request trickling in is scanned once in total, not once per
/// read (which would be quadratic: a slow sender could burn the CPU).
#[test]
fn trickled_large_request_is_not_rescanned_from_the_start() {
    let entries: Vec<V> = (0..100_000)
        .map(|i| V::Array(vec![V::from(i), V::Map(vec![(V::from("i"), V::from(i))])]))
        .collect();
    let frame = pack(&V::Array(vec![V::from("big"), V::Array(entries)]));
    let mut d = Decoder::new(Limits::default());
    let mut buf = BytesMut::new();
    let t0 = std::time::Instant::now();
    let mut got = None;
    for piece in frame.chunks(500) {
        buf.extend_from_slice(piece);
        if let Some(f) = d.decode(&mut buf).unwrap() {
            got = Some(f);
        }
    }
    assert!(matches!(got, Some(Frame::Request(r)) if r.entries.len() == 100_000));
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t0.elapsed()
    );
}

#[test]
fn too_many_events_are_refused() {
    let limits = Limits {
        max_events: 10,
        ..Limits::default()
    };
    let entries: Vec<V> = (0..11)
        .map(|i| V::Array(vec![V::from(i), rec(i)]))
        .collect();
    let fwd = pack(&V::Array(vec![V::from("t"), V::Array(entries.clone())]));
    let packed_frame = pack(&V::Array(vec![V::from("t"), V::Binary(packed(&entries))]));
    for frame in [fwd, packed_frame] {
        assert_eq!(
            decode_all(&frame, limits).unwrap_err(),
            DecodeError::TooManyEvents { limit: 10 }
        );
    }
    let ten = pack(&V::Array(vec![
        V::from("t"),
        V::Binary(packed(&entries[..10])),
    ]));
    assert!(decode_all(&ten, limits).is_ok());
}
