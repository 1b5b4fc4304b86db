//! The HTTP admin listener: `/healthz`, `/metrics` (Prometheus), a small topic API
//! (`GET/POST /topics`, `GET/DELETE /topics/{name}`) used by `nagare topic`, and the user
//! API (`GET/POST /users`, `DELETE /users/{name}`, in `http_users.rs`) used by
//! `nagare user`. Authentication and the ACL checks of each route: `http_auth.rs`.
//!
//! In cluster mode `/healthz` answers 503 with the reason while the cluster does not,
//! and the routes that need the embedded log's internals (consumer groups, purging a
//! queue, browsing messages) answer 501 naming cluster mode (`cluster_mode.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::ConnectInfo;
use axum::extract::{FromRef, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Extension, Json, Router};
use hyper::body::Incoming;
use metrics_exporter_prometheus::PrometheusHandle;
use nagare_core::security::{Operation, ResourceType, Security};
use nagare_core::{Broker, CoreError, Subsystems, Topic};
use nagare_listener::{Connection, ConnectionRegistry};
use serde::{Deserialize, Serialize};

use crate::http_auth::{Caller, HttpAuth};

#[derive(Clone)]
struct AppState {
    broker: Arc<Broker>,
    metrics: PrometheusHandle,
    security: Security,
    ops: Ops,
}

impl FromRef<AppState> for Security {
    fn from_ref(s: &AppState) -> Security {
        s.security.clone()
    }
}

/// What the operations routes (`/status`, `/connections`, `/groups`, `/queues`,
/// `/forward/routes`, `/metrics`) read beside the topics; handlers take `State<Ops>`.
#[derive(Clone)]
pub(crate) struct Ops {
    pub broker: Arc<Broker>,
    pub security: Security,
    /// Every open connection of every listener.
    pub connections: Arc<ConnectionRegistry>,
    /// Groups, queues, producer ids; `None` only in tests that run the API alone.
    pub core: Option<Subsystems>,
    /// The main forward listener's state (routes and their counters).
    pub forward: Option<Arc<nagare_forward::ForwardState>>,
    /// When `serve` started, unix ms.
    pub started_at_ms: i64,
    /// Every bound listener, for `/status`.
    pub listeners: Arc<Vec<crate::http_status::ListenerView>>,
}

impl FromRef<AppState> for Ops {
    fn from_ref(s: &AppState) -> Ops {
        s.ops.clone()
    }
}

/// The admin API, behind the authentication middleware.
pub(crate) fn app(metrics: PrometheusHandle, auth: HttpAuth, ops: Ops) -> Router {
    let security = auth.security.clone();
    let broker = ops.broker.clone();
    let local = crate::http_cluster::local_only(broker.cluster().is_some());
    Router::new()
        .route("/healthz", get(crate::http_cluster::healthz))
        .route("/metrics", get(render_metrics))
        .route("/topics", get(list_topics).post(create_topic))
        .route("/topics/:name", get(describe_topic).delete(delete_topic))
        .route(
            "/topics/:name/messages",
            local("browsing messages", get(crate::http_messages::browse)),
        )
        .route("/", get(crate::http_console::page))
        .route("/console/*asset", get(crate::http_console::asset))
        .route(
            "/users",
            get(crate::http_users::list).post(crate::http_users::add),
        )
        .route("/users/:name", delete(crate::http_users::delete))
        .route("/connections", get(crate::http_connections::list))
        .route("/forward/routes", get(crate::http_forward::list))
        .route(
            "/acls",
            get(crate::http_acls::list)
                .post(crate::http_acls::add)
                .delete(crate::http_acls::delete),
        )
        .route("/status", get(crate::http_status::status))
        .route(
            "/groups",
            local("consumer groups", get(crate::http_groups::list)),
        )
        .route(
            "/groups/:id",
            local(
                "consumer groups",
                get(crate::http_groups::describe).delete(crate::http_groups::delete),
            ),
        )
        .route(
            "/groups/:id/offsets",
            local(
                "resetting a group's offsets",
                post(crate::http_groups::reset_offsets),
            ),
        )
        .route("/queues", get(crate::http_queues::list))
        .route("/queues/:name", get(crate::http_queues::describe))
        .route(
            "/queues/:name/purge",
            local("purging a queue", post(crate::http_queues::purge)),
        )
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(auth),
            crate::http_auth::authenticate,
        ))
        .with_state(AppState {
            broker,
            metrics,
            security,
            ops,
        })
}

