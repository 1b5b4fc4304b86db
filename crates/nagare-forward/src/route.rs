//! Tag routing with Fluentd's match syntax: `*` matches one tag part, `**` zero or more
//! parts, `{a,b}` alternatives, and several space-separated patterns match any of them.
//! The first route that matches wins; without one, the topic is the tag with characters
//! outside Kafka's legal set replaced by `_`.

use std::sync::Arc;

use nagare_core::sanitize_topic_name;

use crate::config::{Format, Route};
use crate::route_stats::RouteStats;

/// Where events of one tag go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Topic { name: String, format: Format },
    Drop,
}

/// Patterns are expanded into plain alternatives at start-up; this bounds the expansion
/// of nested braces.
const MAX_ALTERNATIVES: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// `**` as a whole part: zero or more tag parts.
    Any,
    /// A tag part, `*` in it matching any run of characters within the part.
    Glob(String),
}

#[derive(Debug, Clone)]
struct Compiled {
    alternatives: Vec<Vec<Part>>,
    target: Target,
}

/// The compiled routes of a listener.
#[derive(Debug, Clone)]
pub struct Router {
    routes: Vec<Compiled>,
    default_format: Format,
    /// One per route, then one for tags no route matched.
    stats: Arc<[RouteStats]>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PatternError {
    #[error("unbalanced braces in match pattern {0:?}")]
    Braces(String),
    #[error("match pattern {0:?} expands to more than {MAX_ALTERNATIVES} alternatives")]
    TooMany(String),
    #[error("empty match pattern")]
    Empty,
    #[error("route topic {0:?} is not a legal topic name: {1}")]
    Topic(String, String),
}

impl Router {
    pub fn new(routes: &[Route], default_format: Format) -> Result<Router, PatternError> {
        let mut compiled = Vec::with_capacity(routes.len());
        for r in routes {
            let mut alternatives = Vec::new();
            for pat in r.pattern.split_whitespace() {
                for alt in expand_braces(pat)? {
                    alternatives.push(alt.split('.').map(part).collect());
                }
            }
            if alternatives.is_empty() {
                return Err(PatternError::Empty);
            }
            let target = if r.drop {
                Target::Drop
            } else {
                if !r.topic.is_empty() {
                    nagare_core::validate_topic_name(&r.topic)
                        .map_err(|e| PatternError::Topic(r.topic.clone(), e.to_string()))?;
                }
                Target::Topic {
                    name: r.topic.clone(),
                    format: r.format,
                }
            };
            compiled.push(Compiled {
                alternatives,
                target,
            });
        }
        let stats = routes
            .iter()
            .map(|r| RouteStats::new(Some(r.pattern.clone()), (!r.drop).then(|| r.topic.clone())))
            .chain([RouteStats::new(None, Some(String::new()))])
            .collect();
        Ok(Router {
            routes: compiled,
            default_format,
            stats,
        })
    }

    /// Every route's counters in configuration order, then the unmatched tags' ones.
    pub fn stats(&self) -> &[RouteStats] {
        &self.stats
    }

    /// The target of `tag`.
    pub fn resolve(&self, tag: &str) -> Target {
        self.resolve_route(tag).1
    }

    /// The target of `tag` and the index of its counters in [`Router::stats`].
    pub fn resolve_route(&self, tag: &str) -> (usize, Target) {
        let parts: Vec<&str> = tag.split('.').collect();
        for (i, r) in self.routes.iter().enumerate() {
            if r.alternatives.iter().any(|alt| match_parts(alt, &parts)) {
                let target = match &r.target {
                    Target::Topic { name, format } if name.is_empty() => Target::Topic {
                        name: sanitize_topic_name(tag),
                        format: *format,
                    },
                    t => t.clone(),
                };
                return (i, target);
            }
        }
        let target = Target::Topic {
            name: sanitize_topic_name(tag),
            format: self.default_format,
        };
        (self.routes.len(), target)
    }
}

fn part(s: &str) -> Part {
    if s == "**" {
        Part::Any
    } else {
        Part::Glob(s.to_string())
    }
}

/// `a.{b,c.d}.e` → `a.b.e`, `a.c.d.e` (nested braces allowed).
fn expand_braces(pat: &str) -> Result<Vec<String>, PatternError> {
    let Some(open) = pat.find('{') else {
        if pat.contains('}') {
            return Err(PatternError::Braces(pat.to_string()));
        }
        return Ok(vec![pat.to_string()]);
    };
    // Find the matching close brace and the top-level commas inside.
    let bytes = pat.as_bytes();
    let mut depth = 0;
    let mut commas = Vec::new();
    let mut close = None;
    for (i, &b) in bytes.iter().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            b',' if depth == 1 => commas.push(i),
            _ => {}
        }
    }
    let close = close.ok_or_else(|| PatternError::Braces(pat.to_string()))?;
    let (prefix, suffix) = (&pat[..open], &pat[close + 1..]);
    let mut bounds = vec![open];
    bounds.extend(commas);
    bounds.push(close);
    let mut out = Vec::new();
    for w in bounds.windows(2) {
        let choice = &pat[w[0] + 1..w[1]];
        for e in expand_braces(&format!("{prefix}{choice}{suffix}"))? {
            out.push(e);
            if out.len() > MAX_ALTERNATIVES {
                return Err(PatternError::TooMany(pat.to_string()));
            }
        }
    }
    Ok(out)
}

