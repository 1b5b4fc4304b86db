//! The client side of the HTTP admin API, shared by `nagare topic` and `nagare user`:
//! where the broker is, how to authenticate (basic auth or a bearer token), and what an
//! error answer means for the person at the terminal.

use std::path::PathBuf;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use clap::Args;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Where the admin API is and the token to present.
#[derive(Debug, Args)]
pub(crate) struct AdminConnection {
    /// HTTP admin address of the broker: HOST:PORT, or an http:// or https:// URL.
    #[arg(
        long,
        default_value = "127.0.0.1:9644",
        env = "NAGARE_HTTP_LISTEN",
        global = true
    )]
    pub http: String,
    /// Talk HTTPS (when the broker runs TLS); implied by an https:// address.
    #[arg(long, global = true)]
    pub https: bool,
    /// PEM file of the CA that signed the broker's certificate (a private or self-signed
    /// CA); without it the system's roots are trusted.
    #[arg(long, value_name = "FILE", env = "NAGARE_CA", global = true)]
    pub ca: Option<PathBuf>,
    /// Bearer token of the admin API (the broker's `[http] token`).
    #[arg(long, env = "NAGARE_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
}

/// The login of the admin commands that act as a broker user (topic, group, queue,
/// status); `nagare user` and `nagare acl` take `--admin-user` instead, since their own
/// arguments name users.
#[derive(Debug, Args, Default)]
pub(crate) struct AdminLogin {
    /// User to log in as when the broker demands authentication.
    #[arg(long, env = "NAGARE_USER", global = true)]
    pub user: Option<String>,
    /// Password of --user.
    #[arg(long, env = "NAGARE_PASSWORD", hide_env_values = true, global = true)]
    pub password: Option<String>,
}

/// A connection to the admin API.
pub(crate) struct AdminClient {
    agent: ureq::Agent,
    base: String,
    authorization: Option<String>,
}

impl AdminClient {
    /// `user`/`password` log in with HTTP basic auth; otherwise the token, if any.
    /// A client logged in as `login`'s user (or with the token, or anonymous).
    pub(crate) fn login(conn: &AdminConnection, login: &AdminLogin) -> anyhow::Result<AdminClient> {
        AdminClient::new(conn, login.user.as_deref(), login.password.as_deref())
    }

    pub(crate) fn new(
        conn: &AdminConnection,
        user: Option<&str>,
        password: Option<&str>,
    ) -> anyhow::Result<AdminClient> {
        let authorization = match (user, password, &conn.token) {
            (Some(u), Some(p), _) => Some(format!("Basic {}", B64.encode(format!("{u}:{p}")))),
            (Some(_), None, _) => anyhow::bail!("a user needs its password too"),
            (None, Some(_), _) => anyhow::bail!("a password needs its user name too"),
            (None, None, Some(t)) => Some(format!("Bearer {t}")),
            (None, None, None) => None,
        };
        let (https, host) = if let Some(rest) = conn.http.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = conn.http.strip_prefix("http://") {
            (conn.https, rest)
        } else {
            (conn.https, conn.http.as_str())
        };
        let host = host.trim_end_matches('/');
        let agent = crate::admin_tls::agent(https, conn.ca.as_deref())?;
        let scheme = if https { "https" } else { "http" };
        Ok(AdminClient {
            agent,
            base: format!("{scheme}://{host}"),
            authorization,
        })
    }

    fn request(&self, method: &str, path: &str) -> ureq::Request {
        let req = self.agent.request(method, &format!("{}{path}", self.base));
        match &self.authorization {
            Some(a) => req.set("Authorization", a),
            None => req,
        }
    }

    pub(crate) fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        Ok(check(self.request("GET", path).call())?.into_json()?)
    }

    pub(crate) fn post<T: DeserializeOwned, B: Serialize>(
        &self,
        path: &str,
        body: &B,
    ) -> anyhow::Result<T> {
        Ok(check(self.request("POST", path).send_json(body))?.into_json()?)
    }

    /// DELETE answered with a body.
    pub(crate) fn delete_json<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        Ok(check(self.request("DELETE", path).call())?.into_json()?)
    }

    pub(crate) fn delete(&self, path: &str) -> anyhow::Result<()> {
        check(self.request("DELETE", path).call()).map(drop)
    }
}

fn check(resp: Result<ureq::Response, ureq::Error>) -> anyhow::Result<ureq::Response> {
    match resp {
        Ok(r) => Ok(r),
        Err(ureq::Error::Status(401, _)) => anyhow::bail!(
            "the broker demands authentication: give --user and --password (--admin-user and \
             --admin-password for `nagare user`), or --token"
        ),
        Err(ureq::Error::Status(code, r)) => {
            let body = r.into_string().unwrap_or_default();
            let message = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                .unwrap_or(body);
            anyhow::bail!("broker answered {code}: {}", message.trim())
        }
        Err(e) => anyhow::bail!("cannot reach the broker's HTTP listener: {e}"),
    }
}

/// A path segment with everything but unreserved characters percent-encoded.
pub(crate) fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(super::path_segment("a b/c%é"), "a%20b%2Fc%25%C3%A9");
        assert_eq!(super::path_segment("alice-1.x_~"), "alice-1.x_~");
    }
}
