//! Typed parameters: each family declares its point's parameters once, as a struct written with
//! [`point_params!`], and everything else is derived from that one definition: the serde form
//! (unknown keys refused, defaults filled in), the per-value checks the plan runs on every value
//! of every sweep list, and the names, kinds, choices, defaults and help that `parbench list` and
//! the validation messages show.
//!
//! Options (kernel, generator, delta, ...) are enums implementing [`Named`]; a point field of
//! type [`Choice<T>`] accepts exactly the names `T` lists, so a typo in a swept list is an error
//! of the plan, at the list item, before anything runs.

use crate::family::{ParamSpec, Params, Value};
use serde::de::{self, Deserialize, Deserializer};
use std::fmt;

/// An option with a fixed set of names (a kernel, a generator, a delta encoding).
pub trait Named: Copy + Send + Sync + 'static {
    /// What the option is, for messages ("kernel").
    const WHAT: &'static str;
    /// Every value, in the order help texts list them.
    fn all() -> Vec<Self>;
    /// The name used in experiment files and on the command line.
    fn name(self) -> &'static str;
    /// The value called `name`.
    fn from_name(name: &str) -> Option<Self> {
        Self::all().into_iter().find(|v| v.name() == name)
    }
    /// Every name, for help texts.
    fn names() -> Vec<&'static str> {
        Self::all().into_iter().map(Self::name).collect()
    }
}

/// Declares a harness-side option enum with its names (for options whose algorithm crate does
/// not define one).
#[macro_export]
macro_rules! named_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident as $what:literal {
        $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $name { $($(#[$vmeta])* $variant),+ }
        impl $crate::families::params::Named for $name {
            const WHAT: &'static str = $what;
            fn all() -> Vec<Self> { vec![$($name::$variant),+] }
            fn name(self) -> &'static str { match self { $($name::$variant => $text),+ } }
        }
    };
}

/// A point field holding one of the names of `T`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice<T>(pub T);

impl<T> std::ops::Deref for Choice<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<'de, T: Named> Deserialize<'de> for Choice<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        T::from_name(&name).map(Choice).ok_or_else(|| {
            de::Error::custom(format!(
                "unknown {} `{name}` (valid: {})",
                T::WHAT,
                T::names().join(", ")
            ))
        })
    }
}

/// How one parameter's values look: its kind, its choices, how a value is checked and shown.
pub trait ParamType {
    /// "integer", "number", "string" or "boolean".
    const KIND: &'static str;
    /// The names an option accepts.
    fn choices() -> Option<Vec<&'static str>> {
        None
    }
    /// Why `value` cannot be this parameter's, if it cannot.
    fn check(value: &Value) -> Result<(), String>;
    /// The value as an experiment file writes it (for defaults in help texts).
    fn show(&self) -> String;
}

fn kind_error(kind: &str, value: &Value) -> String {
    format!(
        "must be {} {kind}, got {} `{value}`",
        if kind == "integer" { "an" } else { "a" },
        value.type_name()
    )
}

