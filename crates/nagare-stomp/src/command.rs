//! Client frames as typed commands. A decoded [`Frame`] is parsed and validated once, here:
//! every header a command needs is read once and checked (missing or invalid headers,
//! destinations), so the handlers under `session/handlers/` only apply a well-formed command to
//! the session. The ERROR texts are the ones clients have always seen.

use bytes::Bytes;

use crate::dest::Dest;
use crate::error::StompError;
use crate::frame::{Command, Frame, Version};
use crate::headers::Headers;
use crate::session::AckMode;
use crate::topic_sub::StartAt;

/// A client frame: its command and the `receipt` it asked for (any client frame may ask
/// for one; an ERROR answering the frame quotes it as `receipt-id`).
#[derive(Debug, PartialEq)]
pub(crate) struct Request {
    pub receipt: Option<String>,
    pub command: ClientCommand,
}

#[derive(Debug, PartialEq)]
pub(crate) enum ClientCommand {
    /// CONNECT or STOMP.
    Connect(Connect),
    Send(Send),
    Subscribe(Subscribe),
    Unsubscribe {
        id: String,
    },
    Ack(Settle),
    Nack {
        settle: Settle,
        /// `requeue:false` drops the messages instead of redelivering them.
        requeue: bool,
    },
    Begin {
        transaction: String,
    },
    Commit {
        transaction: String,
    },
    Abort {
        transaction: String,
    },
    Disconnect,
}

#[derive(Debug, PartialEq)]
pub(crate) struct Connect {
    /// `accept-version` as sent (None: a 1.0 client); negotiated by the handler, which
    /// answers a list without a common version with its own ERROR.
    pub accept_version: Option<String>,
    pub host: Option<String>,
    pub login: Option<String>,
    pub passcode: Option<String>,
    /// `client-id` (ActiveMQ's name for a client), shown in `GET /connections`.
    pub client_id: Option<String>,
    /// `heart-beat` as (client sends every, client wants every), ms; (0, 0) if absent.
    pub heartbeat: (u64, u64),
}

#[derive(Debug, PartialEq)]
pub(crate) struct Send {
    pub dest: Dest,
    pub transaction: Option<String>,
    /// Every header as sent (they become the record's headers).
    pub headers: Headers,
    pub body: Bytes,
}

#[derive(Debug, PartialEq)]
pub(crate) struct Subscribe {
    /// The `destination` header as sent (MESSAGEs quote it).
    pub destination: String,
    pub dest: Dest,
    pub id: String,
    pub ack: AckMode,
    /// `x-stream-offset` (topics only).
    pub start: StartAt,
    /// `prefetch-count` (or ActiveMQ's `activemq.prefetchSize`), queues only; the session
    /// bounds it.
    pub prefetch: Option<usize>,
}

/// What ACK and NACK name.
#[derive(Debug, PartialEq)]
pub(crate) struct Settle {
    /// 1.2: `id` (the MESSAGE's `ack` header); 1.0 and 1.1: `message-id`.
    pub id: String,
    pub transaction: Option<String>,
}

impl Request {
    /// Parses a client frame received on a connection speaking `version`. On error the
    /// receipt (if the frame asked for one) comes back with it, for the ERROR.
    pub(crate) fn parse(
        frame: Frame,
        version: Version,
    ) -> Result<Request, (StompError, Option<String>)> {
        let receipt = frame.header("receipt").map(str::to_string);
        match ClientCommand::parse(frame, version) {
            Ok(command) => Ok(Request { receipt, command }),
            Err(e) => Err((e, receipt)),
        }
    }
}

impl ClientCommand {
    pub(crate) fn parse(frame: Frame, version: Version) -> Result<ClientCommand, StompError> {
        let f = &frame;
        Ok(match f.command {
            Command::Connect | Command::Stomp => ClientCommand::Connect(Connect {
                accept_version: owned(f, "accept-version"),
                host: owned(f, "host"),
                login: owned(f, "login"),
                passcode: owned(f, "passcode"),
                client_id: owned(f, "client-id"),
                heartbeat: match f.header("heart-beat") {
                    None => (0, 0),
                    Some(hb) => parse_heartbeat(hb).ok_or_else(|| {
                        StompError::protocol(format!("invalid heart-beat {hb:?}"))
                    })?,
                },
            }),
            Command::Send => {
                let dest = Dest::parse(required(f, "destination")?)?;
                let transaction = owned(f, "transaction");
                ClientCommand::Send(Send {
                    dest,
                    transaction,
                    headers: frame.headers,
                    body: frame.body,
                })
            }
            Command::Subscribe => ClientCommand::Subscribe(parse_subscribe(f, version)?),
            Command::Unsubscribe => ClientCommand::Unsubscribe {
                id: f
                    .header("id")
                    .or_else(|| f.header("destination"))
                    .ok_or_else(|| StompError::missing("id", "UNSUBSCRIBE"))?
                    .to_string(),
            },
            Command::Ack => ClientCommand::Ack(parse_settle(f, version)?),
            Command::Nack => ClientCommand::Nack {
                settle: parse_settle(f, version)?,
                requeue: f.header("requeue") != Some("false"),
            },
            Command::Begin => ClientCommand::Begin {
                transaction: required(f, "transaction")?.to_string(),
            },
            Command::Commit => ClientCommand::Commit {
                transaction: required(f, "transaction")?.to_string(),
            },
            Command::Abort => ClientCommand::Abort {
                transaction: required(f, "transaction")?.to_string(),
            },
            Command::Disconnect => ClientCommand::Disconnect,
            Command::Connected | Command::Message | Command::Receipt | Command::Error => {
                return Err(StompError::protocol(format!(
                    "{} is a server frame",
                    f.command.as_str()
                )))
            }
        })
    }

