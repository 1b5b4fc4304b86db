//! The admin API's authentication and per-route checks, over a real loopback socket.

use std::sync::Arc;

use nagare_core::security::{Authorizer, LoginThrottle, Security, SecurityConfig, UserStore};
use nagare_core::{Broker, BrokerConfig};

use super::HttpAuth;

struct Server {
    base: String,
    _dir: tempfile::TempDir,
    _runtime: tokio::runtime::Runtime,
}

fn server(protect_metrics: bool) -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let config = BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        ..BrokerConfig::default()
    };
    let broker = Broker::open(config).expect("broker");
    let users = Arc::new(UserStore::in_memory());
    runtime.block_on(async {
        users.add("admin", "admin-pw", false).await.expect("admin");
        users.add("bob", "bob-pw", false).await.expect("bob");
    });
    let security = Security {
        config: Arc::new(SecurityConfig {
            auth_required: true,
            super_users: vec!["admin".into()],
            allow_if_no_acl: None,
        }),
        users,
        authorizer: Arc::new(Authorizer::in_memory(vec!["admin".into()], false)),
        throttle: Arc::new(LoginThrottle::default()),
    };
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
        .build_recorder()
        .handle();
    let auth = HttpAuth {
        security,
        required: true,
        token: Some("tok-123".into()),
        protect_metrics,
    };
    let ops = crate::http::Ops {
        broker,
        security: auth.security.clone(),
        connections: nagare_listener::ConnectionRegistry::new(),
        core: None,
        forward: None,
        started_at_ms: 0,
        listeners: Arc::default(),
    };
    let app = crate::http::app(metrics, auth, ops);
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    runtime.spawn(async move {
        let _keep = _stop_tx;
        let options = nagare_listener::ListenerOptions {
            name: "http",
            protocol: "http",
            registry: nagare_listener::ConnectionRegistry::new(),
            limits: nagare_listener::ConnectionLimits::new(0, 0),
            grace: std::time::Duration::from_secs(1),
            auth_required: true,
            tls: None,
            idle_timeout: None,
        };
        nagare_listener::run(
            listener,
            options,
            move |conn| crate::http::serve_connection(conn, app.clone()),
            stop,
        )
        .await
    });
    Server {
        base,
        _dir: dir,
        _runtime: runtime,
    }
}

fn status(r: Result<ureq::Response, ureq::Error>) -> u16 {
    match r {
        Ok(r) => r.status(),
        Err(ureq::Error::Status(code, _)) => code,
        Err(e) => panic!("transport error {e}"),
    }
}

fn basic(user: &str, pw: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"))
    )
}

#[test]
fn credentials_are_demanded_except_for_healthz() {
    let s = server(true);
    let get = |path: &str| ureq::get(&format!("{}{path}", s.base));
    assert_eq!(status(get("/healthz").call()), 200);
    match get("/topics").call() {
        Err(ureq::Error::Status(401, r)) => {
            assert_eq!(r.header("www-authenticate"), Some("Basic realm=\"nagare\""));
        }
        other => panic!("expected 401, got {:?}", other.map(|r| r.status())),
    }
    assert_eq!(status(get("/metrics").call()), 401);
    assert_eq!(status(get("/users").call()), 401);
    assert_eq!(
        status(
            get("/topics")
                .set("Authorization", &basic("admin", "wrong"))
                .call()
        ),
        401
    );
    assert_eq!(
        status(
            get("/topics")
                .set("Authorization", &basic("nobody", "x"))
                .call()
        ),
        401
    );
    assert_eq!(
        status(get("/topics").set("Authorization", "Bearer nope").call()),
        401
    );
    assert_eq!(
        status(get("/topics").set("Authorization", "Garbage").call()),
        401
    );
    assert_eq!(
        status(
            get("/topics")
                .set("Authorization", &basic("admin", "admin-pw"))
                .call()
        ),
        200
    );
    assert_eq!(
        status(
            get("/metrics")
                .set("Authorization", "Bearer tok-123")
                .call()
        ),
        200
    );
}

#[test]
fn metrics_can_be_left_open() {
    let s = server(false);
    assert_eq!(
        status(ureq::get(&format!("{}/metrics", s.base)).call()),
        200
    );
    assert_eq!(status(ureq::get(&format!("{}/topics", s.base)).call()), 401);
}

#[test]
fn changes_need_rights() {
    let s = server(true);
    let url = |p: &str| format!("{}{p}", s.base);
    let bob = basic("bob", "bob-pw");
    let admin = basic("admin", "admin-pw");
    let new_user = serde_json::json!({"name": "carol", "password": "c-pw"});
    // bob is authenticated but no ACL allows him anything (no ACL found: deny).
    assert_eq!(
        status(
            ureq::post(&url("/users"))
                .set("Authorization", &bob)
                .send_json(&new_user)
        ),
        403
    );
    assert_eq!(
        status(ureq::get(&url("/users")).set("Authorization", &bob).call()),
        403
    );
    let topic = serde_json::json!({"name": "t1", "partitions": 1});
    assert_eq!(
        status(
            ureq::post(&url("/topics"))
                .set("Authorization", &bob)
                .send_json(&topic)
        ),
        403
    );
    // The super user and the token may.
    assert_eq!(
        status(
            ureq::post(&url("/users"))
                .set("Authorization", &admin)
                .send_json(&new_user)
        ),
        201
    );
    assert_eq!(
        status(
            ureq::post(&url("/topics"))
                .set("Authorization", "Bearer tok-123")
                .send_json(&topic)
        ),
        201
    );
    // bob does not see the topic he may not describe.
    let listed: serde_json::Value = ureq::get(&url("/topics"))
        .set("Authorization", &bob)
        .call()
        .expect("list")
        .into_json()
        .expect("json");
    assert_eq!(listed, serde_json::json!([]));
    assert_eq!(
        status(
            ureq::delete(&url("/topics/t1"))
                .set("Authorization", &bob)
                .call()
        ),
        403
    );
    assert_eq!(
        status(
            ureq::delete(&url("/users/carol"))
                .set("Authorization", &admin)
                .call()
        ),
        204
    );
    assert_eq!(
        status(
            ureq::delete(&url("/users/carol"))
                .set("Authorization", &admin)
                .call()
        ),
        404
    );
    // The new user logs in once created, not after deletion.
    assert_eq!(
        status(
            ureq::get(&url("/topics"))
                .set("Authorization", &basic("carol", "c-pw"))
                .call()
        ),
        401
    );
}
