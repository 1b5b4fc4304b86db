//! `GET /forward/routes`: the main forward listener's routes in configuration order with
//! their counters, then one entry for tags no route matched (`"pattern": "(unmatched)"`,
//! stored in a topic named after the tag). `topic` is the configured topic; `""` means
//! "the tag itself", `null` a `drop` route. `events` and `bytes` are what was stored;
//! `dead_lettered` the events refused (sent to the dead-letter topic when one is set).
//! Cluster Describe, like the other broker-wide reads.

use axum::extract::State;
use axum::response::Response;
use axum::{Extension, Json};
use nagare_core::security::Operation;
use serde::Serialize;

use crate::http::Ops;
use crate::http_auth::Caller;

#[derive(Debug, Serialize)]
pub(crate) struct RouteView {
    pub pattern: String,
    pub topic: Option<String>,
    pub drop: bool,
    pub events: u64,
    pub bytes: u64,
    pub dead_lettered: u64,
}

pub(crate) async fn list(
    State(ops): State<Ops>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Vec<RouteView>>, Response> {
    caller.may_on_cluster(&ops.security.authorizer, Operation::Describe)?;
    let Some(forward) = &ops.forward else {
        return Ok(Json(Vec::new()));
    };
    Ok(Json(
        forward
            .router
            .stats()
            .iter()
            .map(|r| {
                let c = r.counts();
                RouteView {
                    pattern: r.pattern.clone().unwrap_or_else(|| "(unmatched)".into()),
                    topic: r.topic.clone(),
                    drop: r.topic.is_none(),
                    events: c.events,
                    bytes: c.bytes,
                    dead_lettered: c.dead_lettered,
                }
            })
            .collect(),
    ))
}
