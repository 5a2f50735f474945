//! The one YAML parse of an experiment file: text -> a tree whose every node and key carries its
//! 1-based line and column ([`marked_yaml::Node`]), and a serde `Deserializer` over that tree, so
//! the typed [`super::ExperimentConfig`] and the positions of later validation errors
//! ([`super::Document::locate`]) come from the same parse.
//!
//! Why marked-yaml: it parses with yaml-rust2 (a YAML 1.2 parser) into a plain tree that keeps a
//! start mark on every node *and every mapping key*, and keeps mappings in written order, which
//! is all `locate` and `sweep_key_order` need. (serde_yaml keeps no positions after parsing;
//! saphyr's marked tree would do as well, but marked-yaml's is the smaller API.) It refuses
//! anchors, aliases and tags, which experiment files do not use.
//!
//! Why our own `Deserializer` rather than marked-yaml's `from_node` (feature "serde", not
//! enabled): that one hands every scalar to `deserialize_any` as a string, so the untagged
//! [`crate::family::Value`] would read `threads: 2` as the string "2" and the internally tagged
//! claims (which serde buffers through `deserialize_any`) would refuse `at_least: 50`; and its
//! errors carry no position unless the "serde-path" feature re-walks the tree. Here plain scalars
//! are typed by the rules serde_yaml 0.9 applied (YAML 1.2 core schema: null, true/false, ints
//! incl. 0x/0o/0b, floats incl. .inf/.nan, else string; `yes`/`no`/`on`/`off` stay strings),
//! quoted and block scalars are always strings, and every error gets the position and the path
//! (`claims[0].at_least`) of the innermost node it came from.

use marked_yaml::types::{MarkedMappingNode, MarkedScalarNode, MarkedSequenceNode};
use marked_yaml::{LoadError, LoaderOptions, Node, Span};
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, Unexpected, Visitor};
use serde::Deserialize;
use std::fmt;

/// A 1-based (line, column) position in the YAML text; columns count characters.
pub type Position = (usize, usize);

/// A YAML syntax error or a mismatch with the schema, with where it happened.
#[derive(Clone, Debug)]
pub struct Error {
    message: String,
    /// Dotted path of the node the error belongs to (`claims[0].at_least`), empty at the top.
    path: String,
    position: Option<Position>,
    /// For "unknown field" errors: the field, so the position can be the key's own.
    unknown_field: Option<String>,
    /// Position and path have been settled (by the innermost node the error passed through).
    settled: bool,
}

impl Error {
    fn at(message: String, position: Option<Position>) -> Self {
        Error {
            message,
            path: String::new(),
            position,
            unknown_field: None,
            settled: true,
        }
    }

    /// Where the error is, when known.
    pub fn position(&self) -> Option<Position> {
        self.position
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error {
            message: msg.to_string(),
            path: String::new(),
            position: None,
            unknown_field: None,
            settled: false,
        }
    }

    /// serde's own wording, plus the field name kept aside.
    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        let expected = match expected {
            [] => "there are no fields".to_string(),
            [one] => format!("expected `{one}`"),
            [a, b] => format!("expected `{a}` or `{b}`"),
            names => {
                let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                format!("expected one of {}", quoted.join(", "))
            }
        };
        let mut err =
            <Error as de::Error>::custom(format_args!("unknown field `{field}`, {expected}"));
        err.unknown_field = Some(field.to_string());
        err
    }
}

/// Parses `text` (one document whose top level is a mapping; duplicate keys are refused).
pub fn parse(text: &str) -> Result<Node, Error> {
    let options = LoaderOptions::default()
        // Keeps the quoting: only plain scalars "may coerce", i.e. get typed.
        .prevent_coercion(true)
        .error_on_duplicate_keys(true);
    marked_yaml::parse_yaml_with_options(0, text, options).map_err(|err| load_error(&err))
}

fn load_error(err: &LoadError) -> Error {
    let pos = |m: &marked_yaml::Marker| Some((m.line(), m.column()));
    match err {
        LoadError::TopLevelMustBeMapping(m) | LoadError::TopLevelMustBeSequence(m) => Error::at(
            "an experiment file must be a mapping of `key: value` lines".to_string(),
            pos(m),
        ),
        LoadError::UnexpectedAnchor(m) => Error::at(
            "YAML anchors and aliases (`&name`, `*name`) are not supported in experiment files"
                .to_string(),
            pos(m),
        ),
        LoadError::UnexpectedTag(m) => Error::at(
            "YAML tags (`!name`, `!!str`) are not supported in experiment files".to_string(),
            pos(m),
        ),
        LoadError::MappingKeyMustBeScalar(m) => Error::at(
            "a mapping key must be a name, not a list or a mapping".to_string(),
            pos(m),
        ),
        LoadError::DuplicateKey(inner) => {
            let first = start(inner.prev_key.span());
            Error::at(
                format!(
                    "duplicate key `{}`{}",
                    inner.key.as_str(),
                    first.map_or(String::new(), |(l, c)| format!(
                        " (first written at line {l} column {c})"
                    ))
                ),
                start(inner.key.span()),
            )
        }
        LoadError::ScanError(m, _) => {
            // marked-yaml writes "L:C: what"; the position is kept apart.
            let text = err.to_string();
            let prefix = format!("{m}: ");
            let message = text.strip_prefix(&prefix).unwrap_or(&text).to_string();
            Error::at(message, pos(m))
        }
    }
}

