//! What the admin API does differently in cluster mode: `/healthz` says whether the
//! store can serve (always, for the embedded log; in cluster mode, whether the Kafka
//! cluster answered the gateway's last probe, 503 with the reason if not), and the
//! routes that need the embedded log's internals answer 501 (Not Implemented) naming
//! cluster mode: consumer groups are the cluster's (use Kafka's tools against it),
//! purging a queue and browsing messages read the embedded log.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, MethodRouter};

use crate::http::Ops;

/// `GET /healthz`: `ok` (200), or `not ready: <reason>` (503).
pub(crate) async fn healthz(State(ops): State<Ops>) -> Response {
    match ops.broker.readiness() {
        nagare_core::store::Readiness::Ready => "ok\n".into_response(),
        nagare_core::store::Readiness::NotReady(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}\n"),
        )
            .into_response(),
    }
}

/// A route that needs the embedded log: itself with the embedded log, 501 in cluster
/// mode.
pub(crate) fn local_only<S: Clone + Send + Sync + 'static>(
    cluster: bool,
) -> impl Fn(&'static str, MethodRouter<S>) -> MethodRouter<S> {
    move |what, route| {
        if cluster {
            any(move || async move { not_in_cluster_mode(what) })
        } else {
            route
        }
    }
}

fn not_in_cluster_mode(what: &str) -> Response {
    crate::http_error::error(
        StatusCode::NOT_IMPLEMENTED,
        format!(
            "{what} is not available in cluster mode: the data lives in the Kafka cluster; \
             use Kafka's own tools against the cluster"
        ),
    )
}
