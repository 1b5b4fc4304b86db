//! A frame's headers, in wire order, in one string.
//!
//! Every frame a connection reads has its headers decoded once; a `(String, String)` per
//! header made that two allocations per header, most of a small SEND's decoding cost on
//! the RPC path. Here the unescaped names and values sit side by side in one `String`
//! and each header is a pair of ranges into it: two allocations per frame whatever the
//! number of headers.

use std::fmt;
use std::ops::Range;

/// One header: where its name and value are in [`Headers::text`].
#[derive(Clone, Debug)]
struct Span {
    name: Range<usize>,
    value: Range<usize>,
}

impl Span {
    fn name(&self) -> Range<usize> {
        self.name.clone()
    }

    fn value(&self) -> Range<usize> {
        self.value.clone()
    }
}

/// Ordered headers; lookups return the first occurrence (the spec: the first of repeated
/// headers wins).
#[derive(Clone, Default)]
pub struct Headers {
    text: String,
    spans: Vec<Span>,
}

impl Headers {
    pub fn new() -> Headers {
        Headers::default()
    }

    /// Room for about `bytes` of names and values and `count` headers.
    pub fn with_capacity(bytes: usize, count: usize) -> Headers {
        Headers {
            text: String::with_capacity(bytes),
            spans: Vec::with_capacity(count),
        }
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Appends a header.
    pub fn push(&mut self, name: &str, value: &str) {
        let name = self.put(name);
        let value = self.put(value);
        self.spans.push(Span { name, value });
    }

    /// Appends a header whose name and value the caller writes into the text itself
    /// (the decoder unescapes straight into it): `write` gets the text, must append the
    /// name, and returns where the value starts; everything appended after that is the
    /// value.
    pub(crate) fn push_with<E>(
        &mut self,
        write: impl FnOnce(&mut String) -> Result<usize, E>,
    ) -> Result<(), E> {
        let start = self.text.len();
        let value_start = write(&mut self.text)?;
        let end = self.text.len();
        self.spans.push(Span {
            name: start..value_start,
            value: value_start..end,
        });
        Ok(())
    }

    fn put(&mut self, s: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.push_str(s);
        start..self.text.len()
    }

    /// The first value of header `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == name).map(|(_, v)| v)
    }

    /// Index of the first header called `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.spans.iter().position(|s| &self.text[s.name()] == name)
    }

    /// The value of header `i`.
    pub fn value(&self, i: usize) -> Option<&str> {
        self.spans.get(i).map(|s| &self.text[s.value()])
    }

    /// Replaces the value of header `i` (the old one stays in the text, unused).
    pub fn set_value(&mut self, i: usize, value: &str) {
        if i >= self.spans.len() {
            return;
        }
        let value = self.put(value);
        self.spans[i].value = value;
    }

    /// `(name, value)` pairs in wire order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.spans
            .iter()
            .map(|s| (&self.text[s.name()], &self.text[s.value()]))
    }

    /// The headers as owned pairs (what leaves the STOMP front end, e.g. a reply sent
    /// through the cluster).
    pub fn to_vec(&self) -> Vec<(String, String)> {
        self.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

impl PartialEq for Headers {
    fn eq(&self, other: &Headers) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Headers {}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Headers {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Headers {
        let mut h = Headers::new();
        for (k, v) in iter {
            h.push(k.as_ref(), v.as_ref());
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_first_wins_and_values_can_be_replaced() {
        let mut h: Headers = [("a", "1"), ("b", "2"), ("a", "3")].into_iter().collect();
        assert_eq!(h.get("a"), Some("1"));
        assert_eq!(h.position("b"), Some(1));
        h.set_value(1, "two");
        assert_eq!(h.value(1), Some("two"));
        assert_eq!(
            h.iter().collect::<Vec<_>>(),
            vec![("a", "1"), ("b", "two"), ("a", "3")]
        );
        let same: Headers = [("a", "1"), ("b", "two"), ("a", "3")].into_iter().collect();
        assert_eq!(h, same);
        assert_eq!(h.to_vec()[1], ("b".to_string(), "two".to_string()));
    }

    #[test]
    fn push_with_splits_name_and_value() {
        let mut h = Headers::new();
        h.push_with(|t| {
            t.push_str("name");
            let v = t.len();
            t.push_str("value");
            Ok::<_, ()>(v)
        })
        .expect("pushed");
        assert_eq!(h.get("name"), Some("value"));
        assert_eq!(h.text.len(), 9);
    }
}
