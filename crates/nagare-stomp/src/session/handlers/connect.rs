//! CONNECT and STOMP: version negotiation, virtual host, credentials (see
//! [`crate::access`]), heart-beats.

use std::sync::atomic::Ordering;

use bytes::BytesMut;

use crate::command::Connect;
use crate::encode::FrameWriter;
use crate::error::StompError;
use crate::frame::{Command, Version};
use crate::session::Session;

const SUPPORTED: &str = "1.0,1.1,1.2";

impl Session {
    pub(crate) async fn on_connect(&mut self, connect: Connect) -> Result<(), StompError> {
        if self.connected {
            return Err(StompError::protocol("already connected"));
        }
        let version = match connect.accept_version.as_deref() {
            // No header: a 1.0 client.
            None => Version::V1_0,
            Some(list) => match list.split(',').filter_map(Version::parse).max() {
                Some(v) => v,
                None => {
                    self.send_version_error(list).await;
                    return Err(StompError::protocol("no common protocol version"));
                }
            },
        };
        let cfg = &self.shared.config;
        if !cfg.vhost.is_empty() {
            if let Some(host) = &connect.host {
                if host.as_str() != cfg.vhost {
                    return Err(StompError::protocol(format!(
                        "virtual host {host:?} not found"
                    )));
                }
            }
        }
        self.access
            .login(connect.login.as_deref(), connect.passcode.as_deref(), cfg)
            .await?;
        if let Some(info) = &self.info {
            if let Some(login) = connect.login.as_deref().filter(|l| !l.is_empty()) {
                info.set_user(login);
            }
            if let Some(id) = connect.client_id.as_deref().or(connect.host.as_deref()) {
                info.set_client_id(id);
            }
        }
        let (cx, cy) = connect.heartbeat;
        let s = cfg.heartbeat_ms;
        // The spec: each direction is the larger of what one side can do and the other
        // wants, 0 on either side meaning none.
        let from_client = if cx == 0 || s == 0 { 0 } else { cx.max(s) };
        let to_client = if cy == 0 || s == 0 { 0 } else { cy.max(s) };
        if version == Version::V1_0 {
            self.heartbeat = (0, 0);
        } else {
            self.heartbeat = (from_client, to_client);
        }
        self.version = version;
        self.connected = true;

        let mut buf = BytesMut::with_capacity(128);
        let mut w = FrameWriter::begin(&mut buf, version, Command::Connected);
        let session = format!(
            "nagare-{}-{}",
            self.id(),
            self.shared.next_message.fetch_add(1, Ordering::Relaxed)
        );
        if version != Version::V1_0 {
            w.header("version", version.as_str());
            w.header("heart-beat", &format!("{s},{s}"));
        }
        w.header("session", &session)
            .header("server", concat!("nagare/", env!("CARGO_PKG_VERSION")));
        w.body(b"", false);
        self.out.send(buf.freeze()).await;
        Ok(())
    }

    async fn send_version_error(&self, offered: &str) {
        let mut buf = BytesMut::with_capacity(128);
        let mut w = FrameWriter::begin(&mut buf, Version::V1_0, Command::Error);
        w.header("version", SUPPORTED)
            .header("message", "Supported protocol versions are 1.0 1.1 1.2")
            .header("content-type", "text/plain");
        w.body(
            format!("the client accepts {offered}; this server speaks {SUPPORTED}").as_bytes(),
            true,
        );
        self.out.send(buf.freeze()).await;
    }
}