    /// The transaction a SEND, ACK or NACK belongs to: it is held until COMMIT.
    pub(crate) fn transaction(&self) -> Option<&str> {
        match self {
            ClientCommand::Send(s) => s.transaction.as_deref(),
            ClientCommand::Ack(s) | ClientCommand::Nack { settle: s, .. } => {
                s.transaction.as_deref()
            }
            _ => None,
        }
    }
}

fn parse_subscribe(f: &Frame, version: Version) -> Result<Subscribe, StompError> {
    let destination = required(f, "destination")?;
    let dest = Dest::parse(destination)?;
    let id = match (f.header("id"), version) {
        (Some(id), _) => id,
        // 1.0 may omit the id: the destination is the id.
        (None, Version::V1_0) => destination,
        (None, _) => return Err(StompError::missing("id", "SUBSCRIBE")),
    };
    let ack = AckMode::parse(f.header("ack"))
        .ok_or_else(|| StompError::protocol("ack must be auto, client or client-individual"))?;
    let mut start = StartAt::Next;
    let mut prefetch = None;
    match &dest {
        Dest::Topic(_) => {
            start = StartAt::parse(f.header("x-stream-offset")).ok_or_else(|| {
                StompError::protocol("x-stream-offset must be first, last, next or an offset")
            })?;
        }
        Dest::Queue(_) => {
            let raw = f
                .header("prefetch-count")
                .or_else(|| f.header("activemq.prefetchSize"));
            if let Some(v) = raw {
                prefetch =
                    Some(v.trim().parse::<usize>().map_err(|_| {
                        StompError::protocol(format!("invalid prefetch-count {v:?}"))
                    })?);
            }
        }
        Dest::TempQueue(_) => {}
        Dest::ReplyQueue(_) => {
            return Err(StompError::protocol(
                "reply queues can be sent to, not subscribed to",
            ))
        }
    }
    Ok(Subscribe {
        destination: destination.to_string(),
        id: id.to_string(),
        dest,
        ack,
        start,
        prefetch,
    })
}

fn parse_settle(f: &Frame, version: Version) -> Result<Settle, StompError> {
    // 1.2 names the message by `id` (the MESSAGE's `ack` header) and requires it;
    // 1.0 and 1.1 use `message-id`.
    let id = if version == Version::V1_2 {
        f.header("id")
    } else {
        f.header("message-id").or_else(|| f.header("id"))
    };
    let id = id.ok_or_else(|| {
        let name = if version == Version::V1_2 {
            "id"
        } else {
            "message-id"
        };
        StompError::missing(name, f.command.as_str())
    })?;
    Ok(Settle {
        id: id.to_string(),
        transaction: owned(f, "transaction"),
    })
}

/// The value of a required header.
fn required<'a>(frame: &'a Frame, name: &str) -> Result<&'a str, StompError> {
    frame
        .header(name)
        .ok_or_else(|| StompError::missing(name, frame.command.as_str()))
}

fn owned(frame: &Frame, name: &str) -> Option<String> {
    frame.header(name).map(str::to_string)
}

