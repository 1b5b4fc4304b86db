use thiserror::Error;

/// Why bytes are not a valid STOMP frame. Every one of these is answered with ERROR and
/// the connection is closed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FrameError {
    #[error("unknown command {0:?}")]
    UnknownCommand(String),
    #[error("frame larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("more than {limit} headers")]
    TooManyHeaders { limit: usize },
    #[error("header line longer than {limit} bytes")]
    HeaderTooLong { limit: usize },
    #[error("header line without ':'")]
    MissingColon,
    #[error("invalid escape sequence in header: \\{0}")]
    BadEscape(char),
    #[error("header is not UTF-8")]
    NotUtf8,
    #[error("invalid content-length {0:?}")]
    BadContentLength(String),
    #[error("body of content-length {0} not followed by NUL")]
    MissingNul(usize),
    #[error("carriage return not followed by line feed")]
    BareCarriageReturn,
}

/// Why a frame was refused: answered with ERROR, then the connection is closed.
#[derive(Debug, Error)]
pub enum StompError {
    #[error("malformed frame: {0}")]
    Frame(#[from] FrameError),
    #[error("{0}")]
    Protocol(String),
    #[error(transparent)]
    Dest(#[from] crate::dest::DestError),
    /// A SEND larger than its topic's record limit, quoted in STOMP's terms.
    #[error(
        "message body of {body} bytes exceeds the limit of {limit} bytes (max.message.bytes \
         of topic {topic}; with its headers the message takes {size} bytes as a record)"
    )]
    TooLarge {
        body: usize,
        size: usize,
        limit: usize,
        topic: String,
    },
    #[error("broker error: {0}")]
    Core(#[from] nagare_core::CoreError),
    /// Wrong or missing credentials. Deliberately silent on whether the user exists.
    #[error("Authentication failed: bad login or passcode")]
    AuthenticationFailed,
    /// An ACL refuses this SEND or SUBSCRIBE.
    #[error(
        "Access refused: {principal} is not authorized to {operation} topic {topic} \
         (destination {destination})"
    )]
    NotAuthorized {
        principal: String,
        operation: &'static str,
        topic: String,
        destination: String,
    },
}

impl StompError {
    /// The `reason` label of `nagare_rejected_total{protocol="stomp"}`.
    pub fn reason(&self) -> &'static str {
        match self {
            StompError::Frame(FrameError::TooLarge { .. })
            | StompError::Frame(FrameError::TooManyHeaders { .. })
            | StompError::Frame(FrameError::HeaderTooLong { .. }) => "frame_too_large",
            StompError::Frame(_) => "malformed_frame",
            StompError::Protocol(_) => "protocol",
            StompError::Dest(_) => "bad_destination",
            StompError::TooLarge { .. }
            | StompError::Core(nagare_core::CoreError::MessageTooLarge { .. }) => {
                "message_too_large"
            }
            StompError::Core(_) => "broker_error",
            StompError::AuthenticationFailed => "authentication_failed",
            StompError::NotAuthorized { .. } => "not_authorized",
        }
    }

    pub fn protocol(msg: impl Into<String>) -> StompError {
        StompError::Protocol(msg.into())
    }

    pub fn missing(header: &str, command: &str) -> StompError {
        StompError::Protocol(format!(
            "{command} frame without the required '{header}' header"
        ))
    }
}
