use std::sync::Arc;

use super::*;
use crate::security::AclCache;

fn acl(
    rt: ResourceType,
    name: &str,
    pattern: PatternType,
    principal: &str,
    op: Operation,
    permission: Permission,
) -> AclBinding {
    AclBinding {
        resource_type: rt,
        resource_name: name.to_string(),
        pattern,
        principal: principal.to_string(),
        host: "*".to_string(),
        operation: op,
        permission,
    }
}

fn allow_topic(name: &str, pattern: PatternType, principal: &str, op: Operation) -> AclBinding {
    acl(
        ResourceType::Topic,
        name,
        pattern,
        principal,
        op,
        Permission::Allow,
    )
}

fn run<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

fn with(acls: Vec<AclBinding>, allow_if_no_acl: bool) -> Authorizer {
    let a = Authorizer::in_memory(vec!["admin".into()], allow_if_no_acl);
    for r in run(a.create(acls)) {
        r.expect("valid ACL");
    }
    a
}

const HOST: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 1, 2, 3));

fn can(a: &Authorizer, user: &str, op: Operation, name: &str) -> bool {
    a.authorize(&Principal::user(user), HOST, op, ResourceType::Topic, name)
}

#[test]
fn without_acls_the_default_decides() {
    let open = Authorizer::in_memory(vec![], true);
    assert!(open.allows_everything());
    assert!(can(&open, "anyone", Operation::Write, "t"));
    let closed = Authorizer::in_memory(vec!["admin".into()], false);
    assert!(!closed.allows_everything());
    assert!(!can(&closed, "anyone", Operation::Write, "t"));
    assert!(!closed.authorize(
        &Principal::Anonymous,
        HOST,
        Operation::Read,
        ResourceType::Topic,
        "t"
    ));
    // Super users bypass everything.
    assert!(can(&closed, "admin", Operation::Delete, "t"));
    let prefixed = Authorizer::in_memory(vec!["User:root".into()], false);
    assert!(can(&prefixed, "root", Operation::Alter, "t"));
}

#[test]
fn one_acl_stops_allowing_everything() {
    let a = with(
        vec![allow_topic(
            "t",
            PatternType::Literal,
            "User:alice",
            Operation::Read,
        )],
        true,
    );
    assert!(!a.allows_everything());
    assert!(can(&a, "alice", Operation::Read, "t"));
    // The resource has an ACL, bob matches none: denied even with allow_if_no_acl.
    assert!(!can(&a, "bob", Operation::Read, "t"));
    // A resource no ACL covers: the default.
    assert!(can(&a, "bob", Operation::Read, "other"));
    let strict = with(
        vec![allow_topic(
            "t",
            PatternType::Literal,
            "User:alice",
            Operation::Read,
        )],
        false,
    );
    assert!(!can(&strict, "bob", Operation::Read, "other"));
}

#[test]
fn literal_wildcard_and_prefixed_names() {
    let a = with(
        vec![
            allow_topic("*", PatternType::Literal, "User:all", Operation::Read),
            allow_topic("logs-", PatternType::Prefixed, "User:pre", Operation::Write),
            allow_topic("exact", PatternType::Literal, "User:lit", Operation::Write),
        ],
        false,
    );
    assert!(can(&a, "all", Operation::Read, "anything"));
    assert!(can(&a, "pre", Operation::Write, "logs-app"));
    assert!(can(&a, "pre", Operation::Write, "logs-"));
    assert!(!can(&a, "pre", Operation::Write, "log"));
    assert!(!can(&a, "pre", Operation::Write, "xlogs-app"));
    assert!(can(&a, "lit", Operation::Write, "exact"));
    assert!(!can(&a, "lit", Operation::Write, "exactly"));
    // A literal `*` is not a glob inside a name.
    let b = with(
        vec![allow_topic(
            "a*",
            PatternType::Literal,
            "User:u",
            Operation::Read,
        )],
        false,
    );
    assert!(!can(&b, "u", Operation::Read, "ab"));
    assert!(can(&b, "u", Operation::Read, "a*"));
}

