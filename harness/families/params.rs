//! Typed reads of a point's parameters, shared by every family adapter. Plans have already
//! checked each parameter's kind against the family's [`crate::model::ParamSpec`]s; these errors
//! catch what a plan cannot (a family called directly, a value out of its domain).

use crate::model::{Params, Value};
use anyhow::{anyhow, bail, Result};

/// A non-negative integer parameter, `default` when absent.
pub fn get_usize(point: &Params, key: &str, default: usize) -> Result<usize> {
    match point.get(key) {
        None => Ok(default),
        Some(v) => v
            .as_usize()
            .ok_or_else(|| anyhow!("parameter {key} must be a non-negative integer, got {v}")),
    }
}

/// A non-negative integer parameter, `None` when absent.
pub fn get_opt_usize(point: &Params, key: &str) -> Result<Option<usize>> {
    match point.get(key) {
        None => Ok(None),
        Some(_) => get_usize(point, key, 0).map(Some),
    }
}

/// A numeric parameter (integers widen), `default` when absent.
pub fn get_f64(point: &Params, key: &str, default: f64) -> Result<f64> {
    match point.get(key) {
        None => Ok(default),
        Some(v) => v
            .as_f64()
            .ok_or_else(|| anyhow!("parameter {key} must be a number, got {v}")),
    }
}

/// A string parameter, `default` when absent.
pub fn get_str<'p>(point: &'p Params, key: &str, default: &'p str) -> Result<&'p str> {
    match point.get(key) {
        None => Ok(default),
        Some(v) => v
            .as_str()
            .ok_or_else(|| anyhow!("parameter {key} must be a string, got {v}")),
    }
}

/// A boolean parameter, `default` when absent.
pub fn get_bool(point: &Params, key: &str, default: bool) -> Result<bool> {
    match point.get(key) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => bail!("parameter {key} must be true or false, got {v}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_values_default_and_wrong_kinds_name_the_parameter() {
        let p = Params::from([
            ("n".to_string(), Value::Int(3)),
            ("x".to_string(), Value::Str("a".into())),
        ]);
        assert_eq!(get_usize(&p, "n", 9).unwrap(), 3);
        assert_eq!(get_usize(&p, "m", 9).unwrap(), 9);
        assert_eq!(get_opt_usize(&p, "m").unwrap(), None);
        assert_eq!(get_f64(&p, "n", 0.5).unwrap(), 3.0);
        assert_eq!(get_str(&p, "x", "b").unwrap(), "a");
        assert!(get_bool(&p, "b", true).unwrap());
        let err = get_usize(&p, "x", 0).unwrap_err().to_string();
        assert!(
            err.contains("parameter x must be a non-negative integer"),
            "{err}"
        );
        assert!(get_bool(&p, "n", false).is_err());
    }
}