/// The start of a span as a position.
pub fn start(span: &Span) -> Option<Position> {
    span.start().map(|m| (m.line(), m.column()))
}

/// Where a node is written: a scalar's first character, a flow collection's bracket, a block
/// list's first dash, a block mapping's first key (yaml-rust2 marks a block mapping after its
/// first key).
pub fn position(node: &Node) -> Option<Position> {
    match node {
        Node::Mapping(map) => {
            let own = start(map.span());
            let first_key = map.keys().next().and_then(|k| start(k.span()));
            match (own, first_key) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        _ => start(node.span()),
    }
}

/// A scalar with its YAML type resolved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar<'a> {
    Null,
    Bool(bool),
    Unsigned(u64),
    Negative(i64),
    Float(f64),
    Str(&'a str),
}

/// Types a scalar the way serde_yaml 0.9 did: quoted and block scalars are strings; plain ones are
/// null (empty, `~`, `null`), booleans (`true`/`false` in three casings), integers (decimal
/// without leading zeros, `0x`/`0o`/`0b`), floats (Rust syntax, `.inf`, `.nan`), else strings.
pub fn resolve(scalar: &MarkedScalarNode) -> Scalar<'_> {
    let s = scalar.as_str();
    if !scalar.may_coerce() {
        return Scalar::Str(s);
    }
    if matches!(s, "" | "~" | "null" | "Null" | "NULL") {
        return Scalar::Null;
    }
    match s {
        "true" | "True" | "TRUE" => return Scalar::Bool(true),
        "false" | "False" | "FALSE" => return Scalar::Bool(false),
        _ => {}
    }
    if let Some(u) = parse_unsigned(s) {
        return Scalar::Unsigned(u);
    }
    if let Some(i) = parse_negative(s) {
        return Scalar::Negative(i);
    }
    if !digits_but_not_number(s) {
        if let Some(f) = parse_float(s) {
            return Scalar::Float(f);
        }
    }
    Scalar::Str(s)
}

/// The number a plain scalar stands for, if it is one.
pub fn number(scalar: &MarkedScalarNode) -> Option<f64> {
    match resolve(scalar) {
        Scalar::Unsigned(u) => Some(u as f64),
        Scalar::Negative(i) => Some(i as f64),
        Scalar::Float(f) => Some(f),
        _ => None,
    }
}

fn parse_unsigned(s: &str) -> Option<u64> {
    let unsigned = s.strip_prefix('+').unwrap_or(s);
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(rest) = unsigned.strip_prefix(prefix) {
            if rest.starts_with(['+', '-']) {
                return None;
            }
            if let Ok(u) = u64::from_str_radix(rest, radix) {
                return Some(u);
            }
        }
    }
    if unsigned.starts_with(['+', '-']) || digits_but_not_number(s) {
        return None;
    }
    unsigned.parse().ok()
}

fn parse_negative(s: &str) -> Option<i64> {
    for (prefix, radix) in [("-0x", 16), ("-0o", 8), ("-0b", 2)] {
        if let Some(rest) = s.strip_prefix(prefix) {
            if let Ok(i) = i64::from_str_radix(&format!("-{rest}"), radix) {
                return Some(i);
            }
        }
    }
    if digits_but_not_number(s) {
        return None;
    }
    s.parse().ok()
}

