//! Temp-queue ids that name their gateway. In cluster mode a gateway's temp-queue ids
//! start with `n<node id>.` (`n3.tmp.12.0.5f1c...`), so any gateway can tell from a
//! `/reply-queue/<id>` which gateway's reply topic a reply goes to; ids of the embedded
//! log's single node have no prefix.

/// What a gateway's temp-queue ids start with.
pub(crate) fn prefix(node: i32) -> String {
    format!("n{node}.")
}

/// The gateway a temp-queue id belongs to, if the id names one.
pub(crate) fn node_of(id: &str) -> Option<i32> {
    let rest = id.strip_prefix('n')?;
    let (digits, _) = rest.split_once('.')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The topic replies to gateway `node`'s temp queues travel through.
pub(crate) fn reply_topic(node: i32) -> String {
    format!("__nagare_replies-{node}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_gateway() {
        assert_eq!(prefix(3), "n3.");
        assert_eq!(node_of("n3.tmp.12.0.00ff00ff00ff00ff"), Some(3));
        assert_eq!(
            node_of(&format!("{}tmp.1.0.ab", prefix(2147483647))),
            Some(i32::MAX)
        );
        for not_routable in [
            "tmp.12.0.00ff",
            "n.tmp",
            "n3",
            "nx.tmp",
            "n-1.tmp",
            "n99999999999.tmp",
            "",
        ] {
            assert_eq!(node_of(not_routable), None, "{not_routable}");
        }
        assert_eq!(reply_topic(3), "__nagare_replies-3");
    }
}
