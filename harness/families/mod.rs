//! Adapters from the algorithm crates to the harness's [`Family`] trait, and the registry.

pub mod embeddings;
pub mod fusedmm;
pub mod lda;
pub mod mock;
pub mod params;
pub mod sinkhorn;
pub mod wmd_knn;
pub mod word2vec;

use crate::family::Family;

/// Every family the harness can run, in the order `parbench list` shows them.
pub fn registry() -> Vec<Box<dyn Family>> {
    vec![
        Box::new(sinkhorn::SinkhornFamily),
        Box::new(fusedmm::FusedmmFamily),
        Box::new(fusedmm::apps::FusedmmAppsFamily),
        Box::new(lda::LdaFamily),
        Box::new(word2vec::Word2vecFamily),
        Box::new(embeddings::EmbeddingsFamily),
        Box::new(wmd_knn::WmdKnnFamily),
    ]
}

/// The family called `name`: a registered one, or the scripted `mock` family used by tests and by
/// experiment files that exercise the pipeline itself.
pub fn find(name: &str) -> Option<Box<dyn Family>> {
    if name == mock::MockFamily::NAME {
        return Some(Box::new(mock::MockFamily));
    }
    registry().into_iter().find(|f| f.name() == name)
}