#[test]
fn principal_and_host() {
    let mut host_acl = allow_topic("t", PatternType::Literal, "User:*", Operation::Read);
    host_acl.host = "10.1.2.3".into();
    let mut other_host = allow_topic("t", PatternType::Literal, "User:*", Operation::Write);
    other_host.host = "10.9.9.9".into();
    let a = with(vec![host_acl, other_host], false);
    assert!(can(&a, "anyone", Operation::Read, "t"));
    assert!(a.authorize(
        &Principal::Anonymous,
        HOST,
        Operation::Read,
        ResourceType::Topic,
        "t"
    ));
    assert!(!can(&a, "anyone", Operation::Write, "t"));
    let mapped: IpAddr = "::ffff:10.1.2.3".parse().expect("ip");
    assert!(a.authorize(
        &Principal::user("x"),
        mapped,
        Operation::Read,
        ResourceType::Topic,
        "t"
    ));
}

#[test]
fn deny_wins_and_does_not_imply() {
    let a = with(
        vec![
            allow_topic("t", PatternType::Literal, "User:*", Operation::All),
            acl(
                ResourceType::Topic,
                "t",
                PatternType::Literal,
                "User:eve",
                Operation::Write,
                Permission::Deny,
            ),
            acl(
                ResourceType::Topic,
                "secret-",
                PatternType::Prefixed,
                "User:*",
                Operation::All,
                Permission::Deny,
            ),
            allow_topic(
                "secret-x",
                PatternType::Literal,
                "User:bob",
                Operation::Read,
            ),
        ],
        true,
    );
    assert!(can(&a, "bob", Operation::Write, "t"));
    assert!(!can(&a, "eve", Operation::Write, "t"));
    // Deny Write does not deny Describe, which Read still implies here (All).
    assert!(can(&a, "eve", Operation::Describe, "t"));
    assert!(can(&a, "eve", Operation::Read, "t"));
    assert!(!can(&a, "bob", Operation::Read, "secret-x"));
    assert!(!can(&a, "bob", Operation::Describe, "secret-x"));
    // Super users bypass denies too.
    assert!(can(&a, "admin", Operation::Read, "secret-x"));
}

#[test]
fn implied_operations() {
    for op in [
        Operation::Read,
        Operation::Write,
        Operation::Delete,
        Operation::Alter,
    ] {
        let a = with(
            vec![allow_topic("t", PatternType::Literal, "User:u", op)],
            false,
        );
        assert!(can(&a, "u", Operation::Describe, "t"), "{op:?}");
        assert!(!can(&a, "u", Operation::DescribeConfigs, "t"), "{op:?}");
    }
    let a = with(
        vec![allow_topic(
            "t",
            PatternType::Literal,
            "User:u",
            Operation::AlterConfigs,
        )],
        false,
    );
    assert!(can(&a, "u", Operation::DescribeConfigs, "t"));
    assert!(!can(&a, "u", Operation::Describe, "t"));
    let d = with(
        vec![allow_topic(
            "t",
            PatternType::Literal,
            "User:u",
            Operation::Describe,
        )],
        false,
    );
    assert!(!can(&d, "u", Operation::Read, "t"));
    let w = with(
        vec![allow_topic(
            "t",
            PatternType::Literal,
            "User:u",
            Operation::Write,
        )],
        false,
    );
    assert!(!can(&w, "u", Operation::Read, "t"));
}

#[test]
fn resource_types_are_separate() {
    let a = with(
        vec![acl(
            ResourceType::Group,
            "t",
            PatternType::Literal,
            "User:u",
            Operation::Read,
            Permission::Allow,
        )],
        false,
    );
    assert!(!can(&a, "u", Operation::Read, "t"));
    assert!(a.authorize(
        &Principal::user("u"),
        HOST,
        Operation::Read,
        ResourceType::Group,
        "t"
    ));
}

