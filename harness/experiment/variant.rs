//! A variant as an experiment lists it: one of the family's variants, then settings of options
//! only it reads, `name=value` separated by spaces (`1.5d-dense-shift strategy=fusion`, `async
//! delta=sparse`). The whole text names the variant in results, claims, figures and baselines;
//! the family runs its variant with those options set at every point.
//!
//! An option is a parameter a family declares for some of its variants only (`for [..]` in
//! [`point_params!`](crate::point_params)): FusedMM's strategy, LDA's async settings,
//! word2vec's distributed ones. One pattern serves them all: set an option for every variant
//! that reads it in `params` or `sweep`, or for one listed variant here, so two settings of
//! one variant can run side by side at the same point and a claim can compare them.

use crate::family::Value;

/// A listed variant split into the family variant it runs and its option settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ListedVariant<'a> {
    /// The family's variant (`1.5d-dense-shift`).
    pub base: &'a str,
    /// The option settings in written order (`strategy` = `fusion`).
    pub options: Vec<(&'a str, Value)>,
}

/// The family variant `listed` runs (its first word).
pub fn base_of(listed: &str) -> &str {
    listed.split_whitespace().next().unwrap_or(listed)
}

/// A setting's value as the experiment file would type it: a boolean, an integer, a number,
/// else a string.
fn typed_value(text: &str) -> Value {
    match text {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => {
            if let Ok(i) = text.parse::<i64>() {
                Value::Int(i)
            } else if let Ok(x) = text.parse::<f64>() {
                Value::Float(x)
            } else {
                Value::Str(text.to_string())
            }
        }
    }
}

impl<'a> ListedVariant<'a> {
    /// Splits `listed`; an error says what is wrong with its settings.
    pub fn parse(listed: &'a str) -> Result<ListedVariant<'a>, String> {
        let mut words = listed.split_whitespace();
        let base = words.next().ok_or("a variant name is empty")?;
        let mut options: Vec<(&str, Value)> = Vec::new();
        for word in words {
            let Some((name, value)) = word.split_once('=') else {
                return Err(format!(
                    "`{word}` in variant `{listed}` is not an option setting `name=value`"
                ));
            };
            if name.is_empty() || value.is_empty() {
                return Err(format!(
                    "`{word}` in variant `{listed}` needs both a name and a value"
                ));
            }
            if options.iter().any(|(n, _)| *n == name) {
                return Err(format!("variant `{listed}` sets `{name}` twice"));
            }
            options.push((name, typed_value(value)));
        }
        Ok(ListedVariant { base, options })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_variant_is_its_base_then_typed_settings() {
        let v = ListedVariant::parse("async delta=sparse non_blocking=true  limit=3 x=0.5")
            .expect("valid");
        assert_eq!(v.base, "async");
        assert_eq!(
            v.options,
            vec![
                ("delta", Value::Str("sparse".into())),
                ("non_blocking", Value::Bool(true)),
                ("limit", Value::Int(3)),
                ("x", Value::Float(0.5)),
            ]
        );
        let plain = ListedVariant::parse("1d").expect("valid");
        assert_eq!((plain.base, plain.options.len()), ("1d", 0));
        assert_eq!(
            base_of("1.5d-dense-shift strategy=fusion"),
            "1.5d-dense-shift"
        );
        assert_eq!(base_of("1d"), "1d");
    }

    #[test]
    fn malformed_settings_are_named() {
        for (listed, says) in [
            (
                "async sparse",
                "`sparse` in variant `async sparse` is not an option setting",
            ),
            ("async delta=", "needs both a name and a value"),
            ("async =x", "needs both a name and a value"),
            ("async a=1 a=2", "sets `a` twice"),
            ("", "empty"),
        ] {
            let e = ListedVariant::parse(listed).expect_err(listed);
            assert!(e.contains(says), "{listed}: {e}");
        }
    }
}
