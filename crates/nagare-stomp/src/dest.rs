//! Destinations: what a `destination` header names.

/// A parsed destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    /// `/topic/T`: Kafka topic `T` (publish/subscribe over the log).
    Topic(String),
    /// `/queue/Q`: a persistent queue with competing consumers.
    Queue(String),
    /// `/temp-queue/NAME`: this connection's private in-memory queue `NAME`.
    TempQueue(String),
    /// `/reply-queue/ID`: someone's temp queue, by the id `reply-to` was rewritten to.
    ReplyQueue(String),
}

impl Dest {
    pub fn parse(s: &str) -> Option<Dest> {
        let (kind, name) = s.strip_prefix('/')?.split_once('/')?;
        if name.is_empty() {
            return None;
        }
        let name = name.to_string();
        Some(match kind {
            "topic" => Dest::Topic(name),
            "queue" => Dest::Queue(name),
            "temp-queue" => Dest::TempQueue(name),
            "reply-queue" | "remote-temp-queue" => Dest::ReplyQueue(name),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kinds() {
        assert_eq!(Dest::parse("/topic/a.b"), Some(Dest::Topic("a.b".into())));
        assert_eq!(Dest::parse("/queue/x/y"), Some(Dest::Queue("x/y".into())));
        assert_eq!(
            Dest::parse("/temp-queue/r"),
            Some(Dest::TempQueue("r".into()))
        );
        assert_eq!(
            Dest::parse("/reply-queue/id"),
            Some(Dest::ReplyQueue("id".into()))
        );
        assert_eq!(Dest::parse("/queue/"), None);
        assert_eq!(Dest::parse("queue/x"), None);
        assert_eq!(Dest::parse("/exchange/x"), None);
    }
}
