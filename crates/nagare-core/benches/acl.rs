//! What an ACL check costs a request: the per-connection cache's answer for a resource it
//! has seen (every Produce/Fetch after the first), and the authorizer's full evaluation
//! (the cache's first look, or after an ACL change) over a store of 1,000 ACLs.
//! `cargo bench -p nagare-core --bench acl`.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use nagare_core::security::{
    AclBinding, AclCache, Authorizer, Operation, PatternType, Permission, Principal, ResourceType,
};

fn binding(topic: String, pattern: PatternType, principal: &str, op: Operation) -> AclBinding {
    AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: topic,
        pattern,
        principal: principal.to_string(),
        host: "*".to_string(),
        operation: op,
        permission: Permission::Allow,
    }
}

fn authorizer() -> Arc<Authorizer> {
    let authz = Authorizer::in_memory(vec!["admin".into()], false);
    let mut acls: Vec<AclBinding> = (0..999)
        .map(|i| {
            binding(
                format!("team{}.topic{i}", i % 20),
                if i % 3 == 0 {
                    PatternType::Prefixed
                } else {
                    PatternType::Literal
                },
                &format!("User:user{}", i % 50),
                Operation::Write,
            )
        })
        .collect();
    acls.push(binding(
        "orders".into(),
        PatternType::Prefixed,
        "User:alice",
        Operation::Write,
    ));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let results = runtime.block_on(authz.create(acls));
    assert!(results.iter().all(|r| r.is_ok()));
    Arc::new(authz)
}

fn acl_checks(c: &mut Criterion) {
    let authz = authorizer();
    let host = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let alice = Principal::user("alice");
    let mut cache = AclCache::new(authz.clone(), alice.clone(), host);
    assert!(cache.allowed(Operation::Write, ResourceType::Topic, "orders.eu"));
    c.bench_function("acl check, cached (per request)", |b| {
        b.iter(|| {
            black_box(cache.allowed(
                Operation::Write,
                ResourceType::Topic,
                black_box("orders.eu"),
            ))
        })
    });
    c.bench_function("acl check, full evaluation over 1000 ACLs", |b| {
        b.iter(|| {
            black_box(authz.authorize(
                &alice,
                host,
                Operation::Write,
                ResourceType::Topic,
                black_box("orders.eu"),
            ))
        })
    });
}

criterion_group!(benches, acl_checks);
criterion_main!(benches);
