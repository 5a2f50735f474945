//! Adapters from algorithm crates to the harness's Family trait.