#[test]
fn create_validates_and_deduplicates() {
    let a = Authorizer::in_memory(vec![], false);
    let good = allow_topic("t", PatternType::Literal, "User:u", Operation::Read);
    let mut bad_host = good.clone();
    bad_host.host = "example.com".into();
    let results = run(a.create(vec![
        good.clone(),
        allow_topic("", PatternType::Literal, "User:u", Operation::Read),
        allow_topic("*", PatternType::Prefixed, "User:u", Operation::Read),
        allow_topic("t", PatternType::Literal, "alice", Operation::Read),
        allow_topic("t", PatternType::Literal, "Group:g", Operation::Read),
        allow_topic("t", PatternType::Literal, "User:", Operation::Read),
        acl(
            ResourceType::Cluster,
            "c",
            PatternType::Literal,
            "User:u",
            Operation::Alter,
            Permission::Allow,
        ),
        bad_host,
        good.clone(),
    ]));
    assert!(results[0].is_ok());
    for r in &results[1..8] {
        assert!(matches!(r, Err(CoreError::InvalidAcl(_))), "{r:?}");
    }
    assert!(results[8].is_ok());
    assert_eq!(a.describe(&AclFilter::any()), vec![good]);
    assert_eq!(a.generation(), 1);
    // Adding it again changes nothing, not even the generation.
    let _ = run(a.create(vec![allow_topic(
        "t",
        PatternType::Literal,
        "User:u",
        Operation::Read,
    )]));
    assert_eq!(a.generation(), 1);
}

#[test]
fn filters_follow_kafka() {
    let lit = allow_topic("foo", PatternType::Literal, "User:u", Operation::Read);
    let star = allow_topic("*", PatternType::Literal, "User:u", Operation::Read);
    let pre = allow_topic("fo", PatternType::Prefixed, "User:v", Operation::Write);
    let other = allow_topic("bar", PatternType::Literal, "User:u", Operation::Read);
    let f = |name: Option<&str>, pattern| AclFilter {
        resource_type: Some(ResourceType::Topic),
        resource_name: name.map(str::to_string),
        pattern,
        ..AclFilter::any()
    };
    let all = [&lit, &star, &pre, &other];
    let hits = |filter: &AclFilter| all.iter().filter(|a| filter.matches(a)).count();
    assert_eq!(hits(&AclFilter::any()), 4);
    assert_eq!(hits(&f(Some("foo"), PatternFilter::Any)), 1);
    assert_eq!(hits(&f(Some("fo"), PatternFilter::Any)), 1);
    assert_eq!(hits(&f(Some("foo"), PatternFilter::Match)), 3);
    assert_eq!(hits(&f(None, PatternFilter::Match)), 4);
    assert_eq!(
        hits(&f(None, PatternFilter::Exactly(PatternType::Prefixed))),
        1
    );
    assert_eq!(
        hits(&f(
            Some("foo"),
            PatternFilter::Exactly(PatternType::Prefixed)
        )),
        0
    );
    assert_eq!(
        hits(&f(
            Some("fo"),
            PatternFilter::Exactly(PatternType::Prefixed)
        )),
        1
    );
    let by_principal = AclFilter {
        principal: Some("User:v".into()),
        ..AclFilter::any()
    };
    assert_eq!(hits(&by_principal), 1);
    let by_op = AclFilter {
        operation: Some(Operation::Read),
        permission: Some(Permission::Allow),
        host: Some("*".into()),
        ..AclFilter::any()
    };
    assert_eq!(hits(&by_op), 3);
    let group = AclFilter {
        resource_type: Some(ResourceType::Group),
        ..AclFilter::any()
    };
    assert_eq!(hits(&group), 0);
}

