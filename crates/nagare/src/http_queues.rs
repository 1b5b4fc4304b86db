//! STOMP queues in the admin API: `GET /queues`, `GET /queues/{name}` and
//! `POST /queues/{name}/purge`. A queue is named as STOMP clients name it (`/queue/Q` is
//! queue `Q`) and lives in topic `queue.Q`, so its ACLs are that topic's, as for STOMP
//! clients: Describe to see it, Delete to purge it (Kafka's DeleteRecords asks the same).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::{Extension, Json};
use nagare_core::queues::{topic_for, QueueInfo};
use nagare_core::security::{Operation, ResourceType};
use nagare_core::CoreError;
use serde::{Deserialize, Serialize};

use crate::http::Ops;
use crate::http_auth::Caller;
use crate::http_error::{core, error};

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct QueueView {
    pub name: String,
    pub topic: String,
    /// Messages waiting for a consumer.
    pub depth: u64,
    /// Delivered, not yet acknowledged.
    pub unacked: u64,
    pub consumers: u64,
    /// Messages delivered again since the broker started.
    pub redeliveries: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_start_offset: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_end_offset: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Purged {
    pub purged: u64,
}

fn view(q: QueueInfo, offsets: bool) -> QueueView {
    QueueView {
        name: q.name,
        topic: q.topic,
        depth: q.stats.depth,
        unacked: q.stats.unacked,
        consumers: q.stats.consumers,
        redeliveries: q.stats.redeliveries,
        log_start_offset: offsets.then_some(q.log_start_offset),
        log_end_offset: offsets.then_some(q.log_end_offset),
    }
}

/// Queues whose topic the caller may describe.
pub(crate) async fn list(
    State(s): State<Ops>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Vec<QueueView>>, Response> {
    let authz = &s.security.authorizer;
    Ok(Json(
        core(&s)?
            .queues
            .list()
            .into_iter()
            .filter(|q| {
                caller
                    .may(authz, Operation::Describe, ResourceType::Topic, &q.topic)
                    .is_ok()
            })
            .map(|q| view(q, false))
            .collect(),
    ))
}

pub(crate) async fn describe(
    State(s): State<Ops>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Json<QueueView>, Response> {
    caller.may(
        &s.security.authorizer,
        Operation::Describe,
        ResourceType::Topic,
        &topic_for(&name),
    )?;
    core(&s)?
        .queues
        .info(&name)
        .map(|q| Json(view(q, true)))
        .ok_or_else(|| error(StatusCode::NOT_FOUND, format!("no queue {name:?}")))
}

pub(crate) async fn purge(
    State(s): State<Ops>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Json<Purged>, Response> {
    caller.may(
        &s.security.authorizer,
        Operation::Delete,
        ResourceType::Topic,
        &topic_for(&name),
    )?;
    match core(&s)?.queues.purge(&name).await {
        Ok(purged) => Ok(Json(Purged { purged })),
        Err(CoreError::UnknownTopic(_)) => {
            Err(error(StatusCode::NOT_FOUND, format!("no queue {name:?}")))
        }
        Err(CoreError::ShuttingDown) => Err(crate::http_error::shutting_down()),
        Err(e) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, e)),
    }
}
