//! ListTransactions (66): transactional ids with their producer id and state, filtered
//! by state, producer id, running time (v1+) and an id pattern (v2+)
//! (`kafka-transactions.sh list`, Admin `listTransactions`).
//!
//! As Kafka: only ids the client may Describe are listed.

use std::sync::Arc;

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ApiKey, ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use nagare_core::security::{Operation, ResourceType};
use nagare_core::transactions::TxnState;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
use crate::meters::Counted;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::ListTransactions,
    advertised: (0, 2),
    accepted: (0, 2),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: ListTransactionsRequest = decode(&req)?;
    let mut response = ListTransactionsResponse::default().with_error_code(errors::NONE);
    let mut states = Vec::new();
    for name in &request.state_filters {
        match TxnState::from_name(name) {
            Some(s) => states.push(s),
            None => response.unknown_state_filters.push(name.clone()),
        }
    }
    // Only unknown state names asked for: nothing can match (Kafka answers the same).
    if states.is_empty() && !request.state_filters.is_empty() {
        return encode(&response, req.version);
    }
    let pattern = request
        .transactional_id_pattern
        .as_deref()
        .filter(|p| !p.is_empty());
    let pattern = match pattern.map(Pattern::parse) {
        Some(None) => {
            response.error_code = ResponseError::InvalidRegularExpression.counted();
            return encode(&response, req.version);
        }
        Some(Some(p)) => Some(p),
        None => None,
    };
    let producer_ids: Vec<i64> = request.producer_id_filters.iter().map(|p| p.0).collect();
    let duration = if req.version >= 1 {
        request.duration_filter
    } else {
        -1
    };
    let listed = state
        .transactions
        .list(&states, &producer_ids, duration, |id| {
            pattern.as_ref().is_none_or(|p| p.matches(id))
        });
    response.transaction_states = listed
        .into_iter()
        .filter(|t| session.allowed(Operation::Describe, ResourceType::TransactionalId, &t.id))
        .map(|t| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(str_bytes(t.id)))
                .with_producer_id(ProducerId(t.producer_id))
                .with_transaction_state(str_bytes(t.state.name()))
        })
        .collect();
    encode(&response, req.version)
}

/// The part of Java regular expressions id patterns use, matched against the whole id
/// (as Kafka's `matcher.matches()`): literal characters, `.`, `\` escapes and the
/// quantifiers `*`, `+`, `?`. Anything else (classes, groups, alternation) is refused
/// as an invalid expression rather than matched wrongly.
struct Pattern(Vec<(Atom, Repeat)>);

#[derive(Clone, Copy, PartialEq)]
enum Atom {
    Any,
    Char(char),
}

#[derive(Clone, Copy, PartialEq)]
enum Repeat {
    One,
    ZeroOrMore,
    OneOrMore,
    ZeroOrOne,
}

impl Pattern {
    fn parse(p: &str) -> Option<Pattern> {
        let mut out: Vec<(Atom, Repeat)> = Vec::new();
        let mut chars = p.chars();
        while let Some(c) = chars.next() {
            let atom = match c {
                '.' => Atom::Any,
                '\\' => Atom::Char(chars.next()?),
                '*' | '+' | '?' => {
                    let last = out.last_mut().filter(|(_, r)| *r == Repeat::One)?;
                    last.1 = match c {
                        '*' => Repeat::ZeroOrMore,
                        '+' => Repeat::OneOrMore,
                        _ => Repeat::ZeroOrOne,
                    };
                    continue;
                }
                '[' | ']' | '(' | ')' | '{' | '}' | '|' | '^' | '$' => return None,
                c => Atom::Char(c),
            };
            out.push((atom, Repeat::One));
        }
        Some(Pattern(out))
    }

    fn matches(&self, s: &str) -> bool {
        let chars: Vec<char> = s.chars().collect();
        // Positions of `chars` reachable after each element (a set, so no backtracking
        // blow-up).
        let mut at = vec![false; chars.len() + 1];
        at[0] = true;
        for &(atom, repeat) in &self.0 {
            let fits = |i: usize| match atom {
                Atom::Any => true,
                Atom::Char(c) => chars[i] == c,
            };
            let mut next = vec![false; chars.len() + 1];
            for i in 0..=chars.len() {
                if !at[i] {
                    continue;
                }
                if matches!(repeat, Repeat::ZeroOrMore | Repeat::ZeroOrOne) {
                    next[i] = true;
                }
                let mut j = i;
                while j < chars.len() && fits(j) {
                    j += 1;
                    next[j] = true;
                    if matches!(repeat, Repeat::One | Repeat::ZeroOrOne) {
                        break;
                    }
                }
            }
            at = next;
        }
        at[chars.len()]
    }
}

#[cfg(test)]
mod tests {
    use super::Pattern;

    #[test]
    fn patterns_match_whole_ids() {
        let m = |p: &str, s: &str| Pattern::parse(p).map(|p| p.matches(s));
        assert_eq!(m("app-.*", "app-1"), Some(true));
        assert_eq!(m("app-.*", "xapp-1"), Some(false));
        assert_eq!(m("a+b?c", "aac"), Some(true));
        assert_eq!(m("a+b?c", "c"), Some(false));
        assert_eq!(m("a\\.b", "a.b"), Some(true));
        assert_eq!(m("a\\.b", "axb"), Some(false));
        assert_eq!(m("tx", "tx"), Some(true));
        assert_eq!(m("(a|b)", "a"), None);
        assert_eq!(m("*a", "a"), None);
    }
}
