//! Destinations: what a `destination` header names.
//!
//! Log destinations map one to one onto topics: `/topic/T` is topic `T` and `/queue/Q` is
//! topic `queue.Q`. A name that is not a legal topic name (Kafka's rule: ASCII letters,
//! digits, `.`, `_` and `-`, at most 249 characters) is refused rather than rewritten, so
//! two different destinations can never share a topic (`/queue/a b` and `/queue/a_b`
//! would, if the space were replaced). No encoding can both keep every legal name as it
//! is and give the illegal ones names of their own, so refusing is the only reversible
//! choice.

use nagare_core::queues::TOPIC_PREFIX;
use nagare_core::{validate_prefixed_topic_name, validate_topic_name};

/// A parsed destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    /// `/topic/T`: Kafka topic `T` (publish/subscribe over the log).
    Topic(String),
    /// `/queue/Q`: a persistent queue with competing consumers, in topic `queue.Q`.
    Queue(String),
    /// `/temp-queue/NAME`: this connection's private in-memory queue `NAME`.
    TempQueue(String),
    /// `/reply-queue/ID`: someone's temp queue, by the id `reply-to` was rewritten to.
    ReplyQueue(String),
}

/// Why a `destination` header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DestError {
    #[error(
        "unknown destination {0:?} (use /topic/T, /queue/Q, /temp-queue/NAME or /reply-queue/ID)"
    )]
    Unknown(String),
    #[error(
        "destination {dest:?} is not a legal name: {reason}; topic and queue names may only \
         contain ASCII letters, digits, '.', '_' and '-' (at most 249 characters for a topic, \
         {} for a queue)",
        249 - TOPIC_PREFIX.len()
    )]
    IllegalName { dest: String, reason: String },
}

impl Dest {
    pub fn parse(s: &str) -> Result<Dest, DestError> {
        let unknown = || DestError::Unknown(s.to_string());
        let (kind, name) = s
            .strip_prefix('/')
            .and_then(|rest| rest.split_once('/'))
            .ok_or_else(unknown)?;
        if name.is_empty() {
            return Err(unknown());
        }
        let dest = match kind {
            "topic" => Dest::Topic(name.to_string()),
            "queue" => Dest::Queue(name.to_string()),
            "temp-queue" => Dest::TempQueue(name.to_string()),
            "reply-queue" | "remote-temp-queue" => Dest::ReplyQueue(name.to_string()),
            _ => return Err(unknown()),
        };
        let valid = match &dest {
            Dest::Topic(name) => validate_topic_name(name),
            Dest::Queue(name) => validate_prefixed_topic_name(TOPIC_PREFIX, name),
            Dest::TempQueue(_) | Dest::ReplyQueue(_) => Ok(()),
        };
        valid.map_err(|e| DestError::IllegalName {
            dest: s.to_string(),
            reason: match e {
                nagare_core::CoreError::InvalidTopicName { reason, .. } => reason.to_string(),
                other => other.to_string(),
            },
        })?;
        Ok(dest)
    }

    /// The topic a log destination is stored in (None for temp and reply queues).
    pub fn topic_name(&self) -> Option<String> {
        match self {
            Dest::Topic(name) => Some(name.clone()),
            Dest::Queue(name) => Some(format!("{TOPIC_PREFIX}{name}")),
            Dest::TempQueue(_) | Dest::ReplyQueue(_) => None,
        }
    }
}

/// The destination as a client writes it.
impl std::fmt::Display for Dest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, name) = match self {
            Dest::Topic(n) => ("topic", n),
            Dest::Queue(n) => ("queue", n),
            Dest::TempQueue(n) => ("temp-queue", n),
            Dest::ReplyQueue(n) => ("reply-queue", n),
        };
        write!(f, "/{kind}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kinds() {
        assert_eq!(Dest::parse("/topic/a.b"), Ok(Dest::Topic("a.b".into())));
        assert_eq!(Dest::parse("/queue/x-y_z"), Ok(Dest::Queue("x-y_z".into())));
        assert_eq!(
            Dest::parse("/temp-queue/r"),
            Ok(Dest::TempQueue("r".into()))
        );
        assert_eq!(
            Dest::parse("/reply-queue/id"),
            Ok(Dest::ReplyQueue("id".into()))
        );
        for s in ["/topic/a.b", "/queue/q", "/temp-queue/t", "/reply-queue/r"] {
            assert_eq!(Dest::parse(s).map(|d| d.to_string()).as_deref(), Ok(s));
        }
        for bad in ["/queue/", "queue/x", "/exchange/x", "/topic"] {
            assert!(
                matches!(Dest::parse(bad), Err(DestError::Unknown(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn legal_names_map_one_to_one_and_illegal_ones_are_refused() {
        assert_eq!(
            Dest::parse("/queue/bad_name").map(|d| d.topic_name()),
            Ok(Some("queue.bad_name".into()))
        );
        assert_eq!(
            Dest::parse("/topic/T").map(|d| d.topic_name()),
            Ok(Some("T".into()))
        );
        for bad in [
            "/queue/bad name",
            "/queue/x/y",
            "/topic/caf\u{e9}",
            "/topic/..",
            "/topic/a:b",
        ] {
            let err = Dest::parse(bad).unwrap_err();
            assert!(matches!(err, DestError::IllegalName { .. }), "{bad}");
            assert!(err.to_string().contains("ASCII letters"), "{err}");
        }
        // The queue prefix counts against the 249 characters of a topic name.
        let longest = format!("/queue/{}", "q".repeat(249 - TOPIC_PREFIX.len()));
        assert!(Dest::parse(&longest).is_ok());
        let too_long = format!("/queue/{}", "q".repeat(250 - TOPIC_PREFIX.len()));
        assert!(Dest::parse(&too_long).is_err());
        assert!(Dest::parse(&format!("/topic/{}", "t".repeat(249))).is_ok());
        assert!(Dest::parse(&format!("/topic/{}", "t".repeat(250))).is_err());
        // Temp-queue names never become topics; any name is fine.
        assert!(Dest::parse("/temp-queue/any name").is_ok());
    }
}
