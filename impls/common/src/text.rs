//! Tokenizing, English stop words and a counted vocabulary.
//!
//! - [`tokenize`] splits on Unicode whitespace and lowercases; a token that is already lowercase is
//!   borrowed, so the common case (pre-cleaned corpora such as text8 or R8) allocates nothing.
//!   There is deliberately no punctuation handling: the corpora parbench reads are either already
//!   cleaned or are compared as-is, and a fixed, simple rule keeps every family's counts in step.
//! - [`is_stop_word`] tests membership in a built-in list of 218 English function words
//!   (binary search over a sorted table: O(log 218) string comparisons, no allocation).
//! - [`Vocab`] maps words to dense `u32` ids with occurrence counts. [`Vocab::build`] counts a
//!   token stream in one pass (a hash map, O(tokens)) and then keeps the words seen at least
//!   `min_count` times, sorted by decreasing count (ties by word, so ids never depend on hash
//!   order): O(V log V). word2vec and LDA build their vocabularies this way.

use std::borrow::Cow;
use std::collections::HashMap;

/// Whitespace-separated tokens of `line`, lowercased.
pub fn tokenize(line: &str) -> impl Iterator<Item = Cow<'_, str>> {
    line.split_whitespace().map(|token| {
        if token.chars().any(char::is_uppercase) {
            Cow::Owned(token.to_lowercase())
        } else {
            Cow::Borrowed(token)
        }
    })
}

/// Tokens of `line` (as [`tokenize`]) that are not stop words.
pub fn content_tokens(line: &str) -> impl Iterator<Item = Cow<'_, str>> {
    tokenize(line).filter(|t| !is_stop_word(t))
}

/// Common English function words (pronouns, articles, auxiliaries, prepositions, conjunctions,
/// and the fragments that removing apostrophes leaves: `don`, `t`, `s`, `ll`, ...). Sorted, so
/// membership is a binary search; lowercase only, so test tokens after [`tokenize`].
pub const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "ago",
    "all",
    "almost",
    "along",
    "already",
    "also",
    "although",
    "always",
    "am",
    "among",
    "an",
    "and",
    "another",
    "any",
    "anybody",
    "anyone",
    "anything",
    "anyway",
    "are",
    "aren",
    "around",
    "as",
    "at",
    "be",
    "became",
    "because",
    "become",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "cannot",
    "could",
    "couldn",
    "d",
    "did",
    "didn",
    "do",
    "does",
    "doesn",
    "doing",
    "don",
    "done",
    "down",
    "during",
    "each",
    "either",
    "else",
    "enough",
    "etc",
    "even",
    "ever",
    "every",
    "few",
    "for",
    "from",
    "further",
    "get",
    "gets",
    "got",
    "had",
    "hadn",
    "has",
    "hasn",
    "have",
    "haven",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "however",
    "i",
    "if",
    "in",
    "into",
    "is",
    "isn",
    "it",
    "its",
    "itself",
    "just",
    "ll",
    "m",
    "may",
    "me",
    "might",
    "more",
    "most",
    "much",
    "must",
    "mustn",
    "my",
    "myself",
    "neither",
    "never",
    "no",
    "nor",
    "not",
    "now",
    "o",
    "of",
    "off",
    "often",
    "on",
    "once",
    "only",
    "onto",
    "or",
    "other",
    "others",
    "otherwise",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "per",
    "perhaps",
    "quite",
    "rather",
    "re",
    "s",
    "said",
    "same",
    "say",
    "says",
    "shall",
    "shan",
    "she",
    "should",
    "shouldn",
    "since",
    "so",
    "some",
    "something",
    "still",
    "such",
    "t",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "therefore",
    "these",
    "they",
    "this",
    "those",
    "though",
    "through",
    "thus",
    "to",
    "too",
    "toward",
    "towards",
    "under",
    "until",
    "up",
    "upon",
    "us",
    "ve",
    "very",
    "via",
    "was",
    "wasn",
    "we",
    "were",
    "weren",
    "what",
    "whatever",
    "when",
    "whenever",
    "where",
    "whereas",
    "wherever",
    "whether",
    "which",
    "while",
    "who",
    "whoever",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "within",
    "without",
    "would",
    "wouldn",
    "y",
    "yet",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// Whether `word` (lowercase) is in [`STOP_WORDS`].
pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// Words with dense ids `0..len()` and how often each occurred.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Vocab {
    words: Vec<String>,
    counts: Vec<u64>,
    index: HashMap<String, u32>,
}

impl Vocab {
    /// An empty vocabulary; grow it with [`Vocab::add`].
    pub fn new() -> Vocab {
        Vocab::default()
    }

