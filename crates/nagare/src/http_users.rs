//! The user routes of the HTTP admin API, used by `nagare user` against a running
//! broker: `GET /users` (Describe on the cluster), `POST /users` and
//! `DELETE /users/{name}` (Alter on the cluster, as Kafka's
//! Describe/AlterUserScramCredentials). Passwords come in request bodies only and are
//! never echoed or logged.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use nagare_core::security::{Operation, Security, UserInfo};
use nagare_core::CoreError;
use serde::{Deserialize, Serialize};

use crate::http_auth::Caller;

/// A user as `GET /users` shows it (never a credential).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct UserView {
    pub name: String,
    pub plain: bool,
    pub forward: bool,
    pub scram: Vec<ScramView>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ScramView {
    pub mechanism: String,
    pub iterations: u32,
}

/// `POST /users`.
#[derive(Serialize, Deserialize)]
pub(crate) struct AddUser {
    pub name: String,
    pub password: String,
    #[serde(default)]
    pub forward: bool,
}

pub(crate) fn view(u: &UserInfo) -> UserView {
    UserView {
        name: u.name.clone(),
        plain: u.plain,
        forward: u.forward,
        scram: u
            .scram
            .iter()
            .map(|(m, i)| ScramView {
                mechanism: m.sasl_name().to_string(),
                iterations: *i,
            })
            .collect(),
    }
}

fn error(status: StatusCode, message: String) -> Response {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}

fn core_error(e: CoreError) -> Response {
    let status = match e {
        CoreError::InvalidUser { .. } => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, e.to_string())
}

pub(crate) async fn list(
    State(security): State<Security>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Vec<UserView>>, Response> {
    caller.may_on_cluster(&security.authorizer, Operation::Describe)?;
    Ok(Json(security.users.list().iter().map(view).collect()))
}

pub(crate) async fn add(
    State(security): State<Security>,
    Extension(caller): Extension<Caller>,
    Json(req): Json<AddUser>,
) -> Result<(StatusCode, Json<UserView>), Response> {
    caller.may_on_cluster(&security.authorizer, Operation::Alter)?;
    let existed = security.users.get(&req.name).is_some();
    security
        .users
        .add(&req.name, &req.password, req.forward)
        .await
        .map_err(core_error)?;
    tracing::info!(user = %req.name, by = %caller.principal, forward = req.forward, "user {}", if existed { "updated" } else { "added" });
    let info = security
        .users
        .get(&req.name)
        .ok_or_else(|| error(StatusCode::CONFLICT, "user deleted meanwhile".into()))?;
    let status = if existed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(view(&info))))
}

pub(crate) async fn delete(
    State(security): State<Security>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<StatusCode, Response> {
    caller.may_on_cluster(&security.authorizer, Operation::Alter)?;
    if security.users.delete(&name).await.map_err(core_error)? {
        tracing::info!(user = %name, by = %caller.principal, "user deleted");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(error(StatusCode::NOT_FOUND, format!("no user {name:?}")))
    }
}
