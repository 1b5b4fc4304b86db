//! Strict checks of the settings tree, run before the data directory is opened or any
//! port is bound: every key of every section must be known (a typo names the nearest
//! valid key), values must have their key's type, and routes must compile.
//!
//! The front-end sections are flattened into the binary's `Settings` next to `listen`,
//! and serde cannot reject unknown keys through `flatten`; so each section is also read on
//! its own (without `listen`) into its crate's `Config`, which denies unknown fields.

use anyhow::{anyhow, bail};
use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;

/// Below this Jaro-Winkler similarity a key is not offered as "did you mean".
const SUGGESTION_THRESHOLD: f64 = 0.8;

/// The known key most like `key`, if any is close enough to be a likely typo.
pub(crate) fn nearest<'a>(key: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(key, k), k))
        .filter(|(score, _)| *score >= SUGGESTION_THRESHOLD)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// "unknown key `k` in WHERE; did you mean `x`?" (the suggestion only when one is close).
pub(crate) fn unknown_key_message<'a>(
    key: &str,
    place: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> String {
    match nearest(key, known) {
        Some(k) => format!("unknown key `{key}` in {place}; did you mean `{k}`?"),
        None => format!("unknown key `{key}` in {place}"),
    }
}

/// Splits serde's "unknown field `k`, expected one of `a`, `b`" into `k` and the
/// expected names.
fn parse_unknown_field(msg: &str) -> Option<(String, Vec<String>)> {
    let rest = msg.strip_prefix("unknown field ")?;
    let mut names = rest.split('`').skip(1).step_by(2).map(str::to_string);
    let key = names.next()?;
    Some((key, names.collect()))
}

/// Reads `value` (the table at `section`, or the whole tree when `section` is empty) as
/// `T`; `extra` are keys the caller took out beforehand (`listen`). Errors name the
/// section, the route for `[[forward.route]]`, and the key.
pub(crate) fn strict<T: DeserializeOwned>(
    value: toml::Value,
    section: &str,
    extra: &[&str],
) -> anyhow::Result<T> {
    let original = value.clone();
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let mut path: Vec<Step> = e
            .path()
            .iter()
            .filter_map(|seg| match seg {
                Segment::Seq { index } => Some(Step::Index(*index)),
                Segment::Map { key } => Some(Step::Key(key.clone())),
                Segment::Enum { variant } => Some(Step::Key(variant.clone())),
                Segment::Unknown => None,
            })
            .collect();
        // toml appends "in `a.b`" to its messages; the place is said in our own words.
        let full = e.inner().to_string();
        let msg = full
            .split("\nin `")
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        if let Some((key, mut known)) = parse_unknown_field(&msg) {
            // serde's path may end at the unknown key itself; what contains it is the place.
            if matches!(path.last(), Some(Step::Key(k)) if *k == key) {
                path.pop();
            }
            if path.is_empty() {
                known.extend(extra.iter().map(|s| s.to_string()));
            }
            let place = place(section, &path, &original);
            anyhow!(unknown_key_message(
                &key,
                &place,
                known.iter().map(String::as_str)
            ))
        } else {
            let key = match path.last() {
                Some(Step::Key(k)) => {
                    let k = k.clone();
                    path.pop();
                    Some(k)
                }
                _ => None,
            };
            let place = place(section, &path, &original);
            match key {
                Some(key) => anyhow!("invalid value for `{key}` in {place}: {msg}"),
                None => anyhow!("invalid {place}: {msg}"),
            }
        }
    })
}

/// One step of the path to a bad value.
enum Step {
    Key(String),
    Index(usize),
}

