//! A seeded synthetic corpus with planted structure, and how well a model recovers it.
//!
//! [`PlantedSpec::corpus`]: `groups` groups of `group_words` words each, named
//! `g<group>w<index>`; every sentence of `sentence_words` words draws uniformly from one group
//! (groups in turn), so words of a group share contexts and words of different groups never do.
//! `words / sentence_words` sentences, about `words` tokens. O(words), one [`Rng`] stream.
//!
//! [`planted_accuracy`]: the share of a model's words whose nearest neighbour (cosine) belongs
//! to their own group, read from the names. A model that learned nothing scores about
//! `1 / groups`, one that separated the groups 1. O(V^2 d) (one neighbour search per word).

use crate::eval::Evaluator;
use crate::{Corpus, Model};
use parbench_common::rng::Rng;
use thiserror::Error;

/// Why a planted corpus cannot have the shape asked for: the field responsible and the rule.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("synthetic corpus: {reason}")]
pub struct PlantedShapeError {
    /// The [`PlantedSpec`] field to change (`groups`, `group_words`, `sentence_words`, `words`).
    pub field: &'static str,
    /// The rule it breaks, with the values.
    pub reason: String,
}

/// The shape of a planted corpus (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlantedSpec {
    /// Planted word groups (at least 2).
    pub groups: usize,
    /// Words per group (at least 2).
    pub group_words: usize,
    /// Words per sentence (at least 2).
    pub sentence_words: usize,
    /// Corpus length in words (at least one sentence).
    pub words: usize,
}

impl PlantedSpec {
    /// Checks the shape: at least 2 groups, 2 words a group and 2 words a sentence (a context
    /// needs two words), and at least one sentence.
    pub fn validate(&self) -> Result<(), PlantedShapeError> {
        for (field, value) in [
            ("groups", self.groups),
            ("group_words", self.group_words),
            ("sentence_words", self.sentence_words),
        ] {
            if value < 2 {
                return Err(PlantedShapeError {
                    field,
                    reason: format!("{field} must be at least 2, got {value}"),
                });
            }
        }
        if self.words < self.sentence_words {
            return Err(PlantedShapeError {
                field: "words",
                reason: format!(
                    "words ({}) must be at least sentence_words ({})",
                    self.words, self.sentence_words
                ),
            });
        }
        Ok(())
    }

    /// The corpus of this shape from `seed` (validated first).
    pub fn corpus(&self, seed: u64) -> Result<Corpus, PlantedShapeError> {
        self.validate()?;
        let (groups, group_words, sentence_words) =
            (self.groups, self.group_words, self.sentence_words);
        let names: Vec<String> = (0..groups * group_words)
            .map(|i| format!("g{}w{}", i / group_words, i % group_words))
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut rng = Rng::new(seed);
        let sentences = self.words / sentence_words;
        let mut ids = Vec::with_capacity(sentences * sentence_words);
        let mut ends = Vec::with_capacity(sentences);
        for s in 0..sentences {
            let base = (s % groups) * group_words;
            for _ in 0..sentence_words {
                ids.push((base + rng.below(group_words as u64) as usize) as u32);
            }
            ends.push(ids.len());
        }
        Ok(Corpus::from_ids(&refs, ids, ends))
    }
}

/// Share of the model's words whose nearest neighbour (cosine) is in the same planted group;
/// group membership is read from the `g<group>w<index>` names. 0 for an empty model.
pub fn planted_accuracy(model: &Model) -> f64 {
    let group = |w: &str| w.split('w').next().map(str::to_string);
    let e = Evaluator::new(model);
    let words = model.words();
    let hits = words
        .iter()
        .filter(|w| {
            e.neighbors(w, 1)
                .first()
                .is_some_and(|(n, _)| group(n) == group(w))
        })
        .count();
    hits as f64 / words.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(groups: usize, group_words: usize, sentence_words: usize, words: usize) -> PlantedSpec {
        PlantedSpec {
            groups,
            group_words,
            sentence_words,
            words,
        }
    }

    #[test]
    fn planted_corpus_keeps_each_sentence_in_one_group() {
        let c = spec(3, 4, 5, 60).corpus(1).unwrap();
        assert_eq!(c.num_words(), 60);
        assert_eq!(c.line_ends().len(), 12);
        let words = c.vocab().words();
        let mut start = 0;
        for &end in c.line_ends() {
            let group = |id: &u32| words[*id as usize].split('w').next().unwrap().to_string();
            let first = group(&c.ids()[start]);
            assert!(c.ids()[start..end].iter().all(|id| group(id) == first));
            start = end;
        }
        let again = spec(3, 4, 5, 60).corpus(1).unwrap();
        assert_eq!(
            (again.ids(), again.line_ends()),
            (c.ids(), c.line_ends()),
            "seeded"
        );
    }

    #[test]
    fn impossible_shapes_name_the_field_to_change() {
        for (s, field) in [
            (spec(1, 4, 5, 60), "groups"),
            (spec(3, 1, 5, 60), "group_words"),
            (spec(3, 4, 0, 60), "sentence_words"),
            (spec(3, 4, 5, 4), "words"),
        ] {
            let err = s.corpus(1).unwrap_err();
            assert_eq!(err.field, field);
            assert!(err.to_string().starts_with("synthetic corpus: "), "{err}");
        }
        assert_eq!(
            spec(1, 4, 5, 60).validate().unwrap_err().to_string(),
            "synthetic corpus: groups must be at least 2, got 1"
        );
        assert_eq!(
            spec(3, 4, 5, 4).validate().unwrap_err().to_string(),
            "synthetic corpus: words (4) must be at least sentence_words (5)"
        );
    }
}