#[test]
fn delete_returns_what_each_filter_removed() {
    let a = with(
        vec![
            allow_topic("a", PatternType::Literal, "User:u", Operation::Read),
            allow_topic("b", PatternType::Literal, "User:u", Operation::Read),
            allow_topic("c", PatternType::Prefixed, "User:u", Operation::Read),
        ],
        true,
    );
    let g = a.generation();
    let by_name = |n: &str| AclFilter {
        resource_name: Some(n.into()),
        ..AclFilter::any()
    };
    let removed = run(a.delete(vec![by_name("a"), by_name("zzz")])).expect("delete");
    assert_eq!(removed[0].len(), 1);
    assert!(removed[1].is_empty());
    assert!(a.generation() > g);
    let removed = run(a.delete(vec![AclFilter::any()])).expect("delete");
    assert_eq!(removed[0].len(), 2);
    assert!(a.allows_everything());
}

#[test]
fn the_cache_follows_changes() {
    let a = Arc::new(Authorizer::in_memory(vec![], false));
    let mut cache = AclCache::new(a.clone(), Principal::user("u"), HOST);
    assert!(!cache.allowed(Operation::Read, ResourceType::Topic, "t"));
    let _ = run(a.create(vec![allow_topic(
        "t",
        PatternType::Literal,
        "User:u",
        Operation::Read,
    )]));
    assert!(cache.allowed(Operation::Read, ResourceType::Topic, "t"));
    assert!(!cache.allowed(Operation::Write, ResourceType::Topic, "t"));
    cache.set_principal(Principal::user("v"));
    assert!(!cache.allowed(Operation::Read, ResourceType::Topic, "t"));
    let _ = run(a.delete(vec![AclFilter::any()]));
    assert!(!cache.allowed(Operation::Read, ResourceType::Topic, "t"));
    // Many names: bounded, still right.
    for i in 0..10_000 {
        assert!(!cache.allowed(Operation::Read, ResourceType::Topic, &format!("t{i}")));
    }
    let open = Arc::new(Authorizer::in_memory(vec![], true));
    let mut cache = AclCache::new(open, Principal::Anonymous, HOST);
    assert!(cache.allowed(Operation::Write, ResourceType::Topic, "t"));
}

#[test]
fn persisted_across_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = crate::BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        ..crate::BrokerConfig::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let kept = allow_topic("kept", PatternType::Prefixed, "User:u", Operation::Write);
    {
        let broker = crate::Broker::open(config.clone()).expect("broker");
        let b = broker.clone();
        let (a, writer) = rt
            .block_on(async move {
                tokio::task::spawn_blocking(move || Authorizer::open(&b, vec![], false)).await
            })
            .expect("join")
            .expect("open");
        let task = rt.spawn(writer.run());
        rt.block_on(async {
            let _ = a
                .create(vec![
                    kept.clone(),
                    allow_topic("gone", PatternType::Literal, "User:u", Operation::Read),
                ])
                .await;
            let f = AclFilter {
                resource_name: Some("gone".into()),
                ..AclFilter::any()
            };
            a.delete(vec![f]).await.expect("delete");
            a.flush().await.expect("flush");
        });
        drop(a);
        rt.block_on(task).expect("writer ends");
        broker.shutdown().expect("shutdown");
    }
    let broker = crate::Broker::open(config).expect("broker");
    let (a, _w) = Authorizer::open(&broker, vec![], true).expect("reopen");
    assert_eq!(a.describe(&AclFilter::any()), vec![kept]);
    assert!(!a.allows_everything());
    assert!(can(&a, "u", Operation::Write, "kept-1"));
}

