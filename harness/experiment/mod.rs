//! The experiment file and its plan: parse, validate, expand; nothing here runs a point.

pub mod compare;
pub mod config;
pub mod plan;