    /// Counts `tokens`, keeps the words seen at least `min_count` times and numbers them by
    /// decreasing count (ties broken by the word itself, so the ids are reproducible).
    pub fn build<I, S>(tokens: I, min_count: u64) -> Vocab
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut counted = Vocab::new();
        for token in tokens {
            counted.add(token.as_ref());
        }
        counted.sorted_by_count(min_count)
    }

    /// Adds one occurrence of `word`, giving it the next id if it is new; returns its id.
    ///
    /// # Panics
    /// When the vocabulary already holds `u32::MAX` words.
    pub fn add(&mut self, word: &str) -> u32 {
        self.add_count(word, 1)
    }

    /// Adds `count` occurrences of `word` (which gets the next id if it is new); returns its id.
    ///
    /// # Panics
    /// When the vocabulary already holds `u32::MAX` words.
    pub fn add_count(&mut self, word: &str, count: u64) -> u32 {
        if let Some(&id) = self.index.get(word) {
            self.counts[id as usize] += count;
            return id;
        }
        let id = u32::try_from(self.words.len()).expect("vocabulary larger than u32 ids allow");
        self.words.push(word.to_owned());
        self.counts.push(count);
        self.index.insert(word.to_owned(), id);
        id
    }

    /// A new vocabulary with the words seen at least `min_count` times, ids by decreasing count
    /// (ties by word).
    pub fn sorted_by_count(&self, min_count: u64) -> Vocab {
        let mut kept: Vec<u32> = (0..self.words.len() as u32)
            .filter(|&id| self.counts[id as usize] >= min_count)
            .collect();
        kept.sort_by(|&a, &b| {
            let (a, b) = (a as usize, b as usize);
            self.counts[b]
                .cmp(&self.counts[a])
                .then_with(|| self.words[a].cmp(&self.words[b]))
        });
        let mut out = Vocab::new();
        for id in kept {
            out.add_count(&self.words[id as usize], self.counts[id as usize]);
        }
        out
    }

    /// Id of `word`, if it is in the vocabulary.
    pub fn id(&self, word: &str) -> Option<u32> {
        self.index.get(word).copied()
    }

    /// The word with id `id`.
    ///
    /// # Panics
    /// When `id >= len()`.
    pub fn word(&self, id: u32) -> &str {
        &self.words[id as usize]
    }

    /// Occurrences of the word with id `id`.
    ///
    /// # Panics
    /// When `id >= len()`.
    pub fn count(&self, id: u32) -> u64 {
        self.counts[id as usize]
    }

    /// Words in id order.
    pub fn words(&self) -> &[String] {
        &self.words
    }

    /// Counts in id order.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Sum of all counts.
    pub fn total_count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Number of words; ids run `0..len()`.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether the vocabulary has no words.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Ids of the `tokens` that are in the vocabulary, in order; unknown tokens are skipped.
    pub fn encode<'a, I, S>(&'a self, tokens: I) -> impl Iterator<Item = u32> + 'a
    where
        I: IntoIterator<Item = S> + 'a,
        S: AsRef<str>,
    {
        tokens.into_iter().filter_map(move |t| self.id(t.as_ref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenize_splits_on_any_whitespace_and_lowercases() {
        let tokens: Vec<_> = tokenize("  The\tQUICK brown\r\nfox  ÉCOLE ").collect();
        assert_eq!(tokens, ["the", "quick", "brown", "fox", "école"]);
        assert_eq!(tokenize(" \t\n").count(), 0);
    }

    #[test]
    fn tokenize_borrows_lowercase_tokens() {
        let tokens: Vec<_> = tokenize("already lower And Mixed").collect();
        assert!(matches!(tokens[0], Cow::Borrowed("already")));
        assert!(matches!(tokens[1], Cow::Borrowed("lower")));
        assert!(matches!(tokens[2], Cow::Owned(ref s) if s == "and"));
    }

    #[test]
    fn stop_word_table_is_sorted_unique_and_lowercase() {
        assert!(
            STOP_WORDS.windows(2).all(|w| w[0] < w[1]),
            "STOP_WORDS must stay sorted"
        );
        assert!(STOP_WORDS
            .iter()
            .all(|w| !w.is_empty() && w.to_lowercase() == *w));
        assert!((150..=250).contains(&STOP_WORDS.len()));
    }

    #[test]
    fn stop_words_are_recognized_and_content_words_are_not() {
        for w in STOP_WORDS {
            assert!(is_stop_word(w), "{w}");
        }
        for w in ["the", "and", "of", "yourselves", "a", "don", "t"] {
            assert!(is_stop_word(w), "{w}");
        }
        for w in ["oil", "price", "bank", "stock", "The", "", "zzz", "aa"] {
            assert!(!is_stop_word(w), "{w}");
        }
    }

    #[test]
    fn content_tokens_drop_stop_words_after_lowercasing() {
        let kept: Vec<_> = content_tokens("The Bank of England said it WOULD cut rates").collect();
        assert_eq!(kept, ["bank", "england", "cut", "rates"]);
    }

    #[test]
    fn vocab_add_assigns_dense_ids_and_counts() {
        let mut v = Vocab::new();
        assert!(v.is_empty());
        assert_eq!(v.add("b"), 0);
        assert_eq!(v.add("a"), 1);
        assert_eq!(v.add("b"), 0);
        assert_eq!(v.add_count("c", 5), 2);
        assert_eq!(v.len(), 3);
        assert_eq!(v.id("b"), Some(0));
        assert_eq!(v.id("zz"), None);
        assert_eq!(v.word(1), "a");
        assert_eq!(v.count(0), 2);
        assert_eq!(v.counts(), &[2, 1, 5]);
        assert_eq!(v.total_count(), 8);
    }

    #[test]
    fn vocab_build_sorts_by_count_breaks_ties_by_word_and_applies_min_count() {
        let text = "c a b a c c d e e b a c";
        // counts: c 4, a 3, b 2, e 2, d 1
        let v = Vocab::build(tokenize(text), 2);
        assert_eq!(v.words(), &["c", "a", "b", "e"]);
        assert_eq!(v.counts(), &[4, 3, 2, 2]);
        assert_eq!(v.id("d"), None);
        for (id, w) in v.words().iter().enumerate() {
            assert_eq!(v.id(w), Some(id as u32));
        }
        let all = Vocab::build(tokenize(text), 0);
        assert_eq!(all.len(), 5);
        assert_eq!(all.word(4), "d");
        assert!(Vocab::build(tokenize(text), 100).is_empty());
    }

    #[test]
    fn vocab_encode_skips_unknown_tokens() {
        let v = Vocab::build(["x", "y", "x"], 1);
        let ids: Vec<u32> = v.encode(["y", "q", "x", "y"]).collect();
        assert_eq!(ids, [1, 0, 1]);
    }
}
