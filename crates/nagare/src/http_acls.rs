//! The ACL routes of the HTTP admin API, used by `nagare acl`: `GET /acls` lists the ACLs
//! a filter matches (Describe on the cluster, as Kafka's DescribeAcls), `POST /acls` adds
//! one and `DELETE /acls` removes those a filter matches (Alter on the cluster, as
//! CreateAcls/DeleteAcls). Fields are words (see [`crate::acl_names`]), in the query
//! string for filters and in the JSON body for a new ACL.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use nagare_core::security::{Operation, Security};

use crate::acl_names::AclWords;
use crate::http_auth::{Caller, Forbidden};

fn error(status: StatusCode, message: String) -> Response {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}

fn bad_request(message: String) -> Response {
    error(StatusCode::BAD_REQUEST, message)
}

fn may(caller: &Caller, security: &Security, op: Operation) -> Result<(), Forbidden> {
    caller.may_on_cluster(&security.authorizer, op)
}

pub(crate) async fn list(
    State(security): State<Security>,
    Extension(caller): Extension<Caller>,
    Query(filter): Query<AclWords>,
) -> Result<Json<Vec<AclWords>>, Response> {
    may(&caller, &security, Operation::Describe)?;
    let filter = filter.filter().map_err(bad_request)?;
    let acls = security.authorizer.describe(&filter);
    Ok(Json(acls.iter().map(AclWords::of).collect()))
}

pub(crate) async fn add(
    State(security): State<Security>,
    Extension(caller): Extension<Caller>,
    Json(words): Json<AclWords>,
) -> Result<(StatusCode, Json<AclWords>), Response> {
    may(&caller, &security, Operation::Alter)?;
    let binding = words.binding().map_err(bad_request)?;
    let result = security.authorizer.create(vec![binding.clone()]).await;
    match result.into_iter().next() {
        Some(Ok(())) => {
            tracing::info!(by = %caller.principal, acl = ?binding, "ACL added");
            Ok((StatusCode::CREATED, Json(AclWords::of(&binding))))
        }
        Some(Err(e)) => Err(bad_request(e.to_string())),
        None => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "no answer for the ACL".into(),
        )),
    }
}

pub(crate) async fn delete(
    State(security): State<Security>,
    Extension(caller): Extension<Caller>,
    Query(filter): Query<AclWords>,
) -> Result<Json<Vec<AclWords>>, Response> {
    may(&caller, &security, Operation::Alter)?;
    let filter = filter.filter().map_err(bad_request)?;
    let deleted = security
        .authorizer
        .delete(vec![filter])
        .await
        .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let deleted: Vec<AclWords> = deleted.iter().flatten().map(AclWords::of).collect();
    tracing::info!(by = %caller.principal, count = deleted.len(), "ACLs deleted");
    Ok(Json(deleted))
}
