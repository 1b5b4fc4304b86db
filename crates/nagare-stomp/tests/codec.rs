//! The sans-io codec against the letter of STOMP 1.0-1.2: line ends, escapes per version,
//! content-length bodies with NULs, frames split across reads and many per read, limits.

use nagare_stomp::bytes::BytesMut;
use nagare_stomp::{encode, Command, Decoder, Frame, FrameError, Limits, RawFrame, Version};

fn decoder(v: Version) -> Decoder {
    let mut d = Decoder::new(Limits::default());
    d.version = v;
    d
}

fn decode_all(d: &mut Decoder, bytes: &[u8]) -> Result<Vec<Frame>, FrameError> {
    let mut buf = BytesMut::from(bytes);
    let mut out = Vec::new();
    while let Some(f) = d.decode(&mut buf)? {
        out.push(f);
    }
    Ok(out)
}

fn decode_all_raw(d: &mut Decoder, bytes: &[u8]) -> Result<Vec<RawFrame>, FrameError> {
    let mut buf = BytesMut::from(bytes);
    let mut out = Vec::new();
    while let Some(f) = d.decode_raw(&mut buf)? {
        out.push(f);
    }
    Ok(out)
}

#[test]
fn lf_and_crlf_frames_and_heartbeats_between() {
    let mut d = decoder(Version::V1_2);
    let wire =
        b"\n\r\nSEND\r\ndestination:/queue/a\r\n\r\nhi\0\n\nSEND\ndestination:/queue/b\n\nyo\0\n";
    let frames = decode_all(&mut d, wire).unwrap();
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0].header("destination"), Some("/queue/a"));
    assert_eq!(&frames[0].body[..], b"hi");
    assert_eq!(frames[1].header("destination"), Some("/queue/b"));
}

#[test]
fn stray_nuls_between_frames_are_skipped() {
    let mut d = decoder(Version::V1_2);
    let wire =
        b"\0\0SEND\ndestination:/queue/a\n\nhi\0\0\n\0\r\nSEND\ndestination:/queue/b\n\nyo\0\0";
    let frames = decode_all(&mut d, wire).unwrap();
    assert_eq!(frames.len(), 2);
    assert_eq!(&frames[0].body[..], b"hi");
    assert_eq!(frames[1].header("destination"), Some("/queue/b"));
}

#[test]
fn content_length_body_may_hold_nuls() {
    let mut d = decoder(Version::V1_2);
    let wire = b"SEND\ndestination:/queue/a\ncontent-length:5\n\na\0b\0c\0";
    let f = decode_all(&mut d, wire).unwrap().remove(0);
    assert_eq!(&f.body[..], b"a\0b\0c");
    // The NUL after the counted body is required.
    let mut d = decoder(Version::V1_2);
    let bad = b"SEND\ncontent-length:1\n\nab\0";
    assert_eq!(decode_all(&mut d, bad), Err(FrameError::MissingNul(1)));
}

#[test]
fn split_at_every_byte_gives_the_same_frames() {
    let wire: &[u8] = b"SEND\r\ndestination:/topic/x\r\ncontent-length:3\r\n\r\n\0\0\0\0\nMESSAGE\nfoo:bar\n\nbody\0";
    let whole = decode_all(&mut decoder(Version::V1_2), wire).unwrap();
    for cut in 0..wire.len() {
        let mut d = decoder(Version::V1_2);
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for piece in [&wire[..cut], &wire[cut..]] {
            buf.extend_from_slice(piece);
            while let Some(f) = d.decode(&mut buf).unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got, whole, "cut at {cut}");
    }
}

#[test]
fn escapes_per_version() {
    let wire = b"SEND\na\\cb:x\\ny\\\\z\\r\n\n\0";
    let f = decode_all(&mut decoder(Version::V1_2), wire)
        .unwrap()
        .remove(0);
    assert_eq!(f.header("a:b"), Some("x\ny\\z\r"));
    // 1.1 has no \r escape.
    assert_eq!(
        decode_all(&mut decoder(Version::V1_1), wire),
        Err(FrameError::BadEscape('r'))
    );
    // 1.0 has no escapes at all.
    let f = decode_all(&mut decoder(Version::V1_0), wire)
        .unwrap()
        .remove(0);
    assert_eq!(f.header("a\\cb"), Some("x\\ny\\\\z\\r"));
    // Unknown escapes are errors.
    assert_eq!(
        decode_all(&mut decoder(Version::V1_2), b"SEND\na:\\t\n\n\0"),
        Err(FrameError::BadEscape('t'))
    );
    // CONNECT headers are never unescaped.
    let f = decode_all(&mut decoder(Version::V1_2), b"CONNECT\nlogin:a\\tb\n\n\0")
        .unwrap()
        .remove(0);
    assert_eq!(f.header("login"), Some("a\\tb"));
}