impl ParamType for usize {
    const KIND: &'static str = "integer";
    fn check(value: &Value) -> Result<(), String> {
        match value {
            Value::Int(i) if *i >= 0 => Ok(()),
            Value::Int(_) => Err(format!("must be a non-negative integer, got `{value}`")),
            _ => Err(kind_error("integer", value)),
        }
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl ParamType for u64 {
    const KIND: &'static str = "integer";
    fn check(value: &Value) -> Result<(), String> {
        usize::check(value)
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl ParamType for f64 {
    const KIND: &'static str = "number";
    fn check(value: &Value) -> Result<(), String> {
        match value.as_f64() {
            Some(x) if x.is_finite() => Ok(()),
            Some(_) => Err(format!("must be a finite number, got `{value}`")),
            None => Err(kind_error("number", value)),
        }
    }
    fn show(&self) -> String {
        format!("{self}")
    }
}

impl ParamType for bool {
    const KIND: &'static str = "boolean";
    fn check(value: &Value) -> Result<(), String> {
        match value {
            Value::Bool(_) => Ok(()),
            _ => Err(format!("must be true or false, got `{value}`")),
        }
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl ParamType for String {
    const KIND: &'static str = "string";
    fn check(value: &Value) -> Result<(), String> {
        match value {
            Value::Str(_) => Ok(()),
            _ => Err(kind_error("string", value)),
        }
    }
    fn show(&self) -> String {
        self.clone()
    }
}

impl<T: ParamType> ParamType for Option<T> {
    const KIND: &'static str = T::KIND;
    fn choices() -> Option<Vec<&'static str>> {
        T::choices()
    }
    fn check(value: &Value) -> Result<(), String> {
        T::check(value)
    }
    fn show(&self) -> String {
        match self {
            Some(v) => v.show(),
            None => "none".to_string(),
        }
    }
}

impl<T: Named> ParamType for Choice<T> {
    const KIND: &'static str = "string";
    fn choices() -> Option<Vec<&'static str>> {
        Some(T::names())
    }
    fn check(value: &Value) -> Result<(), String> {
        match value.as_str() {
            Some(name) if T::from_name(name).is_some() => Ok(()),
            Some(name) => Err(format!("must be a known {}, got `{name}`", T::WHAT)),
            None => Err(kind_error("string", value)),
        }
    }
    fn show(&self) -> String {
        self.0.name().to_string()
    }
}

/// Something wrong with a point's parameters taken together (a grid that cannot be formed, a
/// size of zero), found by a family's domain check.
#[derive(Clone, Debug, PartialEq)]
pub struct PointIssue {
    /// The parameters responsible, most specific first (the plan points at the first one).
    pub keys: Vec<&'static str>,
    pub message: String,
    /// How to fix it.
    pub help: String,
}

impl PointIssue {
    pub fn new(keys: &[&'static str], message: impl Into<String>, help: impl Into<String>) -> Self {
        PointIssue {
            keys: keys.to_vec(),
            message: message.into(),
            help: help.into(),
        }
    }
}

impl fmt::Display for PointIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.help)
    }
}

/// A `PointIssue` when a size parameter is zero.
pub fn positive(issues: &mut Vec<PointIssue>, key: &'static str, value: usize) {
    if value == 0 {
        issues.push(PointIssue::new(
            &[key],
            format!("`{key}` must be at least 1, got 0"),
            format!("set `{key}` to 1 or more"),
        ));
    }
}

/// A family's point parameters, declared with [`point_params!`].
pub trait PointParams: Sized + Clone + Send + Sync + 'static {
    /// Every parameter, with its default.
    fn specs() -> Vec<ParamSpec>;
    /// Why `value` cannot be parameter `key`'s (`None`: `key` is not a parameter).
    fn check_value(key: &str, value: &Value) -> Option<Result<(), String>>;
    /// The typed point from its parameters (runner parameters such as `threads` left out).
    /// Every value must have passed [`PointParams::check_value`].
    fn from_params(params: &Params) -> Result<Self, String>;
}

/// The typed point from `params`, for families' `from_params`: values go through serde_json,
/// so integers widen to floats exactly as the per-value checks allow.
pub fn deserialize_point<P: for<'de> Deserialize<'de>>(
    params: &Params,
    keep: impl Fn(&str) -> bool,
) -> Result<P, String> {
    let map: serde_json::Map<String, serde_json::Value> = params
        .iter()
        .filter(|(k, _)| keep(k))
        .map(|(k, v)| {
            let json = match v {
                Value::Bool(b) => serde_json::Value::Bool(*b),
                Value::Int(i) => serde_json::Value::from(*i),
                Value::Float(x) => serde_json::Value::from(*x),
                Value::Str(s) => serde_json::Value::String(s.clone()),
            };
            (k.clone(), json)
        })
        .collect();
    serde_json::from_value(serde_json::Value::Object(map)).map_err(|e| e.to_string())
}

/// Declares a family's point parameters: a struct whose fields are the parameters, each with
/// its doc comment (the help text) and default. Generates the serde form (unknown keys refused,
/// absent keys default), `Default`, and [`PointParams`].
///
/// A variant's options are parameters too, declared with the variants that read them:
/// `delta for ["async"]: Choice<DeltaEncoding> = ...`. That is the one pattern for a
/// parameterised variant (the plan refuses an option none of an experiment's variants reads,
/// and `parbench list` names its readers). An experiment sets an option for every variant
/// reading it (`params`, `sweep`) or for one listed variant (`async delta=sparse`,
/// `1.5d-dense-shift strategy=reuse`: see [`crate::experiment::variant`]).
#[macro_export]
macro_rules! point_params {
    ($(#[$meta:meta])* pub struct $name:ident {
        $($(#[doc = $doc:literal])+ $field:ident $(for [$($reader:literal),+])? : $ty:ty = $default:expr),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct $name { $($(#[doc = $doc])+ pub $field: $ty),+ }

        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $default),+ }
            }
        }

        impl $crate::families::params::PointParams for $name {
            fn specs() -> Vec<$crate::family::ParamSpec> {
                use $crate::families::params::ParamType;
                let d = $name::default();
                vec![$($crate::family::ParamSpec {
                    name: stringify!($field),
                    kind: <$ty as ParamType>::KIND,
                    choices: <$ty as ParamType>::choices(),
                    default: d.$field.show(),
                    help: [$($doc),+].iter().map(|s| s.trim()).collect::<Vec<_>>().join(" "),
                    read_by: None$(.or(Some(vec![$($reader),+])))?,
                }),+]
            }
            fn check_value(key: &str, value: &$crate::family::Value) -> Option<Result<(), String>> {
                use $crate::families::params::ParamType;
                match key {
                    $(stringify!($field) => Some(<$ty as ParamType>::check(value)),)+
                    _ => None,
                }
            }
            fn from_params(params: &$crate::family::Params) -> Result<Self, String> {
                $crate::families::params::deserialize_point(params, |k| {
                    !$crate::experiment::plan::RUNNER_PARAMS.contains(&k)
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    named_enum! {
        /// A test option.
        pub enum Shape as "shape" { Round = "round", Square = "square" }
    }

    point_params! {
        /// A test point.
        pub struct TestPoint {
            /// how many
            n: usize = 3,
            /// how much
            x: f64 = 0.5,
            /// which shape
            shape: Choice<Shape> = Choice(Shape::Round),
            /// optional limit
            limit for ["slow", "fast"]: Option<usize> = None,
        }
    }

    fn params(pairs: &[(&str, Value)]) -> Params {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn defaults_fill_absent_keys_and_integers_widen() {
        let p =
            TestPoint::from_params(&params(&[("x", Value::Int(2)), ("threads", Value::Int(4))]))
                .unwrap();
        assert_eq!((p.n, p.x, *p.shape, p.limit), (3, 2.0, Shape::Round, None));
        let p = TestPoint::from_params(&params(&[
            ("shape", Value::Str("square".into())),
            ("limit", Value::Int(7)),
        ]))
        .unwrap();
        assert_eq!((*p.shape, p.limit), (Shape::Square, Some(7)));
    }

    #[test]
    fn each_value_is_checked_against_its_parameter() {
        let check = |k: &str, v: Value| TestPoint::check_value(k, &v);
        assert_eq!(check("n", Value::Int(0)), Some(Ok(())));
        assert!(check("n", Value::Int(-1))
            .unwrap()
            .unwrap_err()
            .contains("non-negative"));
        assert!(check("n", Value::Float(1.5))
            .unwrap()
            .unwrap_err()
            .contains("an integer"));
        assert!(check("x", Value::Str("a".into())).unwrap().is_err());
        let typo = check("shape", Value::Str("sqare".into()))
            .unwrap()
            .unwrap_err();
        assert_eq!(typo, "must be a known shape, got `sqare`");
        assert_eq!(check("nope", Value::Int(1)), None);
    }

    #[test]
    fn specs_carry_kind_choices_default_and_help_from_the_one_definition() {
        let specs = TestPoint::specs();
        let names: Vec<&str> = specs.iter().map(|s| s.name).collect();
        assert_eq!(names, ["n", "x", "shape", "limit"]);
        let shape = &specs[2];
        assert_eq!(shape.kind, "string");
        assert_eq!(shape.choices, Some(vec!["round", "square"]));
        assert_eq!(shape.default, "round");
        assert_eq!(shape.help, "which shape");
        assert_eq!(specs[3].default, "none");
        assert_eq!(specs[3].read_by, Some(vec!["slow", "fast"]));
        assert_eq!(
            specs[2].read_by, None,
            "every variant reads an undeclared option"
        );
        assert_eq!(specs[1].default, "0.5");
    }

    #[test]
    fn unknown_keys_are_refused_by_the_typed_form() {
        let err = TestPoint::from_params(&params(&[("m", Value::Int(1))])).unwrap_err();
        assert!(err.contains("unknown field `m`"), "{err}");
    }
}
