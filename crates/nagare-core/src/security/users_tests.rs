use std::sync::Arc;

use super::*;
use crate::BrokerConfig;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn add_verify_delete_in_memory() {
    let store = UserStore::in_memory();
    let rt = rt();
    assert!(store.is_empty());
    rt.block_on(store.add("alice", "s3cret", false))
        .expect("add");
    assert!(!store.is_empty());
    assert!(store.verify_plain("alice", "s3cret"));
    assert!(!store.verify_plain("alice", "S3cret"));
    assert!(!store.verify_plain("bob", "s3cret"));
    assert!(rt.block_on(store.verify_plain_async("alice", "s3cret")));
    assert!(!rt.block_on(store.verify_plain_async("nobody", "s3cret")));
    let info = store.get("alice").expect("listed");
    assert!(info.plain && !info.forward);
    assert_eq!(
        info.scram,
        vec![
            (ScramMechanism::Sha256, 4096),
            (ScramMechanism::Sha512, 4096)
        ]
    );
    assert_eq!(store.forward_password("alice"), None);
    assert!(rt.block_on(store.delete("alice")).expect("delete"));
    assert!(!rt.block_on(store.delete("alice")).expect("delete again"));
    assert!(!store.verify_plain("alice", "s3cret"));
    assert!(store.is_empty());
}

#[test]
fn names_and_passwords_are_validated() {
    let store = UserStore::in_memory();
    let rt = rt();
    for bad in ["", "*", "ANONYMOUS", "a\nb", &"x".repeat(257)] {
        assert!(matches!(
            rt.block_on(store.add(bad, "pw", false)),
            Err(CoreError::InvalidUser { .. })
        ));
    }
    assert!(rt.block_on(store.add("ok", "", false)).is_err());
    assert!(rt
        .block_on(store.add("ok", &"p".repeat(1025), false))
        .is_err());
    // Kafka's AlterUserScramCredentials limits.
    let salted = vec![0u8; 32];
    assert!(rt
        .block_on(store.upsert_scram("ok", ScramMechanism::Sha256, 4095, b"salt", &salted))
        .is_err());
    assert!(rt
        .block_on(store.upsert_scram("ok", ScramMechanism::Sha256, 16385, b"salt", &salted))
        .is_err());
    assert!(rt
        .block_on(store.upsert_scram("ok", ScramMechanism::Sha512, 4096, b"salt", &salted))
        .is_err());
    assert!(rt
        .block_on(store.upsert_scram("ok", ScramMechanism::Sha256, 4096, b"", &salted))
        .is_err());
}

#[test]
fn scram_upsert_and_delete() {
    let store = UserStore::in_memory();
    let rt = rt();
    let salted = crypto::pbkdf2(ScramMechanism::Sha256, b"pw", b"salt", 8192);
    rt.block_on(store.upsert_scram("carol", ScramMechanism::Sha256, 8192, b"salt", &salted))
        .expect("upsert");
    let info = store.get("carol").expect("created");
    assert_eq!(info.scram, vec![(ScramMechanism::Sha256, 8192)]);
    assert!(!info.plain);
    // No PLAIN credential: PLAIN logins fail even with the right password.
    assert!(!store.verify_plain("carol", "pw"));
    let c = store.scram("carol", ScramMechanism::Sha256).expect("cred");
    assert_eq!(
        c,
        ScramCredential::from_salted_password(ScramMechanism::Sha256, &salted, b"salt", 8192)
    );
    assert!(!rt
        .block_on(store.delete_scram("carol", ScramMechanism::Sha512))
        .expect("nothing to delete"));
    assert!(rt
        .block_on(store.delete_scram("carol", ScramMechanism::Sha256))
        .expect("deleted"));
    // The last credential gone, the user is gone.
    assert!(store.get("carol").is_none());
}

#[test]
fn forward_secret_only_for_forward_users() {
    let store = UserStore::in_memory();
    let rt = rt();
    rt.block_on(store.add("fwd", "pw", true)).expect("add");
    assert_eq!(store.forward_password("fwd").as_deref(), Some("pw"));
    assert!(store.get("fwd").expect("user").forward);
    // Re-added without the option: the clear secret is dropped.
    rt.block_on(store.add("fwd", "pw2", false)).expect("re-add");
    assert_eq!(store.forward_password("fwd"), None);
    rt.block_on(store.add("fwd", "pw3", true)).expect("re-add");
    rt.block_on(store.delete("fwd")).expect("delete");
    assert_eq!(store.forward_password("fwd"), None);
}

fn open_broker(dir: &std::path::Path) -> Arc<crate::Broker> {
    let config = BrokerConfig {
        data_dir: dir.to_path_buf(),
        ..BrokerConfig::default()
    };
    crate::Broker::open(config).expect("broker")
}

