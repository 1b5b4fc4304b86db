//! How a failed command reports its error: the message and each cause once.
//!
//! Many error types print their source inside their own message (`io error on X: Permission
//! denied`) and also return it as `source()`; printing the whole chain naively would say
//! every cause twice. A cause whose text the line above already contains is skipped.

/// `error: <message>` followed by one `  caused by: <cause>` line per cause not yet said.
pub(crate) fn render(err: &anyhow::Error) -> String {
    let mut out = format!("error: {err}");
    let mut said = err.to_string();
    for cause in err.chain().skip(1) {
        let text = cause.to_string();
        if text.is_empty() || said.contains(&text) {
            continue;
        }
        out.push_str("\n  caused by: ");
        out.push_str(&text);
        said = text;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Like most error types: the source is in the message and also `source()`.
    #[derive(Debug)]
    struct Wrapping {
        source: std::io::Error,
    }

    impl std::fmt::Display for Wrapping {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "io error on /d: {}", self.source)
        }
    }

    impl std::error::Error for Wrapping {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "Permission denied");
        let err = anyhow::Error::new(Wrapping { source: io }).context("opening the data directory");
        assert_eq!(
            render(&err),
            "error: opening the data directory\n  caused by: io error on /d: Permission denied"
        );
    }

    #[test]
    fn distinct_causes_are_all_listed() {
        let err = anyhow::anyhow!("inner").context("middle").context("outer");
        assert_eq!(
            render(&err),
            "error: outer\n  caused by: middle\n  caused by: inner"
        );
    }
}