#[test]
fn escapes_are_undone_per_line_with_crlf_line_ends() {
    let wire = b"SEND\r\nk\\c1:v\\n\r\nplain:a:b\r\nk2:\\\\\r\n\r\n\0";
    let f = decode_all(&mut decoder(Version::V1_2), wire)
        .unwrap()
        .remove(0);
    assert_eq!(
        f.headers.iter().collect::<Vec<_>>(),
        vec![("k:1", "v\n"), ("plain", "a:b"), ("k2", "\\")]
    );
}

#[test]
fn values_are_not_trimmed_and_first_repeated_header_wins() {
    let f = decode_all(
        &mut decoder(Version::V1_2),
        b"SEND\nfoo: spaced \nfoo:second\nx:a:b\n\n\0",
    )
    .unwrap()
    .remove(0);
    assert_eq!(f.header("foo"), Some(" spaced "));
    assert_eq!(f.header("x"), Some("a:b"));
}

#[test]
fn malformed_frames_are_errors() {
    let cases: &[(&[u8], FrameError)] = &[
        (b"FOO\n\n\0", FrameError::UnknownCommand("FOO".into())),
        (b"SEND\nnocolon\n\n\0", FrameError::MissingColon),
        (
            b"SEND\ncontent-length:x\n\n\0",
            FrameError::BadContentLength("x".into()),
        ),
        (b"\rX", FrameError::BareCarriageReturn),
    ];
    for (wire, err) in cases {
        assert_eq!(
            decode_all(&mut decoder(Version::V1_2), wire).as_ref(),
            Err(err)
        );
    }
}

#[test]
fn limits_bound_frames_headers_and_lines() {
    let limits = Limits {
        max_frame_bytes: 1024,
        max_headers: 2,
        max_header_bytes: 32,
    };
    let mut d = Decoder::new(limits);
    let big = [b"SEND\n\n".as_slice(), &[b'x'; 2000]].concat();
    assert!(matches!(
        decode_all(&mut d, &big),
        Err(FrameError::TooLarge { .. })
    ));
    let mut d = Decoder::new(limits);
    assert!(matches!(
        decode_all(&mut d, b"SEND\na:1\nb:2\nc:3\n\n\0"),
        Err(FrameError::TooManyHeaders { .. })
    ));
    let mut d = Decoder::new(limits);
    let long = format!("SEND\na:{}\n\n\0", "v".repeat(64));
    assert!(matches!(
        decode_all(&mut d, long.as_bytes()),
        Err(FrameError::HeaderTooLong { .. })
    ));
    let mut d = Decoder::new(limits);
    assert!(matches!(
        decode_all(&mut d, b"SEND\ncontent-length:999999\n\n"),
        Err(FrameError::TooLarge { .. })
    ));
}

#[test]
fn encode_then_decode_round_trips_with_escapes() {
    for v in [Version::V1_1, Version::V1_2] {
        let f = Frame::new(Command::Message)
            .with_header("destination", "/queue/a")
            .with_header("weird:name", "line1\nline2\\")
            .with_header("message-id", "t@0:42")
            .with_header("utf8", "é:ü\\ñ\n")
            .with_body(&b"bin\0ary"[..]);
        let mut buf = BytesMut::new();
        encode(&f, v, &mut buf);
        let back = decode_all(&mut decoder(v), &buf).unwrap().remove(0);
        assert_eq!(back.header("weird:name"), Some("line1\nline2\\"));
        assert_eq!(back.header("message-id"), Some("t@0:42"));
        assert_eq!(back.header("utf8"), Some("é:ü\\ñ\n"));
        assert_eq!(back.header("content-length"), Some("7"));
        assert_eq!(&back.body[..], b"bin\0ary");
    }
}

#[test]
fn body_without_content_length_is_bounded_even_when_complete() {
    let limits = Limits {
        max_frame_bytes: 1024,
        ..Limits::default()
    };
    let wire = [b"SEND\n\n".as_slice(), &[b'x'; 1500], b"\0"].concat();
    let mut d = Decoder::new(limits);
    assert!(matches!(
        decode_all(&mut d, &wire),
        Err(FrameError::TooLarge { .. })
    ));
}