fn parse_float(s: &str) -> Option<f64> {
    let unsigned = match s.strip_prefix('+') {
        Some(rest) if rest.starts_with(['+', '-']) => return None,
        Some(rest) => rest,
        None => s,
    };
    if matches!(unsigned, ".inf" | ".Inf" | ".INF") {
        return Some(f64::INFINITY);
    }
    if matches!(s, "-.inf" | "-.Inf" | "-.INF") {
        return Some(f64::NEG_INFINITY);
    }
    if matches!(s, ".nan" | ".NaN" | ".NAN") {
        return Some(f64::NAN);
    }
    // Rust also reads `inf`, `NaN`, `infinity`: YAML does not, they stay strings.
    unsigned.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// Leading zeros followed by digits (`007`) are a string in YAML 1.2.
fn digits_but_not_number(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    s.len() > 1 && s.starts_with('0') && s[1..].bytes().all(|b| b.is_ascii_digit())
}

// ---------------------------------------------------------------------------------------------
// The Deserializer over the tree.
// ---------------------------------------------------------------------------------------------

/// Deserializes a `T` from a parsed tree.
pub fn from_node<'de, T: Deserialize<'de>>(node: &'de Node) -> Result<T, Error> {
    T::deserialize(NodeDe {
        node,
        path: String::new(),
    })
    .map_err(|err| settle_at_node(err, node, ""))
}

fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

fn settle(mut err: Error, position: Option<Position>, path: &str) -> Error {
    if !err.settled {
        err.settled = true;
        err.position = position;
        err.path = path.to_string();
    }
    err
}

/// Settles an error at `node`; an unknown field at the key of that name when `node` is a mapping
/// that has it (serde raises it after buffering, e.g. inside the internally tagged claims).
fn settle_at_node(err: Error, node: &Node, path: &str) -> Error {
    let key = err.unknown_field.as_deref().and_then(|field| {
        node.as_mapping()?
            .keys()
            .find(|k| k.as_str() == field)
            .and_then(|k| start(k.span()))
    });
    settle(err, key.or_else(|| position(node)), path)
}

struct NodeDe<'de> {
    node: &'de Node,
    path: String,
}

impl<'de> NodeDe<'de> {
    fn settle<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        result.map_err(|err| settle_at_node(err, self.node, &self.path))
    }
}

/// Methods a scalar answers in its own way and a collection by `deserialize_any`.
macro_rules! by_scalar_or_any {
    ($($method:ident($($arg:ident: $ty:ty),*))*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, Error> {
            match self.node {
                Node::Scalar(scalar) => ScalarDe { scalar, path: self.path }.$method($($arg,)* visitor),
                _ => self.deserialize_any(visitor),
            }
        }
    )*};
}

impl<'de> de::Deserializer<'de> for NodeDe<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let result = match self.node {
            Node::Scalar(scalar) => {
                return ScalarDe {
                    scalar,
                    path: self.path,
                }
                .deserialize_any(visitor)
            }
            Node::Mapping(map) => visitor.visit_map(MapDe::new(map, &self.path)),
            Node::Sequence(seq) => visitor.visit_seq(SeqDe::new(seq, &self.path)),
        };
        self.settle(result)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.node {
            Node::Scalar(scalar) => ScalarDe {
                scalar,
                path: self.path,
            }
            .deserialize_option(visitor),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    /// A scalar names a unit variant; a mapping with one key, a variant and its content.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let result = match self.node {
            Node::Scalar(scalar) => {
                return ScalarDe {
                    scalar,
                    path: self.path,
                }
                .deserialize_enum(name, variants, visitor)
            }
            Node::Mapping(map) if map.len() == 1 => {
                let (key, value) = map.iter().next().expect("one entry");
                visitor.visit_enum(EnumDe {
                    key,
                    value,
                    path: self.path.clone(),
                })
            }
            Node::Mapping(_) => Err(de::Error::invalid_value(
                Unexpected::Map,
                &"a mapping with a single key",
            )),
            Node::Sequence(_) => Err(de::Error::invalid_type(Unexpected::Seq, &visitor)),
        };
        self.settle(result)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    by_scalar_or_any! {
        deserialize_bool() deserialize_i8() deserialize_i16() deserialize_i32()
        deserialize_i64() deserialize_i128() deserialize_u8() deserialize_u16()
        deserialize_u32() deserialize_u64() deserialize_u128() deserialize_f32()
        deserialize_f64() deserialize_char() deserialize_str() deserialize_string()
        deserialize_bytes() deserialize_byte_buf() deserialize_unit()
        deserialize_unit_struct(name: &'static str) deserialize_seq()
        deserialize_tuple(len: usize) deserialize_tuple_struct(name: &'static str, len: usize)
        deserialize_map() deserialize_struct(name: &'static str, fields: &'static [&'static str])
        deserialize_identifier()
    }
}

/// A scalar: a value, or a mapping key.
struct ScalarDe<'de> {
    scalar: &'de MarkedScalarNode,
    path: String,
}

impl<'de> ScalarDe<'de> {
    fn settle<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        result.map_err(|err| settle(err, start(self.scalar.span()), &self.path))
    }

    fn is_null(&self) -> bool {
        resolve(self.scalar) == Scalar::Null
    }

    /// `key:` with nothing after it (serde_yaml read it as an empty list or mapping too).
    fn is_empty(&self) -> bool {
        self.scalar.may_coerce() && self.scalar.as_str().is_empty()
    }

    fn raw(&self) -> &'de str {
        let scalar: &'de MarkedScalarNode = self.scalar;
        scalar.as_str()
    }
}

