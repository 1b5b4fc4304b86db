//! One file per client command. Each applies an already parsed and validated command
//! ([`crate::command`]) as a method on [`Session`](crate::session::Session); an `Err` is
//! answered with ERROR and closes the connection. Receipts are the dispatcher's job
//! (`crate::dispatch`), except where a handler decides when they are owed (SEND).

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
