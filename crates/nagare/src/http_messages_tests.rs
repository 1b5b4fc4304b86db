use std::collections::BTreeMap;

use serde_json::json;

use super::render;
use super::{parse, Browse, Start, MAX_LIMIT};

fn value(b: Option<&[u8]>) -> serde_json::Value {
    serde_json::to_value(render::value(b)).expect("serializes")
}

fn bytes(b: Option<&[u8]>) -> serde_json::Value {
    serde_json::to_value(render::bytes(b)).expect("serializes")
}

fn msgpack(v: &rmpv::Value) -> Vec<u8> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, v).expect("encode");
    out
}

#[test]
fn json_values_are_parsed() {
    assert_eq!(
        value(Some(br#"{"a": [1, 2], "b": "x"}"#)),
        json!({"json": {"a": [1, 2], "b": "x"}})
    );
    // Any JSON text counts, scalars included.
    assert_eq!(value(Some(b"42")), json!({"json": 42}));
    assert_eq!(value(Some(b"\"hi\"")), json!({"json": "hi"}));
}

#[test]
fn json_is_passed_on_as_written() {
    // Key order and big numbers as the producer wrote them, surrounding space trimmed.
    let rendered = render::value(Some(b" {\"z\": 1, \"a\": 12345678901234567890} \n"));
    assert_eq!(
        serde_json::to_string(&rendered).expect("serializes"),
        r#"{"json":{"z": 1, "a": 12345678901234567890}}"#
    );
}

#[test]
fn msgpack_maps_and_arrays_are_decoded() {
    use rmpv::Value as M;
    let map = M::Map(vec![
        (M::from("user"), M::from("ada")),
        (M::from("n"), M::from(-3)),
        (M::from(7), M::Boolean(true)),
        (M::from("bin"), M::Binary(vec![0, 255])),
        (M::from("f"), M::F64(1.5)),
        (M::from("nan"), M::F64(f64::NAN)),
        (M::from("big"), M::from(u64::MAX)),
    ]);
    assert_eq!(
        value(Some(&msgpack(&map))),
        json!({"msgpack": {
            "user": "ada", "n": -3, "7": true, "bin": "AP8=", "f": 1.5, "nan": null,
            "big": u64::MAX,
        }})
    );
    // Map entries keep their order.
    let ordered = M::Map(vec![(M::from("z"), M::from(1)), (M::from("a"), M::from(2))]);
    assert_eq!(
        serde_json::to_string(&render::value(Some(&msgpack(&ordered)))).expect("serializes"),
        r#"{"msgpack":{"z":1,"a":2}}"#
    );
    let array = M::Array(vec![M::Nil, M::from("x"), M::Ext(5, vec![1])]);
    assert_eq!(
        value(Some(&msgpack(&array))),
        json!({"msgpack": [null, "x", {"ext": 5, "base64": "AQ=="}]})
    );
}

#[test]
fn msgpack_with_trailing_bytes_or_a_scalar_is_not_msgpack() {
    let mut bytes = msgpack(&rmpv::Value::Array(vec![rmpv::Value::from(1)]));
    bytes.push(0xc1);
    assert_eq!(value(Some(&bytes)), json!({"base64": "kQHB"}));
    // A lone msgpack integer (uint 16, 0xffff) is just binary.
    assert_eq!(value(Some(&[0xcd, 0xff, 0xff])), json!({"base64": "zf//"}));
    // A truncated map is binary too.
    assert_eq!(value(Some(&[0x82, 0xa1])), json!({"base64": "gqE="}));
}

#[test]
fn hostile_msgpack_is_binary_not_a_crash() {
    // A map claiming 4 billion entries, and nesting far deeper than the limit.
    let huge = [0xdf, 0xff, 0xff, 0xff, 0xff];
    assert_eq!(value(Some(&huge))["base64"], json!("3/////8="));
    let deep = vec![0x91u8; 10_000];
    assert!(value(Some(&deep)).get("base64").is_some());
}

#[test]
fn text_then_base64() {
    assert_eq!(
        value(Some("héllo wörld".as_bytes())),
        json!({"text": "héllo wörld"})
    );
    assert_eq!(value(Some(b"")), json!({"text": ""}));
    assert_eq!(value(Some(&[0xff, 0xfe, 0x00])), json!({"base64": "//4A"}));
    assert_eq!(value(None), json!(null));
}

#[test]
fn keys_and_headers_are_never_parsed() {
    assert_eq!(bytes(Some(b"{\"a\":1}")), json!({"text": "{\"a\":1}"}));
    assert_eq!(bytes(Some(&[0x80])), json!({"base64": "gA=="}));
    assert_eq!(bytes(None), json!(null));
}

fn query(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn query_defaults_and_starts() {
    assert_eq!(
        parse(&query(&[])),
        Ok(Browse {
            partition: 0,
            start: Start::Beginning,
            limit: 50
        })
    );
    assert_eq!(
        parse(&query(&[
            ("partition", "3"),
            ("offset", "10"),
            ("limit", "5")
        ])),
        Ok(Browse {
            partition: 3,
            start: Start::Offset(10),
            limit: 5
        })
    );
    assert_eq!(
        parse(&query(&[("timestamp_ms", "1700000000000")])).map(|b| b.start),
        Ok(Start::Timestamp(1_700_000_000_000))
    );
    // A tail's count is its limit, unless a smaller limit is given.
    assert_eq!(parse(&query(&[("tail", "7")])).map(|b| b.limit), Ok(7));
    assert_eq!(
        parse(&query(&[("tail", "7"), ("limit", "2")])).map(|b| b.limit),
        Ok(2)
    );
}

#[test]
fn query_limits_are_capped_and_checked() {
    assert_eq!(
        parse(&query(&[("limit", "100000")])).map(|b| b.limit),
        Ok(MAX_LIMIT)
    );
    assert_eq!(
        parse(&query(&[("tail", "100000")])).map(|b| b.limit),
        Ok(MAX_LIMIT)
    );
    for bad in [
        vec![("limit", "0")],
        vec![("limit", "x")],
        vec![("offset", "-1")],
        vec![("tail", "-1")],
        vec![("partition", "-1")],
        vec![("partition", "99999999999")],
        vec![("offset", "1"), ("tail", "1")],
        vec![("ofset", "1")],
    ] {
        assert!(parse(&query(&bad)).is_err(), "{bad:?} accepted");
    }
}
