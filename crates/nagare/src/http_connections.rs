//! `GET /connections`: every open connection of every listener (Kafka, STOMP, forward and
//! the HTTP API itself), from the listener layer's registry. Cluster Describe, like the
//! other broker-wide reads.

use axum::extract::State;
use axum::response::Response;
use axum::{Extension, Json};
use nagare_core::security::Operation;
use nagare_listener::ConnectionInfo;
use serde::Serialize;

use crate::http::Ops;
use crate::http_auth::Caller;

/// One open connection. `client_id` is what the client calls itself (Kafka `client.id`,
/// STOMP `client-id` or `host` header); `user` who logged in (SASL, STOMP login, forward
/// user, TLS certificate), both `null` until known.
#[derive(Debug, Serialize)]
pub(crate) struct ConnectionView {
    pub id: u64,
    pub protocol: &'static str,
    pub listener: &'static str,
    pub peer: String,
    pub client_id: Option<String>,
    pub user: Option<String>,
    pub opened_at_ms: i64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

impl From<&ConnectionInfo> for ConnectionView {
    fn from(c: &ConnectionInfo) -> ConnectionView {
        ConnectionView {
            id: c.id(),
            protocol: c.protocol(),
            listener: c.listener(),
            peer: c.peer().to_string(),
            client_id: c.client_id().map(|s| s.to_string()),
            user: c.user().map(|s| s.to_string()),
            opened_at_ms: c.opened_at_ms(),
            bytes_in: c.bytes_in(),
            bytes_out: c.bytes_out(),
        }
    }
}

pub(crate) async fn list(
    State(ops): State<Ops>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Vec<ConnectionView>>, Response> {
    caller.may_on_cluster(&ops.security.authorizer, Operation::Describe)?;
    Ok(Json(
        ops.connections
            .snapshot()
            .iter()
            .map(|c| ConnectionView::from(c.as_ref()))
            .collect(),
    ))
}