#[test]
fn kafka_codes_round_trip() {
    use Operation::*;
    for op in [
        All,
        Read,
        Write,
        Create,
        Delete,
        Alter,
        Describe,
        ClusterAction,
        DescribeConfigs,
        AlterConfigs,
        IdempotentWrite,
    ] {
        assert_eq!(Operation::from_kafka_code(op.kafka_code()), Some(op));
    }
    assert_eq!(Operation::Write.kafka_code(), 4);
    assert_eq!(Operation::from_kafka_code(KAFKA_ANY), None);
    assert_eq!(Operation::from_kafka_code(0), None);
    assert_eq!(Operation::from_kafka_code(13), None);
    for rt in [
        ResourceType::Topic,
        ResourceType::Group,
        ResourceType::Cluster,
        ResourceType::TransactionalId,
    ] {
        assert_eq!(ResourceType::from_kafka_code(rt.kafka_code()), Some(rt));
        assert!(rt.supported_operations().contains(&Operation::Describe));
    }
    assert_eq!(ResourceType::from_kafka_code(6), None); // delegation token
    for p in [Permission::Allow, Permission::Deny] {
        assert_eq!(Permission::from_kafka_code(p.kafka_code()), Some(p));
    }
    assert_eq!(Permission::from_kafka_code(KAFKA_ANY), None);
    for p in [PatternType::Literal, PatternType::Prefixed] {
        assert_eq!(
            PatternFilter::from_kafka_code(p.kafka_code()),
            Some(PatternFilter::Exactly(p))
        );
    }
    assert_eq!(
        PatternFilter::from_kafka_code(2),
        Some(PatternFilter::Match)
    );
    assert_eq!(PatternFilter::from_kafka_code(0), None);
}

#[test]
fn authorize_any_follows_kafka_by_resource_type() {
    let any = |a: &Authorizer, user: &str| {
        a.authorize_any(
            &Principal::user(user),
            HOST,
            Operation::Write,
            ResourceType::Topic,
        )
    };
    // Nothing at all: the default decides; super users always.
    assert!(!any(&with(vec![], false), "alice"));
    assert!(any(&with(vec![], true), "alice"));
    assert!(any(&with(vec![], false), "admin"));
    // One literal ALLOW on some topic is enough.
    let lit = allow_topic(
        "orders",
        PatternType::Literal,
        "User:alice",
        Operation::Write,
    );
    assert!(any(&with(vec![lit.clone()], false), "alice"));
    assert!(!any(&with(vec![lit.clone()], false), "bob"));
    // Not implied: Read does not count for Write.
    let read = allow_topic(
        "orders",
        PatternType::Literal,
        "User:alice",
        Operation::Read,
    );
    assert!(!any(&with(vec![read], false), "alice"));
    // A DENY of the same literal, or of a prefix of it, cancels it.
    let deny = |name: &str, pattern| {
        acl(
            ResourceType::Topic,
            name,
            pattern,
            "User:alice",
            Operation::Write,
            Permission::Deny,
        )
    };
    let a = with(
        vec![lit.clone(), deny("orders", PatternType::Literal)],
        false,
    );
    assert!(!any(&a, "alice"));
    let a = with(vec![lit.clone(), deny("ord", PatternType::Prefixed)], false);
    assert!(!any(&a, "alice"));
    // A prefixed ALLOW survives a longer prefixed DENY (some names are still allowed).
    let pre = allow_topic("ord", PatternType::Prefixed, "User:alice", Operation::Write);
    let a = with(vec![pre, deny("orders", PatternType::Prefixed)], false);
    assert!(any(&a, "alice"));
    // A wildcard DENY beats everything, even a wildcard ALLOW.
    let star = allow_topic("*", PatternType::Literal, "User:*", Operation::All);
    let a = with(
        vec![star.clone(), lit, deny("*", PatternType::Literal)],
        false,
    );
    assert!(!any(&a, "alice"));
    assert!(any(&with(vec![star], false), "alice"));
}

