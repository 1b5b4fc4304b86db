use crate::CoreError;

/// Kafka's rule: 1..=249 characters of `[a-zA-Z0-9._-]`, and not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), CoreError> {
    let bad = |reason| {
        Err(CoreError::InvalidTopicName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name == "." || name == ".." {
        return bad("'.' and '..' are reserved");
    }
    if name.len() > 249 {
        return bad("longer than 249 characters");
    }
    if !name.bytes().all(is_legal) {
        return bad("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// [`validate_topic_name`] of `prefix` + `name`, without building the name when it is
/// legal (a STOMP SEND to a queue checks its topic name on every frame).
pub fn validate_prefixed_topic_name(prefix: &str, name: &str) -> Result<(), CoreError> {
    // Three or more bytes can be neither empty nor `.` nor `..`.
    let len = prefix.len() + name.len();
    if (3..=249).contains(&len) && prefix.bytes().chain(name.bytes()).all(is_legal) {
        return Ok(());
    }
    validate_topic_name(&format!("{prefix}{name}"))
}

/// Maps any string to a legal topic name by replacing illegal characters with `_`
/// (used for forward tags and STOMP destinations without an explicit route).
pub fn sanitize_topic_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii() && is_legal(c as u8) {
                c
            } else {
                '_'
            }
        })
        .take(249)
        .collect();
    if out.is_empty() || out == "." || out == ".." {
        out = out.replace('.', "_");
        if out.is_empty() {
            out.push('_');
        }
    }
    out
}

fn is_legal(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixed_names_check_as_the_whole_name() {
        for (p, n) in [
            ("queue.", "a"),
            ("", "ab"),
            ("", "."),
            ("", ".."),
            ("q", "."),
            ("", "abc"),
        ] {
            assert_eq!(
                validate_prefixed_topic_name(p, n).is_ok(),
                validate_topic_name(&format!("{p}{n}")).is_ok(),
                "{p:?} {n:?}"
            );
        }
        assert!(validate_prefixed_topic_name("queue.", "a b").is_err());
        assert!(validate_prefixed_topic_name("queue.", &"q".repeat(243)).is_ok());
        assert!(validate_prefixed_topic_name("queue.", &"q".repeat(244)).is_err());
    }

    #[test]
    fn legal_and_illegal_names() {
        assert!(validate_topic_name("app.logs-1_x").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("a/b").is_err());
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
    }

    #[test]
    fn sanitize_replaces_illegal_characters() {
        assert_eq!(sanitize_topic_name("app/web:1"), "app_web_1");
        assert_eq!(sanitize_topic_name(".."), "__");
        assert_eq!(sanitize_topic_name(""), "_");
        assert!(validate_topic_name(&sanitize_topic_name("héllo wörld")).is_ok());
    }
}
