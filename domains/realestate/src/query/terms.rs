//! Finding words in a query: one matching rule for every table of terms (places, types, deals,
//! intents, law and loan keywords), and the query's language.

/// The language of a query, which is the language of the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lang {
    Ko,
    En,
}

impl Lang {
    /// Korean as soon as the text holds one Hangul syllable or jamo (`ㅎㅎ`); an English query
    /// holds none.
    pub(crate) fn of(text: &str) -> Lang {
        if text.chars().any(|c| is_hangul(c) || is_jamo(c)) {
            Lang::Ko
        } else {
            Lang::En
        }
    }

    /// Picks the Korean or the English text.
    pub(crate) fn pick<'a>(self, ko: &'a str, en: &'a str) -> &'a str {
        match self {
            Self::Ko => ko,
            Self::En => en,
        }
    }

    pub(crate) fn code(self) -> &'static str {
        self.pick("ko", "en")
    }
}

pub(crate) fn is_hangul(c: char) -> bool {
    ('\u{AC00}'..='\u{D7A3}').contains(&c)
}

/// Hangul compatibility jamo (`ㅋ`, `ㅎ`), which only Korean typists write.
fn is_jamo(c: char) -> bool {
    ('\u{3131}'..='\u{318E}').contains(&c)
}

/// Endings an English term may carry and still match, so `listing` finds `listings`, `analyze`
/// finds `analyzed` and `rent` finds `rental`, while `villa` does not find `village` nor `apt`
/// `aptitude`.
const ENGLISH_SUFFIXES: &[&str] = &[
    "s", "es", "d", "ed", "ing", "ings", "al", "ly", "ment", "ments", "ation", "ations",
];

fn is_word_char(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_ascii_alphanumeric())
}

/// Whether an English term that matched at `start..end` of `text` is a word: it starts a word
/// and ends one, perhaps after one of `ENGLISH_SUFFIXES`.
fn is_english_word(text: &str, start: usize, end: usize) -> bool {
    if is_word_char(text[..start].chars().next_back()) {
        return false;
    }
    let rest = &text[end..];
    let word_len = rest
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(rest.len());
    word_len == 0 || ENGLISH_SUFFIXES.contains(&&rest[..word_len])
}

/// Byte positions of `term` in `text`; both are expected lower-cased. A term of ASCII only is
/// English and matches as a word (see `ENGLISH_SUFFIXES`); any other term is Korean and matches
/// anywhere, because Korean attaches particles to words (`전세금을`).
pub(crate) fn find_all_terms(text: &str, term: &str) -> Vec<usize> {
    if term.is_empty() {
        return Vec::new();
    }
    text.match_indices(term)
        .map(|(i, _)| i)
        .filter(|&i| is_term_at(text, term, i))
        .collect()
}

/// Whether `term`, found in `text` at byte `start`, counts there (see [`find_all_terms`]).
pub(crate) fn is_term_at(text: &str, term: &str, start: usize) -> bool {
    !term.is_ascii() || is_english_word(text, start, start + term.len())
}

pub(crate) fn find_term(text: &str, term: &str) -> Option<usize> {
    find_all_terms(text, term).into_iter().next()
}

pub(crate) fn contains_term(text: &str, term: &str) -> bool {
    find_term(text, term).is_some()
}

pub(crate) fn contains_any(text: &str, terms: &[&str]) -> bool {
    terms.iter().any(|t| contains_term(text, t))
}

/// The value of the term of `terms` mentioned first in `lower` (the longer term at the same
/// place: `반전세` before `전세`).
pub(crate) fn first_mentioned<T: Copy>(lower: &str, terms: &[(&str, T)]) -> Option<T> {
    terms
        .iter()
        .filter_map(|&(term, v)| {
            find_term(lower, term).map(|pos| (pos, std::cmp::Reverse(term.len()), v))
        })
        .min_by_key(|&(pos, len, _)| (pos, len))
        .map(|(_, _, v)| v)
}

/// Whether `text` ends with `word` (ASCII case-insensitively), as a whole word when ASCII.
pub(crate) fn ends_with_word(text: &str, word: &str) -> bool {
    let Some(split) = text.len().checked_sub(word.len()) else {
        return false;
    };
    if !text.is_char_boundary(split) {
        return false;
    }
    let (head, tail) = text.split_at(split);
    tail.eq_ignore_ascii_case(word) && (!word.is_ascii() || !is_word_char(head.chars().next_back()))
}

/// `text` without the prefix `prefix`, compared ASCII case-insensitively.
pub(crate) fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_terms_match_words_and_their_endings() {
        assert!(contains_term("raise the rent", "raise"));
        assert!(!contains_term("praised", "raise"));
        assert!(contains_term("the latest listings", "listing"));
        assert!(contains_term("analyze the trends", "trend"));
        assert!(contains_term("rental apartments", "rent"));
        assert!(!contains_term("the current rent", "cur"));
        assert!(!contains_term("a village", "villa"));
        assert!(!contains_term("aptitude", "apt"));
        assert!(!contains_term("mapology", "mapo"));
        assert!(contains_term("mapo-gu", "mapo"));
        assert_eq!(find_all_terms("a apt b apt", "apt"), vec![2, 8]);
    }

    #[test]
    fn korean_terms_match_anywhere() {
        assert!(contains_term("전세금을", "전세"));
        assert_eq!(
            first_mentioned("반전세 매물", &[("전세", 1), ("반전세", 2)]),
            Some(2)
        );
    }

    #[test]
    fn language() {
        assert_eq!(Lang::of("강남 아파트"), Lang::Ko);
        assert_eq!(Lang::of("ㅋㅋ apartment"), Lang::Ko);
        assert_eq!(Lang::of("Gangnam apartment"), Lang::En);
        assert_eq!(Lang::Ko.code(), "ko");
    }
}
