//! What is read back from stored results: figures, claims and the check against a baseline.

pub mod check;
pub mod claims;
pub mod history;
pub mod plot;
pub mod registry;
pub mod report;
pub mod summary;
