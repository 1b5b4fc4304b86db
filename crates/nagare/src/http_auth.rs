//! Who is calling the HTTP admin API. When authentication is required, every route but
//! `/healthz` (and `/metrics` if `[http] metrics_auth = false`) demands HTTP basic auth
//! with a user of the user store, or the bearer token of `[http] token`; anything else
//! gets `401` with `WWW-Authenticate: Basic realm="nagare"`, after the failed-login delay.
//! Handlers then ask [`Caller::may`] before changing anything.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use nagare_core::security::{Authorizer, Operation, Principal, ResourceType, Security};
use subtle::ConstantTimeEq;

/// The HTTP listener's authentication settings.
#[derive(Clone)]
pub(crate) struct HttpAuth {
    pub security: Security,
    /// Demand credentials (the broker's `--auth required`, or the HTTP listener's own).
    pub required: bool,
    /// `[http] token`: a bearer token with every right (for scripts and scrapers).
    pub token: Option<Arc<str>>,
    /// `[http] metrics_auth`: whether `/metrics` needs credentials too.
    pub protect_metrics: bool,
}

/// Whether the connection's listener demands authentication, when the listener layer
/// says so per connection (it overrides [`HttpAuth::required`]).
#[derive(Clone, Copy)]
pub(crate) struct ListenerAuth(pub bool);

/// The authenticated caller of one request.
#[derive(Clone)]
pub(crate) struct Caller {
    pub principal: Principal,
    pub peer: IpAddr,
    /// Came with the admin token: every right.
    token: bool,
}

impl Caller {
    /// Whether the caller may do `op` on the resource; a refusal is a `403`.
    pub(crate) fn may(
        &self,
        authorizer: &Authorizer,
        op: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> Result<(), Forbidden> {
        if self.token || authorizer.authorize(&self.principal, self.peer, op, resource_type, name) {
            return Ok(());
        }
        Err(Forbidden(format!(
            "{} is not allowed to {op:?} {resource_type:?} {name:?}",
            self.principal
        )))
    }

    /// Whether the caller may do `op` on the cluster (the broker-wide admin routes).
    pub(crate) fn may_on_cluster(
        &self,
        authorizer: &Authorizer,
        op: Operation,
    ) -> Result<(), Forbidden> {
        self.may(
            authorizer,
            op,
            ResourceType::Cluster,
            nagare_core::security::acl::CLUSTER_NAME,
        )
    }
}

/// A refused request: `403` with the reason.
#[derive(Debug)]
pub(crate) struct Forbidden(String);

impl From<Forbidden> for Response {
    fn from(f: Forbidden) -> Response {
        (
            StatusCode::FORBIDDEN,
            Json(serde_json::json!({ "error": f.0 })),
        )
            .into_response()
    }
}

enum Credentials {
    Basic { user: String, password: String },
    Bearer(String),
}

fn credentials(headers: &HeaderMap) -> Option<Credentials> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = String::from_utf8(B64.decode(rest).ok()?).ok()?;
        let (user, password) = decoded.split_once(':')?;
        Some(Credentials::Basic {
            user: user.to_string(),
            password: password.to_string(),
        })
    } else if scheme.eq_ignore_ascii_case("bearer") {
        Some(Credentials::Bearer(rest.to_string()))
    } else {
        None
    }
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Basic realm=\"nagare\"")],
        Json(serde_json::json!({ "error": "authentication required" })),
    )
        .into_response()
}

/// The middleware: puts a [`Caller`] in the request, or answers `401`.
pub(crate) async fn authenticate(
    State(auth): State<Arc<HttpAuth>>,
    mut req: Request,
    next: Next,
) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let required = req
        .extensions()
        .get::<ListenerAuth>()
        .map_or(auth.required, |a| a.0);
    let path = req.uri().path();
    let open = path == "/healthz" || (path == "/metrics" && !auth.protect_metrics);
    let caller = if !required || open {
        Caller {
            principal: Principal::Anonymous,
            peer,
            token: false,
        }
    } else {
        match check(&auth, req.headers(), peer).await {
            Ok(caller) => caller,
            Err(response) => return response,
        }
    };
    req.extensions_mut().insert(caller);
    next.run(req).await
}

async fn check(auth: &HttpAuth, headers: &HeaderMap, peer: IpAddr) -> Result<Caller, Response> {
    let throttle = &auth.security.throttle;
    let (ok, user, caller) = match credentials(headers) {
        None => return Err(unauthorized()),
        Some(Credentials::Bearer(token)) => {
            let ok = auth
                .token
                .as_ref()
                .is_some_and(|t| bool::from(t.as_bytes().ct_eq(token.as_bytes())));
            let caller = Caller {
                principal: Principal::Anonymous,
                peer,
                token: true,
            };
            (ok, "(token)".to_string(), caller)
        }
        Some(Credentials::Basic { user, password }) => {
            let ok = auth
                .security
                .users
                .verify_plain_async(&user, &password)
                .await;
            let caller = Caller {
                principal: Principal::user(&user),
                peer,
                token: false,
            };
            (ok, user, caller)
        }
    };
    if ok {
        throttle.succeeded_over("http", peer);
        Ok(caller)
    } else {
        let delay = throttle.failed("http", peer, &user);
        tokio::time::sleep(delay).await;
        Err(unauthorized())
    }
}

#[cfg(test)]
#[path = "http_auth_tests.rs"]
mod tests;