/// Dynamic programming over (pattern part, tag part): O(parts × tag parts), whatever
/// the number of `**` (naive backtracking is exponential in them, and tags come from
/// the network).
fn match_parts(pat: &[Part], tag: &[&str]) -> bool {
    // reach[j]: the pattern parts consumed so far can match the first j tag parts.
    let mut reach = vec![false; tag.len() + 1];
    reach[0] = true;
    for p in pat {
        let mut next = vec![false; tag.len() + 1];
        match p {
            Part::Any => {
                let mut any = false;
                for j in 0..=tag.len() {
                    any |= reach[j];
                    next[j] = any;
                }
            }
            Part::Glob(g) => {
                for j in 0..tag.len() {
                    if reach[j] && glob(g.as_bytes(), tag[j].as_bytes()) {
                        next[j + 1] = true;
                    }
                }
            }
        }
        reach = next;
    }
    reach[tag.len()]
}

/// `*` matches any run of characters within one tag part. Greedy with one backtrack
/// point (the last `*`), which is linear-time for this glob dialect.
fn glob(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pat.len() && pat[p] == b'*' {
            star = Some((p, i));
            p += 1;
        } else if p < pat.len() && pat[p] == s[i] {
            p += 1;
            i += 1;
        } else if let Some((sp, si)) = star {
            p = sp + 1;
            i = si + 1;
            star = Some((sp, si + 1));
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(pats: &[(&str, &str)]) -> Router {
        let routes: Vec<Route> = pats
            .iter()
            .map(|(m, t)| Route {
                pattern: m.to_string(),
                topic: t.to_string(),
                drop: *t == "DROP",
                ..Route::default()
            })
            .collect();
        Router::new(&routes, Format::Json).unwrap()
    }

    fn topic(r: &Router, tag: &str) -> String {
        match r.resolve(tag) {
            Target::Topic { name, .. } => name,
            Target::Drop => "DROP".into(),
        }
    }

    #[test]
    fn fluentd_match_syntax() {
        let r = router(&[
            ("app.**", "app"),
            ("a.*", "one"),
            ("x.{b,c.d}.y", "alt"),
            ("**.err", "err"),
            ("noise debug.**", "DROP"),
            ("p*x.q", "glob"),
        ]);
        assert_eq!(topic(&r, "app"), "app");
        assert_eq!(topic(&r, "app.web.1"), "app");
        assert_eq!(topic(&r, "a.b"), "one");
        assert_eq!(topic(&r, "a"), "a");
        assert_eq!(topic(&r, "a.b.c"), "a.b.c");
        assert_eq!(topic(&r, "x.b.y"), "alt");
        assert_eq!(topic(&r, "x.c.d.y"), "alt");
        assert_eq!(topic(&r, "x.c.y"), "x.c.y");
        assert_eq!(topic(&r, "err"), "err");
        assert_eq!(topic(&r, "k.l.err"), "err");
        assert_eq!(topic(&r, "noise"), "DROP");
        assert_eq!(topic(&r, "debug.z"), "DROP");
        assert_eq!(topic(&r, "prefix.q"), "glob");
        assert_eq!(topic(&r, "web/access log"), "web_access_log");
    }

    #[test]
    fn many_double_stars_against_a_long_tag_stay_fast() {
        let r = router(&[("**.x.**.y.**.z.**.w", "t"), ("a*a*a*a*a*a*b", "g")]);
        let tag = vec!["q"; 5000].join(".");
        let t0 = std::time::Instant::now();
        assert_eq!(topic(&r, &tag).len(), 249);
        assert_eq!(topic(&r, &"a".repeat(5000)), "a".repeat(249));
        assert!(t0.elapsed() < std::time::Duration::from_secs(2));
        assert_eq!(topic(&r, "x.y.z.w"), "t");
        assert_eq!(topic(&r, "1.x.2.3.y.z.4.w"), "t");
        assert_eq!(topic(&r, "aaaaaaab"), "g");
        assert_eq!(topic(&r, "aaaab"), "aaaab");
    }

    #[test]
    fn first_match_wins_and_empty_topic_means_the_tag() {
        let r = router(&[("a.**", ""), ("a.b", "never")]);
        assert_eq!(topic(&r, "a.b"), "a.b");
    }

    #[test]
    fn bad_patterns_and_topics_are_refused() {
        let bad = |m: &str, t: &str| {
            Router::new(
                &[Route {
                    pattern: m.into(),
                    topic: t.into(),
                    ..Route::default()
                }],
                Format::Json,
            )
            .is_err()
        };
        assert!(bad("a.{b", "t"));
        assert!(bad("a}", "t"));
        assert!(bad("  ", "t"));
        assert!(bad("a", "no/slash"));
        assert!(bad(&"{a,b}".repeat(13), "t"));
    }
}
