//! Consumes a topic as a member of a share group and prints what it gets, accepting every
//! record, until Ctrl-C (then closes: what it held goes back to the group). For trying
//! the client against a real cluster, faults included (stop a broker while it runs):
//!
//! ```text
//! KAFKA_BOOTSTRAP=127.0.0.1:39092 cargo run -p nagare-share-client --example share_consume -- GROUP TOPIC [earliest]
//! ```
//!
//! Kafka client properties can be given as `KAFKA_PROPERTIES="security.protocol=SASL_SSL,sasl.mechanism=PLAIN,..."`.

use std::time::{Duration, Instant};

use nagare_share_client::{set_group_configs, AckKind, ShareClientConfig, ShareConsumer};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(group), Some(topic)) = (args.first(), args.get(1)) else {
        eprintln!("usage: share_consume GROUP TOPIC [earliest]   (KAFKA_BOOTSTRAP=host:port)");
        std::process::exit(2);
    };
    let config = ShareClientConfig {
        bootstrap: vec![
            std::env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into())
        ],
        client_id: "share-consume".into(),
        properties: std::env::var("KAFKA_PROPERTIES")
            .unwrap_or_default()
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect(),
        request_timeout: Duration::from_secs(5),
    };
    if args.get(2).map(String::as_str) == Some("earliest") {
        if let Err(e) =
            set_group_configs(&config, group, &[("share.auto.offset.reset", "earliest")]).await
        {
            eprintln!("share.auto.offset.reset: {e}");
        }
    }
    let consumer = loop {
        match ShareConsumer::join(config.clone(), group, vec![topic.clone()]).await {
            Ok(c) => break c,
            Err(e) => {
                eprintln!("join: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    eprintln!("member {} of {group}", consumer.member_id());
    let started = Instant::now();
    let mut total = 0usize;
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            polled = consumer.poll(100, Duration::from_millis(500)) => match polled {
                Ok(records) => {
                    for r in records {
                        total += 1;
                        let value = r.record.value.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
                        println!("{}-{}@{} (delivery {}): {value}", r.topic, r.partition, r.offset, r.delivery_count);
                        consumer.acknowledge(&r.topic, r.partition, r.offset, AckKind::Accept);
                    }
                }
                Err(e) => eprintln!("{:>7.1}s poll: {e}", started.elapsed().as_secs_f64()),
            },
        }
    }
    if let Err(e) = consumer.flush().await {
        eprintln!("flush: {e}");
    }
    match consumer.close().await {
        Ok(()) => eprintln!("closed after {total} records"),
        Err(e) => eprintln!("close: {e}"),
    }
}
