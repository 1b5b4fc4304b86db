//! How the message browser shows the bytes of a record: a tagged JSON object saying what
//! the bytes were taken to be, so the console can pretty-print structured values and
//! still show anything else losslessly.
//!
//! Values are tried in order: JSON (any JSON text, `42` included), MessagePack (only
//! when the bytes are exactly one map or array: a lone msgpack integer or string is
//! indistinguishable from ordinary short binary), UTF-8 text, and base64 for the rest.
//! Keys and header values are shown as text or base64 only: they are identifiers, and
//! guessing a structure in them would only surprise.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value as Json};

/// Deeper msgpack than this is shown as binary: the same limit serde_json puts on JSON,
/// so neither decoder recurses further than the other on hostile input.
const MSGPACK_MAX_DEPTH: usize = 128;

/// What some bytes were taken to be; serialized as a one-key object naming that.
#[derive(Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Rendered {
    /// The JSON text as it came: key order and number spelling kept, as the producer
    /// wrote them (a parsed map would sort the keys).
    Json(Box<RawValue>),
    /// Converted to JSON text, map entries in the order they came.
    Msgpack(Box<RawValue>),
    Text(String),
    Base64(String),
}

/// A record value: `{"json": ..}`, `{"msgpack": ..}`, `{"text": ..}` or `{"base64": ..}`,
/// or `None` (`null`) when the record has none (a tombstone).
pub(crate) fn value(bytes: Option<&[u8]>) -> Option<Rendered> {
    let bytes = bytes?;
    if let Some(raw) = std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| serde_json::from_str::<Box<RawValue>>(text).ok())
    {
        return Some(Rendered::Json(raw));
    }
    if let Some(v) = msgpack(bytes) {
        return Some(Rendered::Msgpack(v));
    }
    Some(plain(bytes))
}

/// A record key or header value: `{"text": ..}`, `{"base64": ..}` or `None` (`null`).
pub(crate) fn bytes(bytes: Option<&[u8]>) -> Option<Rendered> {
    bytes.map(plain)
}

fn plain(bytes: &[u8]) -> Rendered {
    match std::str::from_utf8(bytes) {
        Ok(text) => Rendered::Text(text.to_string()),
        Err(_) => Rendered::Base64(B64.encode(bytes)),
    }
}

/// The bytes as one msgpack map or array with nothing after it, as JSON text.
fn msgpack(bytes: &[u8]) -> Option<Box<RawValue>> {
    let first = *bytes.first()?;
    // fixmap, fixarray, array 16/32, map 16/32: anything else is not a container.
    let container = matches!(first, 0x80..=0x9f | 0xdc..=0xdf);
    if !container {
        return None;
    }
    let mut rest = bytes;
    let v = rmpv::decode::read_value_with_max_depth(&mut rest, MSGPACK_MAX_DEPTH).ok()?;
    if !rest.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(bytes.len() * 2);
    write_json(&mut out, &v);
    RawValue::from_string(out).ok()
}

/// Writes msgpack as JSON text, map entries in their order (a `serde_json::Map` would sort
/// them). msgpack has more types than JSON: binary becomes base64 text, an extension
/// `{"ext": type, "base64": data}`, a non-string map key its JSON text, and a
/// non-finite float `null` (JSON has no NaN).
fn write_json(out: &mut String, v: &rmpv::Value) {
    use rmpv::Value as M;
    match v {
        M::Nil => out.push_str("null"),
        M::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        M::Integer(i) => match (i.as_u64(), i.as_i64()) {
            (Some(u), _) => out.push_str(&u.to_string()),
            (None, Some(s)) => out.push_str(&s.to_string()),
            (None, None) => out.push_str("null"),
        },
        M::F32(f) => float(out, f64::from(*f)),
        M::F64(f) => float(out, *f),
        M::String(s) => string(out, &String::from_utf8_lossy(s.as_bytes())),
        M::Binary(b) => string(out, &B64.encode(b)),
        M::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        M::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match k {
                    M::String(s) => string(out, &String::from_utf8_lossy(s.as_bytes())),
                    other => {
                        let mut key = String::new();
                        write_json(&mut key, other);
                        string(out, &key);
                    }
                }
                out.push(':');
                write_json(out, v);
            }
            out.push('}');
        }
        M::Ext(kind, data) => {
            out.push_str(&json!({ "ext": kind, "base64": B64.encode(data) }).to_string());
        }
    }
}

fn string(out: &mut String, s: &str) {
    out.push_str(&Json::String(s.to_string()).to_string());
}

fn float(out: &mut String, f: f64) {
    match serde_json::Number::from_f64(f) {
        Some(n) => out.push_str(&n.to_string()),
        None => out.push_str("null"),
    }
}
