//! Why a body was refused before decoding.

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::buf::NotEnoughBytesError;

/// A body the guard will not let the codec decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// The body does not read as its message at that version: a field cut short, a
    /// negative length, an array count larger than the bytes left, a version the message
    /// does not have, a tagged field the version does not know.
    #[error("{0}")]
    Malformed(String),
    /// No response walker is generated for this API key (the generator's `RESPONSES`
    /// list names the responses nagare decodes).
    #[error("no response guard for {0:?}")]
    NoResponseGuard(ApiKey),
}

/// The walkers' result, named as in the codec's decode bodies they are rewritten from.
pub(crate) type Result<T> = std::result::Result<T, GuardError>;

/// The only codec call left in the walkers is `try_get_bytes` for an unknown tagged
/// field's value.
impl From<NotEnoughBytesError> for GuardError {
    fn from(_: NotEnoughBytesError) -> GuardError {
        GuardError::Malformed("truncated tagged field".into())
    }
}

/// `bail!` as the codec's decode bodies spell it, returning [`GuardError::Malformed`].
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::error::GuardError::Malformed(format!($($arg)*)))
    };
}
pub(crate) use bail;
