//! The message browser of the admin API: `GET /topics/{name}/messages` peeks at the
//! records of one partition without being a consumer (no group, no committed offset),
//! for the web console and for scripts.
//!
//! Query: `partition` (default 0) and at most one start: `offset=N`, `timestamp_ms=T`
//! (the first record at or after T, through the time index, as Kafka's ListOffsets) or
//! `tail=N` (the last N records); with none, from the log start. `limit` (default 50) is
//! capped at [`MAX_LIMIT`], and the answer stops early once [`MAX_BYTES`] of keys, values
//! and headers are in it (always at least one record), so a partition of large records
//! cannot make one request read megabytes. `next_offset` says where to go on from.
//!
//! Needs Read on the topic, as consuming it would. Records are read through
//! [`Partition::records_from`], the reader STOMP uses: compressed batches come back
//! decoded, control batches are left out, and a batch that cannot be decoded is skipped
//! with a warning there (its offsets are simply missing from the page).

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use nagare_core::security::{Operation, ResourceType};
use nagare_core::{CoreError, Partition};
use nagare_log::batch::Record;
use serde::Serialize;
use serde_json::json;

use crate::http::Ops;
use crate::http_auth::Caller;

#[path = "http_messages_render.rs"]
mod render;

use render::Rendered;

/// The most records one request returns.
const MAX_LIMIT: usize = 500;
/// Records returned when the request names no `limit`.
const DEFAULT_LIMIT: usize = 50;
/// Stop adding records once their keys, values and headers reach this many bytes.
const MAX_BYTES: usize = 4 << 20;
/// Batch bytes read from the log per step.
const READ_BYTES: u64 = 1 << 20;

/// Where to start reading, from the query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    Beginning,
    Offset(i64),
    Timestamp(i64),
    Tail(i64),
}

/// A parsed query: partition, start and how many records.
#[derive(Debug, PartialEq, Eq)]
struct Browse {
    partition: i32,
    start: Start,
    limit: usize,
}

pub(crate) async fn browse(
    State(ops): State<Ops>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    if let Err(refused) = caller.may(
        &ops.security.authorizer,
        Operation::Read,
        ResourceType::Topic,
        &name,
    ) {
        return refused.into();
    }
    let request = match parse(&query) {
        Ok(r) => r,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let Some(topic) = ops.broker.topic(&name) else {
        return error(
            StatusCode::NOT_FOUND,
            CoreError::UnknownTopic(name).to_string(),
        );
    };
    let partition = match topic.partition(request.partition) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::NOT_FOUND, e.to_string()),
    };
    // A page-cache read of up to a few MiB: off the async workers.
    match tokio::task::spawn_blocking(move || read(&partition, &request)).await {
        Ok(Ok(body)) => Json(body).into_response(),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            CoreError::ShuttingDown.to_string(),
        ),
    }
}

fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

fn parse(query: &BTreeMap<String, String>) -> Result<Browse, String> {
    let number = |name: &str| -> Result<Option<i64>, String> {
        query
            .get(name)
            .map(|v| {
                v.trim()
                    .parse::<i64>()
                    .map_err(|_| format!("{name} must be an integer, not {v:?}"))
            })
            .transpose()
    };
    if let Some(unknown) = query.keys().find(|k| {
        !matches!(
            k.as_str(),
            "partition" | "offset" | "timestamp_ms" | "tail" | "limit"
        )
    }) {
        return Err(format!(
            "unknown parameter {unknown:?} (partition, offset, timestamp_ms, tail, limit)"
        ));
    }
    let partition = match number("partition")?.unwrap_or(0) {
        p if (0..=i64::from(i32::MAX)).contains(&p) => p as i32,
        p => return Err(format!("partition must be 0 or more, not {p}")),
    };
    let starts = [
        number("offset")?.map(Start::Offset),
        number("timestamp_ms")?.map(Start::Timestamp),
        number("tail")?.map(Start::Tail),
    ];
    let mut given = starts.into_iter().flatten();
    let start = given.next().unwrap_or(Start::Beginning);
    if given.next().is_some() {
        return Err("give at most one of offset, timestamp_ms and tail".to_string());
    }
    match start {
        Start::Offset(n) | Start::Tail(n) if n < 0 => {
            return Err(format!("offset and tail must be 0 or more, not {n}"))
        }
        _ => {}
    }
    let limit = match number("limit")? {
        None => match start {
            Start::Tail(n) => usize::try_from(n).unwrap_or(MAX_LIMIT),
            _ => DEFAULT_LIMIT,
        },
        Some(n) if n > 0 => usize::try_from(n).unwrap_or(MAX_LIMIT),
        Some(n) => return Err(format!("limit must be 1 or more, not {n}")),
    }
    .min(MAX_LIMIT);
    Ok(Browse {
        partition,
        start,
        limit,
    })
}

/// The answer.
#[derive(Debug, Serialize)]
struct Page {
    topic: String,
    partition: i32,
    log_start_offset: i64,
    log_end_offset: i64,
    /// Where the next page starts: one past the last record returned.
    next_offset: i64,
    messages: Vec<Message>,
}

#[derive(Debug, Serialize)]
struct Message {
    offset: i64,
    timestamp_ms: i64,
    key: Option<Rendered>,
    value: Option<Rendered>,
    headers: Vec<Header>,
}

#[derive(Debug, Serialize)]
struct Header {
    key: String,
    value: Option<Rendered>,
}

/// Reads the records the request asks for.
fn read(partition: &Partition, request: &Browse) -> Result<Page, CoreError> {
    let log_start = partition.log_start_offset();
    let log_end = partition.log_end_offset();
    let from = match request.start {
        Start::Beginning => log_start,
        Start::Offset(n) => n.max(log_start),
        Start::Timestamp(t) => partition
            .offset_for_timestamp(t)
            .map_or(log_end, |(offset, _)| offset),
        Start::Tail(n) => log_end.saturating_sub(n).max(log_start),
    };
    let mut messages = Vec::new();
    let mut bytes = 0usize;
    let mut next = from;
    'read: while next < log_end && messages.len() < request.limit && bytes < MAX_BYTES {
        let before = next;
        let read = partition.records_from(next, READ_BYTES)?;
        for r in read.records {
            if messages.len() >= request.limit || bytes >= MAX_BYTES {
                next = r.offset;
                break 'read;
            }
            bytes += size(&r);
            next = r.offset + 1;
            messages.push(message(r));
        }
        next = next.max(read.next_offset);
        if next <= before {
            // No progress (retention moved the log under us): what we have is the answer.
            break;
        }
    }
    Ok(Page {
        topic: partition.topic().to_string(),
        partition: partition.index(),
        log_start_offset: log_start,
        log_end_offset: log_end,
        next_offset: next,
        messages,
    })
}

fn size(r: &Record) -> usize {
    let field = |b: &Option<bytes::Bytes>| b.as_ref().map_or(0, |b| b.len());
    field(&r.key)
        + field(&r.value)
        + r.headers
            .iter()
            .map(|(k, v)| k.len() + field(v))
            .sum::<usize>()
}

fn message(r: Record) -> Message {
    Message {
        offset: r.offset,
        timestamp_ms: r.timestamp,
        key: render::bytes(r.key.as_deref()),
        value: render::value(r.value.as_deref()),
        headers: r
            .headers
            .into_iter()
            .map(|(key, v)| Header {
                value: render::bytes(v.as_deref()),
                key,
            })
            .collect(),
    }
}

#[cfg(test)]
#[path = "http_messages_tests.rs"]
mod tests;