#[test]
fn persisted_across_reopen_without_clear_passwords() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = rt();
    {
        let broker = open_broker(dir.path());
        let (store, writers) = rt
            .block_on(async {
                let b = broker.clone();
                tokio::task::spawn_blocking(move || UserStore::open(&b)).await
            })
            .expect("join")
            .expect("open");
        let task = rt.spawn(writers.run());
        rt.block_on(async {
            store.add("alice", "alice-password", false).await?;
            store.add("fwd", "forward-password", true).await?;
            store.add("gone", "gone-password", true).await?;
            store.delete("gone").await?;
            let salted = crypto::pbkdf2(ScramMechanism::Sha512, b"x", b"salt", 4096);
            store
                .upsert_scram("alice", ScramMechanism::Sha512, 4096, b"salt", &salted)
                .await?;
            store.flush().await
        })
        .expect("changes");
        drop(store);
        rt.block_on(task).expect("writer ends");
        broker.shutdown().expect("shutdown");
    }
    // The credentials log never holds a password.
    let users_dir = dir.path().join("__nagare_users-0");
    let mut all = Vec::new();
    for e in std::fs::read_dir(&users_dir).expect("dir") {
        all.extend(std::fs::read(e.expect("entry").path()).expect("read"));
    }
    for pw in ["alice-password", "forward-password", "gone-password"] {
        assert!(
            !all.windows(pw.len()).any(|w| w == pw.as_bytes()),
            "{pw} in clear"
        );
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("__nagare_forward_secrets-0"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);

    let broker = open_broker(dir.path());
    let (store, _writers) = UserStore::open(&broker).expect("reopen");
    assert!(store.verify_plain("alice", "alice-password"));
    assert!(store.verify_plain("fwd", "forward-password"));
    assert!(store.get("gone").is_none());
    assert_eq!(
        store.forward_password("fwd").as_deref(),
        Some("forward-password")
    );
    assert_eq!(store.forward_password("gone"), None);
    let c = store.scram("alice", ScramMechanism::Sha512).expect("scram");
    assert_eq!(c.salt, b"salt");
}

/// Opens the user store of the broker in `dir`, runs `f` with its writers running, and
/// closes everything.
async fn with_store<F, Fut>(dir: &std::path::Path, f: F)
where
    F: FnOnce(Arc<UserStore>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let broker = open_broker(dir);
    let (store, writers) = UserStore::open(&broker).expect("open");
    let task = tokio::spawn(writers.run());
    let store = Arc::new(store);
    f(store.clone()).await;
    store.flush().await.expect("flush");
    drop(store);
    task.await.expect("writers end");
    broker.shutdown().expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_survive_a_clean_and_a_restart() {
    use crate::internal_log::test_support;
    let dir = tempfile::tempdir().expect("tempdir");
    with_store(dir.path(), |s| async move {
        s.add("alice", "alice-pw", false).await.expect("add");
        s.add("bob", "bob-pw", true).await.expect("add");
        assert!(s
            .delete_scram("bob", ScramMechanism::Sha256)
            .await
            .expect("del"));
        s.add("carol", "carol-pw", true).await.expect("add");
        assert!(s.delete("carol").await.expect("delete"));
        s.add("alice", "alice-pw2", false).await.expect("re-add");
    })
    .await;
    let broker = open_broker(dir.path());
    test_support::clean_now(&broker, USERS_LOG);
    test_support::clean_now(&broker, FORWARD_SECRETS_LOG);
    // alice 3, bob 2 + a tombstone, carol 3 tombstones (dropped by a later clean).
    assert_eq!(test_support::records(&broker, USERS_LOG).len(), 9);
    drop(broker);
    with_store(dir.path(), |s| async move {
        assert!(s.verify_plain("alice", "alice-pw2"));
        assert!(!s.verify_plain("alice", "alice-pw"));
        assert!(s.verify_plain("bob", "bob-pw"));
        assert!(s.scram("bob", ScramMechanism::Sha256).is_none());
        assert!(s.scram("bob", ScramMechanism::Sha512).is_some());
        assert_eq!(s.forward_password("bob").as_deref(), Some("bob-pw"));
        assert!(s.get("carol").is_none());
        assert_eq!(s.forward_password("carol"), None);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_of_user_operations_is_rewritten_by_credential() {
    use crate::internal_log::test_support;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let broker = open_broker(dir.path());
        // What the previous version wrote: the user name as key, an operation as value.
        let alice = Credentials::from_password("alice-pw");
        let bob_512 = ScramCredential::from_password(ScramMechanism::Sha512, "bob-pw", 4096);
        let old = [
            ("alice", serde_json::json!({"op": "set", "name": "alice", "credentials": alice})),
            ("alice", serde_json::json!({"op": "delete_scram", "name": "alice", "mechanism": "SCRAM-SHA-256"})),
            ("gone", serde_json::json!({"op": "set", "name": "gone", "credentials": Credentials::from_password("x")})),
            ("gone", serde_json::json!({"op": "delete", "name": "gone"})),
            ("bob", serde_json::json!({"op": "set_scram", "name": "bob", "mechanism": "SCRAM-SHA-512", "credential": bob_512})),
        ]
        .map(|(k, v)| test_support::raw(k, Some(&v.to_string())));
        test_support::append_raw(&broker, USERS_LOG, old.to_vec());
        broker.shutdown().expect("shutdown");
    }
    let check = |s: &UserStore| {
        assert!(s.verify_plain("alice", "alice-pw"));
        assert!(s.scram("alice", ScramMechanism::Sha256).is_none());
        assert!(s.scram("alice", ScramMechanism::Sha512).is_some());
        let bob = s.get("bob").expect("bob");
        assert!(!bob.plain);
        assert_eq!(bob.scram, vec![(ScramMechanism::Sha512, 4096)]);
        assert!(s.get("gone").is_none());
    };
    with_store(dir.path(), |s| async move {
        check(&s);
        s.add("dave", "dave-pw", false).await.expect("add");
    })
    .await;
    let broker = open_broker(dir.path());
    let p = broker.internal_log(USERS_LOG).expect("log");
    assert_eq!(p.log_start_offset(), 5, "the old records are dropped");
    let records = test_support::records(&broker, USERS_LOG);
    // alice plain + 512, bob 512, dave 3.
    assert_eq!(records.len(), 6);
    assert!(records.iter().all(|r| !r
        .value
        .as_deref()
        .unwrap_or_default()
        .starts_with(b"{\"op\"")));
    test_support::clean_now(&broker, USERS_LOG);
    drop((p, broker));
    with_store(dir.path(), |s| async move {
        check(&s);
        assert!(s.verify_plain("dave", "dave-pw"));
    })
    .await;
}