/// Frames of every shape the decoder knows: CRLF and LF lines, heart-beats and stray NULs
/// between frames, counted bodies holding NULs, escaped headers, a repeated
/// `content-length` (the first wins), a header whose value merely mentions it.
const MIXED: &[u8] = b"\n\r\nSEND\r\ndestination:/queue/a\r\ncontent-length:3\r\n\r\na\0b\0\0\nMESSAGE\nmessage-id:t\\c1\\\\x\nx:ncontent-length:9\ncontent-length:4\ncontent-length:1\n\nbody\0\0RECEIPT\nreceipt-id:7\n\n\0";

#[test]
fn raw_frames_parse_to_the_frames_decode_gives_at_every_split() {
    let whole = decode_all(&mut decoder(Version::V1_2), MIXED).unwrap();
    assert_eq!(whole.len(), 3);
    assert_eq!(whole[1].header("message-id"), Some("t:1\\x"));
    for cut in 0..MIXED.len() {
        let mut d = decoder(Version::V1_2);
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for piece in [&MIXED[..cut], &MIXED[cut..]] {
            buf.extend_from_slice(piece);
            while let Some(raw) = d.decode_raw(&mut buf).unwrap() {
                assert_eq!(raw.version, Version::V1_2);
                got.push(raw.to_frame(&Limits::default()).unwrap());
            }
        }
        assert_eq!(got, whole, "cut at {cut}");
    }
}

#[test]
fn raw_and_parsed_decoding_may_alternate_on_one_connection() {
    let mut d = decoder(Version::V1_2);
    let mut buf = BytesMut::new();
    let mut got = Vec::new();
    // Each frame arrives in two reads; the head is found by one call, the frame taken by
    // the other kind of call.
    for (i, byte) in MIXED.iter().enumerate() {
        buf.extend_from_slice(&[*byte]);
        let frame = if i % 2 == 0 {
            d.decode(&mut buf).unwrap()
        } else {
            d.decode_raw(&mut buf)
                .unwrap()
                .map(|r| r.to_frame(&Limits::default()).unwrap())
        };
        got.extend(frame);
    }
    assert_eq!(got, decode_all(&mut decoder(Version::V1_2), MIXED).unwrap());
}

#[test]
fn raw_decoding_reads_no_header_but_content_length() {
    let limits = Limits {
        max_frame_bytes: 1024,
        max_headers: 2,
        max_header_bytes: 32,
    };
    // Too many headers for a parse, or a header that is not UTF-8: found whole all the
    // same, and refused only once parsed.
    type Refused = fn(&FrameError) -> bool;
    let cases: &[(&[u8], Refused)] = &[
        (b"MESSAGE\na:1\nb:2\nc:3\n\nhi\0", |e| {
            matches!(e, FrameError::TooManyHeaders { .. })
        }),
        (b"MESSAGE\nb:\xff\n\nhi\0", |e| *e == FrameError::NotUtf8),
    ];
    for (wire, refused) in cases {
        let raw = decode_all_raw(&mut Decoder::new(limits), wire)
            .unwrap()
            .remove(0);
        assert_eq!(raw.command, Command::Message);
        assert_eq!(&raw.body[..], b"hi");
        let err = raw.to_frame(&limits).expect_err("refused once parsed");
        assert!(refused(&err), "{err:?}");
    }
    // What decides where a frame ends is checked as strictly as by `decode`.
    let cases: &[(&[u8], FrameError)] = &[
        (b"FOO\n\n\0", FrameError::UnknownCommand("FOO".into())),
        (
            b"SEND\ncontent-length:x\n\n\0",
            FrameError::BadContentLength("x".into()),
        ),
        (b"SEND\ncontent-length:1\n\nab\0", FrameError::MissingNul(1)),
        (b"\rX", FrameError::BareCarriageReturn),
    ];
    for (wire, err) in cases {
        assert_eq!(
            decode_all_raw(&mut Decoder::new(limits), wire).map(|f| f.len()),
            Err(err.clone())
        );
    }
    for wire in [
        [b"SEND\n\n".as_slice(), &[b'x'; 2000]].concat(),
        b"SEND\ncontent-length:999999\n\n".to_vec(),
        [b"SEND\nx:".as_slice(), &[b'x'; 2000]].concat(),
    ] {
        assert!(matches!(
            decode_all_raw(&mut Decoder::new(limits), &wire),
            Err(FrameError::TooLarge { .. })
        ));
    }
}
