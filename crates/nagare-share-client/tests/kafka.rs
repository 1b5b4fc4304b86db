//! The share consumer against a real Apache Kafka (4.2 or later, share groups on), by
//! hand: start a broker, then
//!
//! ```text
//! KAFKA_BOOTSTRAP=127.0.0.1:39092 cargo test -p nagare-share-client --test kafka -- --ignored
//! ```
//!
//! Topics and groups get fresh names on every run, so the same broker serves many runs.
//! Records are produced over the wire with every codec (Kafka hands them back as stored).

mod common;

use std::time::Duration;

use common::*;
use nagare_share_client::{share_groups_supported, ShareConsumer, ShareError};

fn bootstrap() -> String {
    std::env::var("KAFKA_BOOTSTRAP").expect("set KAFKA_BOOTSTRAP=host:port of a Kafka 4.2+ broker")
}

/// A name of its own for this run.
fn fresh(name: &str) -> String {
    format!("{name}-{}", uuid::Uuid::new_v4().simple())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Kafka broker: KAFKA_BOOTSTRAP"]
async fn kafka_offers_share_groups() {
    assert!(share_groups_supported(&config(&bootstrap())).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Kafka broker: KAFKA_BOOTSTRAP"]
async fn kafka_two_members_share_a_thousand_records() {
    let topic = fresh("shared");
    two_members_share(&bootstrap(), &topic, 1, &fresh("g-shared")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Kafka broker: KAFKA_BOOTSTRAP"]
async fn kafka_release_redelivers_with_a_higher_count() {
    release_redelivers(&bootstrap(), &fresh("rel"), &fresh("g-rel")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Kafka broker: KAFKA_BOOTSTRAP"]
async fn kafka_reject_archives() {
    reject_archives(&bootstrap(), &fresh("rej"), &fresh("g-rej")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Kafka broker: KAFKA_BOOTSTRAP"]
async fn kafka_close_hands_back_what_was_held() {
    close_hands_back(&bootstrap(), &fresh("held"), &fresh("g-held")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Kafka broker: KAFKA_BOOTSTRAP"]
async fn kafka_an_accept_survives_the_member() {
    let bs = bootstrap();
    accept_survives(&bs, &fresh("keep"), &fresh("g-keep"), || async {
        bootstrap()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Kafka broker: KAFKA_BOOTSTRAP"]
async fn kafka_refuses_an_unknown_group_config() {
    let err = nagare_share_client::set_group_configs(
        &config(&bootstrap()),
        &fresh("g-bad"),
        &[("share.no.such.config", "1")],
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ShareError::Kafka { .. }), "{err}");
    // A member of a group with nothing to read polls quietly.
    let topic = fresh("empty");
    produce(&bootstrap(), &topic, 0, &[], 1).await;
    let c = ShareConsumer::join(config(&bootstrap()), &fresh("g-empty"), vec![topic])
        .await
        .unwrap();
    assert!(poll_for(&c, Duration::from_secs(1)).await.is_empty());
    c.close().await.unwrap();
}
