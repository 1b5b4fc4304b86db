//! A small Kafka client (used by `nagare produce`, `nagare consume` and `nagare bench`).
