//! The admin API's error answer, `{"error": "..."}` with its status, for the routes that
//! do not go through a `CoreError`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

pub(crate) fn error(status: StatusCode, message: impl std::fmt::Display) -> Response {
    (
        status,
        Json(serde_json::json!({ "error": message.to_string() })),
    )
        .into_response()
}

/// A blocking-pool task that did not come back: the broker is going away.
pub(crate) fn shutting_down() -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "the broker is shutting down",
    )
}

/// The core subsystems behind the groups and queues routes; absent only when the API
/// runs alone in a test.
// The handlers answer with a `Response` on every error path; boxing this one would only
// move the allocation.
#[allow(clippy::result_large_err)]
pub(crate) fn core(ops: &crate::http::Ops) -> Result<&nagare_core::Subsystems, Response> {
    ops.core.as_ref().ok_or_else(|| {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            "groups and queues are not available",
        )
    })
}
