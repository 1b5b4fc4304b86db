//! One file per client command. Each is a method on [`Session`](crate::session::Session);
//! an `Err` is answered with ERROR and closes the connection.

mod abort;
mod ack;
mod begin;
mod commit;
mod connect;
mod disconnect;
mod nack;
pub(crate) mod send;
mod subscribe;
mod unsubscribe;

use crate::error::StompError;
use crate::frame::Frame;

/// The value of a required header.
pub(crate) fn required<'a>(frame: &'a Frame, name: &str) -> Result<&'a str, StompError> {
    frame
        .header(name)
        .ok_or_else(|| StompError::missing(name, frame.command.as_str()))
}
