//! Consumer groups in the admin API: `GET /groups`, `GET /groups/{id}` (members, their
//! assignments, committed offsets with lag), `POST /groups/{id}/offsets` (reset, as
//! `kafka-consumer-groups.sh --reset-offsets`) and `DELETE /groups/{id}`.
//!
//! ACLs are Kafka's for the same requests: Describe on the group to see it (ListGroups
//! leaves out the others), Describe on a topic to see the group's offsets of it; Read on
//! the group and on the topic to reset (an OffsetCommit); Delete on the group to delete.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::{Extension, Json};
use nagare_core::groups::{GroupState, OffsetLag, ResetError, ResetTo};
use nagare_core::security::{Operation, ResourceType};
use serde::{Deserialize, Serialize};

use crate::http::Ops;
use crate::http_auth::Caller;
use crate::http_error::{core, error};

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct GroupSummary {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
    pub members: usize,
    /// Sum of the lag of every committed offset whose partition still exists.
    pub lag: i64,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct GroupDetail {
    pub group_id: String,
    pub state: String,
    pub protocol_type: String,
    pub protocol_name: String,
    pub members: Vec<MemberInfo>,
    pub offsets: Vec<OffsetInfo>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct MemberInfo {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub assignment: Vec<Assigned>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Assigned {
    pub topic: String,
    pub partitions: Vec<i32>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct OffsetInfo {
    pub topic: String,
    pub partition: i32,
    pub committed_offset: i64,
    /// `null` when the partition no longer exists.
    pub log_end_offset: Option<i64>,
    pub lag: Option<i64>,
    pub metadata: String,
}

impl From<OffsetLag> for OffsetInfo {
    fn from(o: OffsetLag) -> OffsetInfo {
        OffsetInfo {
            topic: o.topic,
            partition: o.partition,
            committed_offset: o.committed_offset,
            log_end_offset: o.log_end_offset,
            lag: o.lag,
            metadata: o.metadata,
        }
    }
}

/// Where to move the offsets: `"earliest"`, `"latest"`, `{"offset": N}`,
/// `{"timestamp_ms": N}` or `{"shift_by": N}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Target {
    Named(NamedTarget),
    Offset { offset: i64 },
    Timestamp { timestamp_ms: i64 },
    ShiftBy { shift_by: i64 },
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum NamedTarget {
    Earliest,
    Latest,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ResetRequest {
    pub topic: String,
    pub to: Target,
    /// Only these partitions [default: every partition of the topic].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Vec<i32>>,
    /// Answer with the offsets a reset would set, and change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

fn reset_to(t: &Target) -> ResetTo {
    match *t {
        Target::Named(NamedTarget::Earliest) => ResetTo::Earliest,
        Target::Named(NamedTarget::Latest) => ResetTo::Latest,
        Target::Offset { offset } => ResetTo::Offset(offset),
        Target::Timestamp { timestamp_ms } => ResetTo::Timestamp(timestamp_ms),
        Target::ShiftBy { shift_by } => ResetTo::ShiftBy(shift_by),
    }
}

/// Groups the caller may describe.
pub(crate) async fn list(
    State(s): State<Ops>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Vec<GroupSummary>>, Response> {
    let authz = &s.security.authorizer;
    let coordinator = &core(&s)?.groups;
    let groups = coordinator
        .list_groups()
        .into_iter()
        .filter(|g| {
            caller
                .may(authz, Operation::Describe, ResourceType::Group, &g.group_id)
                .is_ok()
        })
        .map(|g| GroupSummary {
            members: coordinator.describe_group(&g.group_id).members.len(),
            lag: coordinator.total_lag(&s.broker, &g.group_id),
            state: g.state.as_str().to_string(),
            protocol_type: g.protocol_type,
            group_id: g.group_id,
        })
        .collect();
    Ok(Json(groups))
}

pub(crate) async fn describe(
    State(s): State<Ops>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<GroupDetail>, Response> {
    let authz = &s.security.authorizer;
    caller.may(authz, Operation::Describe, ResourceType::Group, &id)?;
    let coordinator = &core(&s)?.groups;
    let d = coordinator.describe_group(&id);
    let offsets = coordinator.offsets_with_lag(&s.broker, &id);
    if d.state == GroupState::Dead && offsets.is_empty() {
        return Err(error(StatusCode::NOT_FOUND, format!("no group {id:?}")));
    }
    let members = d
        .members
        .into_iter()
        .map(|m| MemberInfo {
            assignment: if d.protocol_type == "consumer" {
                nagare_kafka::consumer_protocol::assignment_partitions(&m.assignment)
                    .into_iter()
                    .map(|(topic, partitions)| Assigned { topic, partitions })
                    .collect()
            } else {
                Vec::new()
            },
            member_id: m.member_id,
            group_instance_id: m.group_instance_id,
            client_id: m.client_id,
            client_host: m.client_host,
        })
        .collect();
    let offsets = offsets
        .into_iter()
        .filter(|o| {
            caller
                .may(authz, Operation::Describe, ResourceType::Topic, &o.topic)
                .is_ok()
        })
        .map(OffsetInfo::from)
        .collect();
    Ok(Json(GroupDetail {
        group_id: d.group_id,
        state: d.state.as_str().to_string(),
        protocol_type: d.protocol_type,
        protocol_name: d.protocol_name,
        members,
        offsets,
    }))
}

pub(crate) async fn reset_offsets(
    State(s): State<Ops>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Json(req): Json<ResetRequest>,
) -> Result<Json<Vec<OffsetInfo>>, Response> {
    let authz = &s.security.authorizer;
    caller.may(authz, Operation::Read, ResourceType::Group, &id)?;
    caller.may(authz, Operation::Read, ResourceType::Topic, &req.topic)?;
    let coordinator = &core(&s)?.groups;
    let to = reset_to(&req.to);
    let partitions = req.partitions.as_deref();
    let result = if req.dry_run {
        coordinator.preview_reset(&s.broker, &id, &req.topic, partitions, to)
    } else {
        coordinator
            .reset_offsets(&s.broker, &id, &req.topic, partitions, to)
            .await
    };
    result
        .map(|offsets| Json(offsets.into_iter().map(OffsetInfo::from).collect()))
        .map_err(reset_error)
}

fn reset_error(e: ResetError) -> Response {
    let status = match &e {
        ResetError::NotEmpty(_) | ResetError::NothingCommitted { .. } => StatusCode::CONFLICT,
        ResetError::UnknownTopic(_) | ResetError::UnknownPartition { .. } => StatusCode::NOT_FOUND,
        ResetError::Group(nagare_core::groups::GroupError::InvalidGroupId) => {
            StatusCode::BAD_REQUEST
        }
        ResetError::Group(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, e)
}

pub(crate) async fn delete(
    State(s): State<Ops>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<StatusCode, Response> {
    caller.may(
        &s.security.authorizer,
        Operation::Delete,
        ResourceType::Group,
        &id,
    )?;
    let results = core(&s)?
        .groups
        .delete_groups(std::slice::from_ref(&id))
        .await;
    match results.into_iter().next() {
        Some(Ok(())) => Ok(StatusCode::NO_CONTENT),
        Some(Err(nagare_core::groups::GroupError::GroupIdNotFound)) | None => {
            Err(error(StatusCode::NOT_FOUND, format!("no group {id:?}")))
        }
        Some(Err(nagare_core::groups::GroupError::NonEmptyGroup)) => Err(error(
            StatusCode::CONFLICT,
            format!("group {id:?} has members: stop its consumers first"),
        )),
        Some(Err(e)) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, e)),
    }
}