impl<'de> de::Deserializer<'de> for ScalarDe<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let scalar: &'de MarkedScalarNode = self.scalar;
        let result = match resolve(scalar) {
            Scalar::Null => visitor.visit_unit(),
            Scalar::Bool(b) => visitor.visit_bool(b),
            Scalar::Unsigned(u) => visitor.visit_u64(u),
            Scalar::Negative(i) => visitor.visit_i64(i),
            Scalar::Float(f) => visitor.visit_f64(f),
            Scalar::Str(s) => visitor.visit_borrowed_str(s),
        };
        self.settle(result)
    }

    /// Strings take the text as written, whatever it looks like (`name: 2024` is "2024").
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let result = visitor.visit_borrowed_str(self.raw());
        self.settle(result)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.is_null() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.is_null() {
            visitor.visit_unit()
        } else {
            self.deserialize_any(visitor)
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.is_empty() {
            let result = visitor.visit_seq(SeqDe::new_empty(&self.path));
            self.settle(result)
        } else {
            self.deserialize_any(visitor)
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.is_empty() {
            let result = visitor.visit_map(MapDe::new_empty(&self.path));
            self.settle(result)
        } else {
            self.deserialize_any(visitor)
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let result = visitor.visit_enum(BorrowedStrDeserializer::<Error>::new(self.raw()));
        self.settle(result)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 bytes byte_buf
    }
}

type Entry<'de> = (&'de MarkedScalarNode, &'de Node);

struct MapDe<'de> {
    entries: std::vec::IntoIter<Entry<'de>>,
    pending: Option<Entry<'de>>,
    path: String,
}

impl<'de> MapDe<'de> {
    fn new(map: &'de MarkedMappingNode, path: &str) -> Self {
        MapDe {
            entries: map.iter().collect::<Vec<_>>().into_iter(),
            pending: None,
            path: path.to_string(),
        }
    }

    fn new_empty(path: &str) -> Self {
        MapDe {
            entries: Vec::new().into_iter(),
            pending: None,
            path: path.to_string(),
        }
    }
}

impl<'de> de::MapAccess<'de> for MapDe<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.pending = Some((key, value));
        // A key's errors (an unknown field) point at the key, under the mapping's path.
        seed.deserialize(ScalarDe {
            scalar: key,
            path: self.path.clone(),
        })
        .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some((key, node)) = self.pending.take() else {
            return Err(de::Error::custom("a value was asked for before its key"));
        };
        let path = child(&self.path, key.as_str());
        seed.deserialize(NodeDe {
            node,
            path: path.clone(),
        })
        .map_err(|err| settle_at_node(err, node, &path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

struct SeqDe<'de> {
    items: std::iter::Enumerate<std::slice::Iter<'de, Node>>,
    path: String,
}

impl<'de> SeqDe<'de> {
    fn new(seq: &'de MarkedSequenceNode, path: &str) -> Self {
        SeqDe {
            items: seq.iter().enumerate(),
            path: path.to_string(),
        }
    }

    fn new_empty(path: &str) -> Self {
        SeqDe {
            items: [].iter().enumerate(),
            path: path.to_string(),
        }
    }
}

impl<'de> de::SeqAccess<'de> for SeqDe<'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some((index, node)) = self.items.next() else {
            return Ok(None);
        };
        let path = format!("{}[{index}]", self.path);
        seed.deserialize(NodeDe {
            node,
            path: path.clone(),
        })
        .map(Some)
        .map_err(|err| settle_at_node(err, node, &path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// `variant: content`, an externally tagged enum written as a one-key mapping.
struct EnumDe<'de> {
    key: &'de MarkedScalarNode,
    value: &'de Node,
    path: String,
}

impl<'de> de::EnumAccess<'de> for EnumDe<'de> {
    type Error = Error;
    type Variant = NodeDe<'de>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, NodeDe<'de>), Error> {
        let variant = seed.deserialize(ScalarDe {
            scalar: self.key,
            path: self.path.clone(),
        })?;
        let content = NodeDe {
            node: self.value,
            path: child(&self.path, self.key.as_str()),
        };
        Ok((variant, content))
    }
}

impl<'de> de::VariantAccess<'de> for NodeDe<'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        <() as Deserialize>::deserialize(self)
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_seq(self, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_map(self, visitor)
    }
}
