//! CSV as the commands write it by hand (the tidy tables go through polars): one quoting rule.

use std::borrow::Cow;

/// `s` as one CSV field (RFC 4180): quoted, with inner quotes doubled, only when it holds a
/// comma, a quote or a line break.
pub fn field(s: &str) -> Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", s.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_only_when_needed() {
        assert_eq!(field("oil"), "oil");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
    }
}
