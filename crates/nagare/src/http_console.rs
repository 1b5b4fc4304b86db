//! The web console: a static single-page app (HTML, CSS and plain JavaScript under
//! `crates/nagare/console/`) compiled into the binary, so it works offline and needs no
//! files next to the binary. `GET /` is the page, `GET /console/{file}` its assets; the
//! page reads the same JSON admin API as the CLI. Both routes are in the admin Router,
//! so they sit behind the same authentication middleware: with auth required the browser
//! asks for a user and password (basic auth) and sends them with every API call.
//!
//! Caching: the assets have no content hash in their names, so they are served with an
//! ETag of their bytes and `no-cache` (revalidate every time; a `304` costs a round trip
//! but never serves a stale script after an upgrade). `private` because the answers came
//! through authentication. A strict Content-Security-Policy allows only this origin's
//! scripts and styles and no framing: the console never uses inline code.

use std::hash::{DefaultHasher, Hasher};

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

const INDEX: Asset = Asset {
    name: "index.html",
    content_type: "text/html; charset=utf-8",
    bytes: include_bytes!("../console/index.html"),
};

const JS: &str = "text/javascript; charset=utf-8";

/// Everything under `/console/`.
const ASSETS: &[Asset] = &[
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../console/style.css"),
    },
    Asset {
        name: "favicon.svg",
        content_type: "image/svg+xml",
        bytes: include_bytes!("../console/favicon.svg"),
    },
    Asset {
        name: "app.js",
        content_type: JS,
        bytes: include_bytes!("../console/app.js"),
    },
    Asset {
        name: "overview.js",
        content_type: JS,
        bytes: include_bytes!("../console/overview.js"),
    },
    Asset {
        name: "topics.js",
        content_type: JS,
        bytes: include_bytes!("../console/topics.js"),
    },
    Asset {
        name: "messages.js",
        content_type: JS,
        bytes: include_bytes!("../console/messages.js"),
    },
    Asset {
        name: "groups.js",
        content_type: JS,
        bytes: include_bytes!("../console/groups.js"),
    },
    Asset {
        name: "queues.js",
        content_type: JS,
        bytes: include_bytes!("../console/queues.js"),
    },
    Asset {
        name: "connections.js",
        content_type: JS,
        bytes: include_bytes!("../console/connections.js"),
    },
];

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; \
    frame-ancestors 'none'";

/// `GET /`: the console page.
pub(crate) async fn page(headers: HeaderMap) -> Response {
    serve(&INDEX, &headers)
}

/// `GET /console/{file}`.
pub(crate) async fn asset(Path(name): Path<String>, headers: HeaderMap) -> Response {
    let name = name.trim_start_matches('/');
    match ASSETS.iter().find(|a| a.name == name) {
        Some(a) => serve(a, &headers),
        None => (
            StatusCode::NOT_FOUND,
            Json(serde_json::json!({ "error": format!("no console file {name:?}") })),
        )
            .into_response(),
    }
}

fn serve(asset: &Asset, request: &HeaderMap) -> Response {
    let etag = etag(asset.bytes);
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            )],
            asset.bytes,
        )
            .into_response()
    };
    let h = response.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-cache"),
    );
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// A strong validator of the file's bytes: SipHash with fixed keys, stable for one build,
/// which is all an ETag of embedded files needs.
fn etag(bytes: &[u8]) -> String {
    let mut h = DefaultHasher::new();
    h.write(bytes);
    format!("\"{:016x}\"", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn page_and_assets_have_types_and_validators() {
        let r = page(HeaderMap::new()).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        let etag = r.headers()[header::ETAG].clone();
        let mut again = HeaderMap::new();
        again.insert(header::IF_NONE_MATCH, etag);
        assert_eq!(page(again).await.status(), StatusCode::NOT_MODIFIED);

        let css = asset(Path("style.css".into()), HeaderMap::new()).await;
        assert_eq!(
            css.headers()[header::CONTENT_TYPE],
            "text/css; charset=utf-8"
        );
        assert_eq!(css.headers()[header::CACHE_CONTROL], "private, no-cache");
        let missing = asset(Path("../Cargo.toml".into()), HeaderMap::new()).await;
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn every_script_the_page_loads_is_served() {
        let html = std::str::from_utf8(INDEX.bytes).expect("utf-8");
        for part in html.split("/console/").skip(1) {
            let name = part.split('"').next().unwrap_or_default();
            assert!(
                ASSETS.iter().any(|a| a.name == name),
                "index.html loads {name} which is not embedded"
            );
        }
    }
}