/// `[forward]`, the top level, or `[[forward.route]] #2 ("app.**")` for a path inside a
/// section (routes are named by number from 1 and their match pattern, users by name).
fn place(section: &str, path: &[Step], tree: &toml::Value) -> String {
    let mut table = section.to_string();
    let mut place = if section.is_empty() {
        "the top level".to_string()
    } else {
        format!("[{section}]")
    };
    let mut node = Some(tree);
    for step in path {
        match step {
            Step::Key(name) => {
                node = node.and_then(|n| n.get(name));
                table = if table.is_empty() {
                    name.clone()
                } else {
                    format!("{table}.{name}")
                };
                place = format!("[{table}]");
            }
            Step::Index(i) => {
                node = node.and_then(|n| n.get(*i));
                let name = node
                    .and_then(|n| n.get("match").or_else(|| n.get("username")))
                    .and_then(toml::Value::as_str)
                    .map(|m| format!(" ({m:?})"))
                    .unwrap_or_default();
                place = format!("[[{table}]] #{}{name}", i + 1);
            }
        }
    }
    place
}

/// Every key of `given` must be a key of `defaults` (for sections whose type accepts
/// anything, like the topic defaults shared with the stored topic registry).
pub(crate) fn keys_within(
    given: &toml::Value,
    defaults: &toml::Value,
    section: &str,
) -> anyhow::Result<()> {
    let (Some(given), Some(known)) = (given.as_table(), defaults.as_table()) else {
        return Ok(());
    };
    for key in given.keys() {
        if !known.contains_key(key) {
            bail!(unknown_key_message(
                key,
                &format!("[{section}]"),
                known.keys().map(String::as_str)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Route {
        #[serde(rename = "match")]
        pattern: String,
        topic: Option<String>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Section {
        shared_key: Option<String>,
        max_chunk_bytes: Option<u64>,
        route: Option<Vec<Route>>,
    }

    fn check(text: &str) -> String {
        let v: toml::Value = toml::from_str(text).unwrap();
        strict::<Section>(v, "forward", &["listen"])
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn typos_get_the_nearest_key() {
        assert_eq!(
            nearest("sharedkey", ["shared_key", "self_hostname"]),
            Some("shared_key")
        );
        assert_eq!(nearest("lisen", ["listen", "advertise"]), Some("listen"));
        assert_eq!(
            nearest("retention_msec", ["retention_ms", "retention_bytes"]),
            Some("retention_ms")
        );
        assert_eq!(nearest("zzz", ["listen", "advertise"]), None);
    }

    #[test]
    fn serde_unknown_field_messages_are_understood() {
        assert_eq!(
            parse_unknown_field("unknown field `x`, expected one of `a`, `b`"),
            Some(("x".into(), vec!["a".into(), "b".into()]))
        );
        assert_eq!(
            parse_unknown_field("unknown field `x`, expected `a` or `b`"),
            Some(("x".into(), vec!["a".into(), "b".into()]))
        );
        assert_eq!(parse_unknown_field("invalid type"), None);
    }

    #[test]
    fn unknown_key_in_a_section_names_section_and_suggestion() {
        assert_eq!(
            check("sharedkey = \"k\""),
            "unknown key `sharedkey` in [forward]; did you mean `shared_key`?"
        );
        // Keys taken out before the check still count as known.
        assert_eq!(
            check("lisen = \"127.0.0.1:1\""),
            "unknown key `lisen` in [forward]; did you mean `listen`?"
        );
    }

    #[test]
    fn unknown_key_in_a_route_names_the_route() {
        let msg =
            check("[[route]]\nmatch = \"a.*\"\n[[route]]\nmatch = \"app.**\"\ntopik = \"t\"\n");
        assert_eq!(
            msg,
            "unknown key `topik` in [[forward.route]] #2 (\"app.**\"); did you mean `topic`?"
        );
    }

    #[test]
    fn a_wrong_type_names_the_key() {
        let msg = check("max_chunk_bytes = \"big\"");
        assert!(
            msg.starts_with("invalid value for `max_chunk_bytes` in [forward]"),
            "{msg}"
        );
    }

    #[test]
    fn keys_within_defaults() {
        let defaults: toml::Value = toml::from_str("flush = \"acks\"\nretention_ms = 1").unwrap();
        let given: toml::Value = toml::from_str("retention_msec = 5").unwrap();
        assert_eq!(
            keys_within(&given, &defaults, "topics")
                .unwrap_err()
                .to_string(),
            "unknown key `retention_msec` in [topics]; did you mean `retention_ms`?"
        );
    }
}