fn parse_heartbeat(v: &str) -> Option<(u64, u64)> {
    let (a, b) = v.split_once(',')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(frame: Frame, version: Version) -> Result<ClientCommand, String> {
        ClientCommand::parse(frame, version).map_err(|e| e.to_string())
    }

    fn err(frame: Frame, version: Version) -> String {
        match parse(frame, version) {
            Ok(c) => panic!("parsed as {c:?}"),
            Err(e) => e,
        }
    }

    const V12: Version = Version::V1_2;

    #[test]
    fn connect_reads_its_headers_and_validates_the_heart_beat() {
        for cmd in [Command::Connect, Command::Stomp] {
            let f = Frame::new(cmd)
                .with_header("accept-version", "1.1,1.2")
                .with_header("host", "/")
                .with_header("login", "guest")
                .with_header("passcode", "pw")
                .with_header("heart-beat", "100, 200");
            assert_eq!(
                parse(f, Version::V1_0),
                Ok(ClientCommand::Connect(Connect {
                    accept_version: Some("1.1,1.2".into()),
                    host: Some("/".into()),
                    login: Some("guest".into()),
                    passcode: Some("pw".into()),
                    client_id: None,
                    heartbeat: (100, 200),
                }))
            );
        }
        let bare = parse(Frame::new(Command::Connect), Version::V1_0);
        assert!(matches!(
            bare,
            Ok(ClientCommand::Connect(Connect {
                accept_version: None,
                heartbeat: (0, 0),
                ..
            }))
        ));
        for hb in ["", "10", "a,b", "1,-1"] {
            let f = Frame::new(Command::Connect).with_header("heart-beat", hb);
            assert_eq!(err(f, Version::V1_0), format!("invalid heart-beat {hb:?}"));
        }
    }

    #[test]
    fn send_keeps_its_headers_and_body_and_parses_the_destination() {
        let f = Frame::new(Command::Send)
            .with_header("destination", "/queue/q")
            .with_header("transaction", "tx1")
            .with_header("receipt", "r1")
            .with_body(&b"hello"[..]);
        let headers = f.headers.clone();
        let ClientCommand::Send(s) = parse(f, V12).expect("send") else {
            panic!("not a send")
        };
        assert_eq!(s.dest, Dest::Queue("q".into()));
        assert_eq!(s.transaction.as_deref(), Some("tx1"));
        assert_eq!(s.headers, headers);
        assert_eq!(&s.body[..], b"hello");

        assert_eq!(
            err(Frame::new(Command::Send), V12),
            "SEND frame without the required 'destination' header"
        );
        let bad = Frame::new(Command::Send).with_header("destination", "/nowhere");
        assert!(err(bad, V12).starts_with("unknown destination \"/nowhere\""));
        let illegal = Frame::new(Command::Send).with_header("destination", "/queue/a b");
        assert!(err(illegal, V12).contains("is not a legal name"));
    }

    #[test]
    fn the_receipt_is_read_once_and_returned_with_an_error() {
        let ok = Frame::new(Command::Begin)
            .with_header("transaction", "t")
            .with_header("receipt", "r");
        let req = Request::parse(ok, V12).expect("begin");
        assert_eq!(req.receipt.as_deref(), Some("r"));
        let bad = Frame::new(Command::Begin).with_header("receipt", "r2");
        let (e, receipt) = Request::parse(bad, V12).expect_err("no transaction");
        assert_eq!(
            e.to_string(),
            "BEGIN frame without the required 'transaction' header"
        );
        assert_eq!(receipt.as_deref(), Some("r2"));
    }

    #[test]
    fn subscribe_validates_id_ack_offset_and_prefetch() {
        let sub = |d: &str| Frame::new(Command::Subscribe).with_header("destination", d);
        let ClientCommand::Subscribe(s) = parse(
            sub("/queue/q")
                .with_header("id", "s1")
                .with_header("ack", "client-individual")
                .with_header("prefetch-count", " 7 "),
            V12,
        )
        .expect("subscribe") else {
            panic!("not a subscribe")
        };
        assert_eq!(
            s,
            Subscribe {
                destination: "/queue/q".into(),
                dest: Dest::Queue("q".into()),
                id: "s1".into(),
                ack: AckMode::ClientIndividual,
                start: StartAt::Next,
                prefetch: Some(7),
            }
        );
        let ClientCommand::Subscribe(s) = parse(
            sub("/queue/q").with_header("activemq.prefetchSize", "3"),
            Version::V1_0,
        )
        .expect("1.0 subscribe") else {
            panic!("not a subscribe")
        };
        assert_eq!(
            (s.id.as_str(), s.prefetch, s.ack),
            ("/queue/q", Some(3), AckMode::Auto)
        );
        let ClientCommand::Subscribe(s) = parse(
            sub("/topic/t")
                .with_header("id", "1")
                .with_header("x-stream-offset", "first"),
            V12,
        )
        .expect("topic subscribe") else {
            panic!("not a subscribe")
        };
        assert_eq!(s.start, StartAt::First);

        assert_eq!(
            err(Frame::new(Command::Subscribe).with_header("id", "1"), V12),
            "SUBSCRIBE frame without the required 'destination' header"
        );
        assert_eq!(
            err(sub("/queue/q"), Version::V1_1),
            "SUBSCRIBE frame without the required 'id' header"
        );
        assert_eq!(
            err(
                sub("/queue/q")
                    .with_header("id", "1")
                    .with_header("ack", "sometimes"),
                V12
            ),
            "ack must be auto, client or client-individual"
        );
        assert_eq!(
            err(
                sub("/topic/t")
                    .with_header("id", "1")
                    .with_header("x-stream-offset", "soon"),
                V12
            ),
            "x-stream-offset must be first, last, next or an offset"
        );
        assert_eq!(
            err(
                sub("/queue/q")
                    .with_header("id", "1")
                    .with_header("prefetch-count", "-1"),
                V12
            ),
            "invalid prefetch-count \"-1\""
        );
        assert_eq!(
            err(sub("/reply-queue/x").with_header("id", "1"), V12),
            "reply queues can be sent to, not subscribed to"
        );
        assert!(err(sub("/queue/").with_header("id", "1"), V12).starts_with("unknown destination"));
        // Headers that only matter to another kind of destination are not validated.
        assert!(parse(
            sub("/queue/q")
                .with_header("id", "1")
                .with_header("x-stream-offset", "soon"),
            V12
        )
        .is_ok());
        assert!(parse(
            sub("/topic/t")
                .with_header("id", "1")
                .with_header("prefetch-count", "x"),
            V12
        )
        .is_ok());
    }

    #[test]
    fn unsubscribe_takes_the_id_or_the_destination() {
        let by_id = Frame::new(Command::Unsubscribe)
            .with_header("id", "s1")
            .with_header("destination", "/queue/q");
        assert_eq!(
            parse(by_id, V12),
            Ok(ClientCommand::Unsubscribe { id: "s1".into() })
        );
        let by_dest = Frame::new(Command::Unsubscribe).with_header("destination", "/queue/q");
        assert_eq!(
            parse(by_dest, Version::V1_0),
            Ok(ClientCommand::Unsubscribe {
                id: "/queue/q".into()
            })
        );
        assert_eq!(
            err(Frame::new(Command::Unsubscribe), V12),
            "UNSUBSCRIBE frame without the required 'id' header"
        );
    }

    #[test]
    fn ack_and_nack_name_the_message_as_the_version_says() {
        let f = |cmd| {
            Frame::new(cmd)
                .with_header("message-id", "m")
                .with_header("id", "i")
                .with_header("transaction", "t")
        };
        let settle = |id: &str| Settle {
            id: id.into(),
            transaction: Some("t".into()),
        };
        assert_eq!(
            parse(f(Command::Ack), V12),
            Ok(ClientCommand::Ack(settle("i")))
        );
        assert_eq!(
            parse(f(Command::Ack), Version::V1_1),
            Ok(ClientCommand::Ack(settle("m")))
        );
        assert_eq!(
            parse(
                f(Command::Nack).with_header("requeue", "false"),
                Version::V1_1
            ),
            Ok(ClientCommand::Nack {
                settle: settle("m"),
                requeue: false
            })
        );
        assert!(matches!(
            parse(f(Command::Nack), V12),
            Ok(ClientCommand::Nack { requeue: true, .. })
        ));
        // 1.0 and 1.1 fall back to `id`; 1.2 requires it.
        let only_id = Frame::new(Command::Ack).with_header("id", "i");
        assert!(
            matches!(parse(only_id, Version::V1_0), Ok(ClientCommand::Ack(Settle { id, transaction: None })) if id == "i")
        );
        let only_message_id = Frame::new(Command::Nack).with_header("message-id", "m");
        assert_eq!(
            err(only_message_id, V12),
            "NACK frame without the required 'id' header"
        );
        assert_eq!(
            err(Frame::new(Command::Ack), Version::V1_1),
            "ACK frame without the required 'message-id' header"
        );
        assert_eq!(
            parse(f(Command::Ack), V12).map(|c| c.transaction().map(str::to_string)),
            Ok(Some("t".into()))
        );
    }

    #[test]
    fn transaction_commands_require_the_transaction() {
        for (cmd, name) in [
            (Command::Begin, "BEGIN"),
            (Command::Commit, "COMMIT"),
            (Command::Abort, "ABORT"),
        ] {
            let c = parse(Frame::new(cmd).with_header("transaction", "t"), V12).expect("parses");
            let tx = match c {
                ClientCommand::Begin { transaction }
                | ClientCommand::Commit { transaction }
                | ClientCommand::Abort { transaction } => transaction,
                other => panic!("{other:?}"),
            };
            assert_eq!(tx, "t");
            assert_eq!(
                err(Frame::new(cmd), V12),
                format!("{name} frame without the required 'transaction' header")
            );
        }
    }

    #[test]
    fn disconnect_parses_and_server_frames_are_refused() {
        assert_eq!(
            parse(Frame::new(Command::Disconnect), V12),
            Ok(ClientCommand::Disconnect)
        );
        for cmd in [
            Command::Connected,
            Command::Message,
            Command::Receipt,
            Command::Error,
        ] {
            assert_eq!(
                err(Frame::new(cmd), V12),
                format!("{} is a server frame", cmd.as_str())
            );
        }
    }
}