/// Serves one connection of the HTTP listener (plain or TLS, accepted and counted by the
/// listener layer) with HTTP/1.1 keep-alive, until the client leaves or the server stops
/// (then the request in hand is finished first).
pub(crate) async fn serve_connection(conn: Connection, app: Router) {
    use tower::ServiceExt;
    let peer = conn.peer;
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        // What `http_auth` reads the peer address from, as `axum::serve` would set it.
        req.extensions_mut().insert(ConnectInfo(peer));
        app.clone().oneshot(req)
    });
    let mut shutdown = conn.shutdown;
    let http = hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(conn.stream), service);
    tokio::pin!(http);
    let served = tokio::select! {
        served = http.as_mut() => served,
        _ = stopping(&mut shutdown) => {
            http.as_mut().graceful_shutdown();
            http.await
        }
    };
    if let Err(e) = served {
        tracing::debug!(%peer, error = %e, "http connection closed");
    }
}

async fn stopping(shutdown: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

async fn render_metrics(State(s): State<AppState>) -> String {
    crate::metrics_scrape::render(&s.metrics, &s.ops)
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct TopicInfo {
    pub name: String,
    pub id: String,
    pub partitions: Vec<PartitionInfo>,
    pub config: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PartitionInfo {
    pub partition: i32,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub size_bytes: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct CreateTopic {
    pub name: String,
    pub partitions: Option<u32>,
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

fn info(t: &Topic) -> TopicInfo {
    TopicInfo {
        name: t.name().to_string(),
        id: t.id().to_string(),
        partitions: t
            .partitions()
            .iter()
            .map(|p| PartitionInfo {
                partition: p.index(),
                log_start_offset: p.log_start_offset(),
                log_end_offset: p.log_end_offset(),
                size_bytes: p.size_bytes(),
            })
            .collect(),
        config: t
            .config()
            .entries()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    }
}

struct ApiError(CoreError);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self.0 {
            CoreError::UnknownTopic(_) | CoreError::UnknownPartition { .. } => {
                StatusCode::NOT_FOUND
            }
            CoreError::TopicExists(_) => StatusCode::CONFLICT,
            CoreError::InvalidTopicName { .. }
            | CoreError::InvalidPartitions(_)
            | CoreError::InvalidConfig { .. }
            | CoreError::InvalidUser { .. }
            | CoreError::InvalidAcl(_)
            | CoreError::InvalidRecord(_) => StatusCode::BAD_REQUEST,
            CoreError::ClusterMode(_) => StatusCode::NOT_IMPLEMENTED,
            CoreError::Unavailable(_) | CoreError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (
            status,
            Json(serde_json::json!({ "error": self.0.to_string() })),
        )
            .into_response()
    }
}

/// Topics the caller may not describe are left out, as Kafka's Metadata does.
async fn list_topics(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Json<Vec<TopicInfo>> {
    let authz = &s.security.authorizer;
    Json(
        s.broker
            .list_topics()
            .iter()
            .filter(|t| {
                caller
                    .may(authz, Operation::Describe, ResourceType::Topic, t.name())
                    .is_ok()
            })
            .map(|t| info(t))
            .collect(),
    )
}

async fn describe_topic(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Json<TopicInfo>, Response> {
    caller.may(
        &s.security.authorizer,
        Operation::Describe,
        ResourceType::Topic,
        &name,
    )?;
    s.broker
        .topic(&name)
        .map(|t| Json(info(&t)))
        .ok_or_else(|| ApiError(CoreError::UnknownTopic(name)).into_response())
}

/// Create on the cluster or on the topic, as Kafka's CreateTopics.
async fn create_topic(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Json(req): Json<CreateTopic>,
) -> Result<(StatusCode, Json<TopicInfo>), Response> {
    let authz = &s.security.authorizer;
    if caller.may_on_cluster(authz, Operation::Create).is_err() {
        caller.may(authz, Operation::Create, ResourceType::Topic, &req.name)?;
    }
    create_topic_now(s, req)
        .await
        .map_err(IntoResponse::into_response)
}

async fn create_topic_now(
    s: AppState,
    req: CreateTopic,
) -> Result<(StatusCode, Json<TopicInfo>), ApiError> {
    let mut config = s.broker.topic_defaults();
    for (k, v) in &req.config {
        config.set(k, v).map_err(ApiError)?;
    }
    config.check().map_err(ApiError)?;
    let broker = s.broker.clone();
    let topic =
        tokio::task::spawn_blocking(move || broker.create_topic(&req.name, req.partitions, config))
            .await
            .map_err(|_| ApiError(CoreError::ShuttingDown))?
            .map_err(ApiError)?;
    Ok((StatusCode::CREATED, Json(info(&topic))))
}

async fn delete_topic(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<StatusCode, Response> {
    caller.may(
        &s.security.authorizer,
        Operation::Delete,
        ResourceType::Topic,
        &name,
    )?;
    delete_topic_now(s, name)
        .await
        .map_err(IntoResponse::into_response)
}

async fn delete_topic_now(s: AppState, name: String) -> Result<StatusCode, ApiError> {
    let broker = s.broker.clone();
    tokio::task::spawn_blocking(move || broker.delete_topic(&name))
        .await
        .map_err(|_| ApiError(CoreError::ShuttingDown))?
        .map_err(ApiError)?;
    Ok(StatusCode::NO_CONTENT)
}