/// Opens the authorizer of the broker in `dir`, runs `f` with its writer running, and
/// closes everything.
async fn with_authorizer<F, Fut>(dir: &std::path::Path, f: F)
where
    F: FnOnce(Arc<Authorizer>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let broker = crate::Broker::open(crate::BrokerConfig {
        data_dir: dir.to_path_buf(),
        ..crate::BrokerConfig::default()
    })
    .expect("broker");
    let (a, writer) = Authorizer::open(&broker, vec![], false).expect("open");
    let task = tokio::spawn(writer.run());
    let a = Arc::new(a);
    f(a.clone()).await;
    a.flush().await.expect("flush");
    drop(a);
    task.await.expect("writer ends");
    broker.shutdown().expect("shutdown");
}

fn open_broker(dir: &std::path::Path) -> Arc<crate::Broker> {
    crate::Broker::open(crate::BrokerConfig {
        data_dir: dir.to_path_buf(),
        ..crate::BrokerConfig::default()
    })
    .expect("broker")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_survive_a_clean_and_a_restart() {
    use crate::internal_log::test_support;
    let dir = tempfile::tempdir().expect("tempdir");
    let kept = allow_topic("t", PatternType::Literal, "User:u", Operation::Write);
    let gone = allow_topic("t", PatternType::Literal, "User:u", Operation::Read);
    with_authorizer(dir.path(), |a| {
        let (kept, gone) = (kept.clone(), gone.clone());
        async move {
            let _ = a.create(vec![kept, gone.clone()]).await;
            // Added again and removed: only the binding's last record counts.
            let _ = a.create(vec![gone]).await;
            let f = AclFilter {
                operation: Some(Operation::Read),
                ..AclFilter::any()
            };
            a.delete(vec![f]).await.expect("delete");
        }
    })
    .await;
    let broker = open_broker(dir.path());
    test_support::clean_now(&broker, ACLS_LOG);
    let left = test_support::records(&broker, ACLS_LOG);
    assert_eq!(left.len(), 2, "one record per binding: {left:?}");
    drop(broker);
    with_authorizer(dir.path(), |a| async move {
        assert_eq!(a.describe(&AclFilter::any()), vec![kept]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_keyed_by_resource_name_is_rewritten_by_binding() {
    use crate::internal_log::test_support;
    let dir = tempfile::tempdir().expect("tempdir");
    let kept = allow_topic("t", PatternType::Literal, "User:u", Operation::Write);
    let gone = allow_topic("t", PatternType::Literal, "User:u", Operation::Read);
    {
        let broker = open_broker(dir.path());
        // What the previous version wrote: the resource name as key, the op as value.
        let old = [
            AclOp::Add(kept.clone()),
            AclOp::Add(gone.clone()),
            AclOp::Remove(gone.clone()),
        ]
        .map(|op| {
            let json = serde_json::to_string(&op).expect("json");
            test_support::raw("t", Some(&json))
        });
        test_support::append_raw(&broker, ACLS_LOG, old.to_vec());
        broker.shutdown().expect("shutdown");
    }
    let other = allow_topic("o", PatternType::Prefixed, "User:v", Operation::Read);
    with_authorizer(dir.path(), |a| {
        let (kept, other) = (kept.clone(), other.clone());
        async move {
            assert_eq!(a.describe(&AclFilter::any()), vec![kept]);
            let _ = a.create(vec![other]).await;
        }
    })
    .await;
    let broker = open_broker(dir.path());
    let p = broker.internal_log(ACLS_LOG).expect("log");
    assert_eq!(p.log_start_offset(), 3, "the old records are dropped");
    assert!(test_support::records(&broker, ACLS_LOG)
        .iter()
        .all(|r| r.value.as_deref() == Some(PRESENT)));
    test_support::clean_now(&broker, ACLS_LOG);
    drop((p, broker));
    with_authorizer(dir.path(), |a| async move {
        let mut got = a.describe(&AclFilter::any());
        got.sort_by(|x, y| x.resource_name.cmp(&y.resource_name));
        assert_eq!(got, vec![other, kept]);
    })
    .await;
}
