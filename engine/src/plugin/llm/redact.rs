//! Keeping the model's API key out of everything recorded. A server or a proxy may echo the key
//! back (a debugging header dump, an error page, a model told to repeat its input), and what a
//! model answers is recorded in events, forever. So every text that comes back from the model
//! is searched for the key in the forms it could take, and each match is replaced by
//! `<redacted>`:
//!
//! - any run of at least [`KEY_FRAGMENT_CHARS_MIN`] characters of the key (the whole key
//!   included), in any ASCII letter case;
//! - the same inside percent-encoding (`%2D`, or every byte encoded) and inside JSON string
//!   escapes (`\u002d`), which the text is also read through;
//! - the key's base64, standard and URL-safe, with or without padding, at each of the three
//!   alignments it can have inside a longer encoded text (a base64 character depends on the
//!   bytes around it, so only the characters that depend on the key's bytes alone are matched).
//!
//! Runs shorter than [`KEY_FRAGMENT_CHARS_MIN`] are not redacted: they say too little about the
//! key, and ordinary words would match them.

use std::collections::HashSet;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};

/// The shortest run of the key (or of an encoding of it) that is redacted. A key shorter than
/// this is matched whole.
pub const KEY_FRAGMENT_CHARS_MIN: usize = 8;

/// What a match is replaced with.
pub const REDACTED: &str = "<redacted>";

/// The key's detectable forms, as the set of their lower-cased windows of `window` bytes.
#[derive(Clone)]
pub(crate) struct Redactor {
    window: usize,
    windows: HashSet<Vec<u8>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl Redactor {
    /// `None` for an empty key (there is nothing to hide).
    pub(crate) fn new(key: &str) -> Option<Self> {
        let key = key.as_bytes();
        if key.is_empty() {
            return None;
        }
        let window = key.len().min(KEY_FRAGMENT_CHARS_MIN);
        let mut forms: Vec<Vec<u8>> = vec![key.to_vec()];
        for engine in [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD] {
            forms.push(engine.encode(key).into_bytes());
        }
        for shift in 1..=2 {
            forms.extend(base64_core(key, shift));
        }
        let mut windows = HashSet::new();
        for form in &forms {
            for w in form.windows(window) {
                windows.insert(w.to_ascii_lowercase());
            }
        }
        Some(Self { window, windows })
    }

    /// `text` with every form of the key replaced by [`REDACTED`].
    pub(crate) fn redact(&self, text: &str) -> String {
        match self.marks(text) {
            Some(marked) => replace_marked(text, &marked, 0..text.len(), false),
            None => text.to_owned(),
        }
    }

    /// Which bytes of `text` belong to a form of the key; `None` when none does.
    fn marks(&self, text: &str) -> Option<Vec<bool>> {
        let mut marked = vec![false; text.len()];
        let mut any = self.mark(&View::raw(text), &mut marked);
        if text.contains('%') {
            any |= self.mark(&View::percent_decoded(text), &mut marked);
        }
        if text.contains("\\u") {
            any |= self.mark(&View::json_unescaped(text), &mut marked);
        }
        any.then_some(marked)
    }

    /// Marks the source bytes of every window of `view` that is a window of a form of the key.
    fn mark(&self, view: &View, marked: &mut [bool]) -> bool {
        let mut any = false;
        if view.bytes.len() < self.window {
            return false;
        }
        let lower = view.bytes.to_ascii_lowercase();
        for (i, w) in lower.windows(self.window).enumerate() {
            if self.windows.contains(w) {
                let start = view.spans[i].0;
                let end = view.spans[i + self.window - 1].1;
                marked[start..end].iter_mut().for_each(|m| *m = true);
                any = true;
            }
        }
        any
    }
}

/// The most bytes of text one match can span: a window of [`KEY_FRAGMENT_CHARS_MIN`]
/// characters, each written as a six-byte `\uXXXX` escape.
const MATCH_SPAN_BYTES_MAX: usize = 6 * KEY_FRAGMENT_CHARS_MIN;

/// Redaction of a text that arrives in pieces (a streamed answer): what it gives out, joined, is
/// what [`Redactor::redact`] makes of the whole text, also when the key is split across pieces.
///
/// A piece is given out only once no later text can make it part of a match: the last
/// [`MATCH_SPAN_BYTES_MAX`] bytes are held back until more text (or the end) comes, and as many
/// bytes already given out are kept as the context a match may start in.
#[derive(Debug)]
pub(crate) struct StreamRedactor<'r> {
    redactor: Option<&'r Redactor>,
    /// The end of the text already given out (raw), at most twice the span of a match.
    context: String,
    /// Text not given out yet.
    pending: String,
}

impl<'r> StreamRedactor<'r> {
    /// Without a redactor (no key), text goes out as it comes.
    pub(crate) fn new(redactor: Option<&'r Redactor>) -> Self {
        Self {
            redactor,
            context: String::new(),
            pending: String::new(),
        }
    }

    /// Takes the next piece; answers what may go out now (often empty).
    pub(crate) fn push(&mut self, piece: &str) -> String {
        self.pending.push_str(piece);
        self.release(false)
    }

    /// The end of the text: everything held back, redacted.
    pub(crate) fn finish(&mut self) -> String {
        self.release(true)
    }

    fn release(&mut self, all: bool) -> String {
        let Some(redactor) = self.redactor else {
            return std::mem::take(&mut self.pending);
        };
        let start = self.context.len();
        let mut text = std::mem::take(&mut self.context);
        text.push_str(&self.pending);
        let mut end = if all {
            text.len()
        } else {
            text.len().saturating_sub(MATCH_SPAN_BYTES_MAX).max(start)
        };
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let end = end.max(start);
        let out = match redactor.marks(&text) {
            Some(marked) => {
                let continuing = start > 0 && marked[start - 1];
                replace_marked(&text, &marked, start..end, continuing)
            }
            None => text[start..end].to_owned(),
        };
        let mut keep = end.saturating_sub(2 * MATCH_SPAN_BYTES_MAX);
        while !text.is_char_boundary(keep) {
            keep += 1;
        }
        self.pending = text[end..].to_owned();
        text.truncate(end);
        self.context = text.split_off(keep);
        out
    }
}

/// The base64 characters of `key` that do not depend on the bytes around it, when `shift`
/// bytes (1 or 2) come before it in the encoded text; standard and URL-safe alphabets.
fn base64_core(key: &[u8], shift: usize) -> Vec<Vec<u8>> {
    let mut shifted = vec![0u8; shift];
    shifted.extend_from_slice(key);
    // Character i holds bits 6i..6i+6 of the input; the key's bits are 8·shift..8·(shift+len).
    let first = (8 * shift).div_ceil(6);
    let end = (8 * (shift + key.len())) / 6;
    [STANDARD_NO_PAD, URL_SAFE_NO_PAD]
        .into_iter()
        .filter_map(|engine| {
            let encoded = engine.encode(&shifted).into_bytes();
            encoded.get(first..end).map(<[u8]>::to_vec)
        })
        .collect()
}

/// A decoded reading of a text: each byte with the range of source bytes it came from.
struct View {
    bytes: Vec<u8>,
    spans: Vec<(usize, usize)>,
}

impl View {
    fn raw(text: &str) -> Self {
        Self {
            bytes: text.as_bytes().to_vec(),
            spans: (0..text.len()).map(|i| (i, i + 1)).collect(),
        }
    }

    /// `%XX` read as the byte it encodes.
    fn percent_decoded(text: &str) -> Self {
        Self::unescaped(text, |rest| {
            let hex = rest.strip_prefix(b"%")?.get(..2)?;
            let b = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
            Some(([b, 0, 0, 0], 1, 3))
        })
    }

    /// JSON's `\uXXXX` escapes read as the character they encode (a model's answer is often
    /// JSON, which a planner decodes before recording parts of it).
    fn json_unescaped(text: &str) -> Self {
        Self::unescaped(text, |rest| {
            let hex = rest.strip_prefix(b"\\u")?.get(..4)?;
            let c = char::from_u32(u32::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?)?;
            let mut buf = [0u8; 4];
            let len = c.encode_utf8(&mut buf).len();
            Some((buf, len, 6))
        })
    }

    /// `text` with every escape that `escape` recognises read as what it encodes. At each byte,
    /// `escape` gets the rest of the text and answers, for an escape starting there, its decoded
    /// bytes (the first `len` of four) and how many source bytes it takes.
    fn unescaped(text: &str, escape: impl Fn(&[u8]) -> Option<([u8; 4], usize, usize)>) -> Self {
        let src = text.as_bytes();
        let mut view = Self {
            bytes: Vec::with_capacity(src.len()),
            spans: Vec::with_capacity(src.len()),
        };
        let mut i = 0;
        while i < src.len() {
            let (bytes, len, taken) = escape(&src[i..]).unwrap_or(([src[i], 0, 0, 0], 1, 1));
            view.bytes.extend_from_slice(&bytes[..len]);
            view.spans.extend(std::iter::repeat_n((i, i + taken), len));
            i += taken;
        }
        view
    }
}

/// The characters of `text` in `range` with each run of marked bytes (widened to whole
/// characters) replaced by [`REDACTED`]; `continuing` says a run already replaced goes on at the
/// start of the range (it is not replaced twice).
fn replace_marked(
    text: &str,
    marked: &[bool],
    range: std::ops::Range<usize>,
    continuing: bool,
) -> String {
    let mut out = String::with_capacity(range.len());
    let mut in_run = continuing;
    for (i, c) in text[range.clone()].char_indices() {
        let i = i + range.start;
        if marked[i..i + c.len_utf8()].contains(&true) {
            if !in_run {
                out.push_str(REDACTED);
                in_run = true;
            }
        } else {
            out.push(c);
            in_run = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-live-4Fq9ZtR2xW8mLp1B";

    fn redact(text: &str) -> String {
        Redactor::new(KEY).unwrap().redact(text)
    }

    #[test]
    fn the_key_and_its_runs_of_eight_or_more_characters_in_any_case() {
        assert_eq!(redact(&format!("Bearer {KEY}")), "Bearer <redacted>");
        assert_eq!(redact(&KEY.to_uppercase()), "<redacted>");
        assert_eq!(redact(&format!("x{}y", KEY.to_lowercase())), "x<redacted>y");
        // Eight characters of the key are enough; seven are not.
        let eight = &KEY[5..13];
        let seven = &KEY[5..12];
        assert_eq!(redact(&format!("a {eight} b")), "a <redacted> b");
        assert_eq!(redact(&format!("a {seven} b")), format!("a {seven} b"));
        // Two runs, each redacted, what lies between kept.
        assert_eq!(
            redact(&format!("{} and {}", &KEY[..9], &KEY[12..])),
            "<redacted> and <redacted>"
        );
        assert_eq!(redact("nothing to see"), "nothing to see");
    }

    #[test]
    fn percent_and_json_escaped_forms() {
        let every_byte: String = KEY.bytes().map(|b| format!("%{b:02X}")).collect();
        assert_eq!(redact(&format!("q={every_byte}&x=1")), "q=<redacted>&x=1");
        let dashes = KEY.replace('-', "%2d");
        assert_eq!(redact(&format!("?key={dashes}")), "?key=<redacted>");
        let escaped: String = KEY
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        assert_eq!(
            redact(&format!("{{\"k\": \"{escaped}\"}}")),
            "{\"k\": \"<redacted>\"}"
        );
        // Seven percent-encoded characters stay.
        let seven: String = KEY[..7].bytes().map(|b| format!("%{b:02X}")).collect();
        assert_eq!(redact(&seven), seven);
    }

    #[test]
    fn base64_forms_at_every_alignment() {
        for engine in [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD] {
            let whole = engine.encode(KEY);
            assert_eq!(redact(&format!("[{whole}]")), "[<redacted>]", "{whole}");
            for prefix in ["", "a", "ab", "Authorization: Bearer "] {
                let embedded = engine.encode(format!("{prefix}{KEY} and more"));
                let out = redact(&embedded);
                assert!(out.contains(REDACTED), "{prefix:?}: {embedded} -> {out}");
                // Nothing detectable is left, and the prefix's own characters are kept.
                assert_eq!(redact(&out), out);
                assert!(
                    out.starts_with(&embedded[..(8 * prefix.len()) / 6]),
                    "{out}"
                );
            }
        }
    }

    #[test]
    fn a_streamed_text_gives_out_what_the_whole_text_redacts_to_wherever_it_is_cut() {
        let r = Redactor::new(KEY).unwrap();
        let escaped: String = KEY
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        let percent: String = KEY.bytes().map(|b| format!("%{b:02X}")).collect();
        let text = format!(
            "키 {KEY} and {} then {escaped} or {percent} and {} · {} end {}",
            &KEY[..9],
            STANDARD.encode(KEY),
            KEY.to_uppercase(),
            &KEY[3..10]
        );
        let whole = r.redact(&text);
        assert!(!whole.contains(&KEY[..8]), "{whole}");
        let chars: Vec<char> = text.chars().collect();
        for size in [1, 2, 3, 5, 7, 8, 13, 47, 48, 49, 1000] {
            let mut stream = StreamRedactor::new(Some(&r));
            let mut out = String::new();
            for piece in chars.chunks(size) {
                out.push_str(&stream.push(&piece.iter().collect::<String>()));
                // Nothing given out is ever taken back: the key never leaves, not even in part.
                assert!(whole.starts_with(&out), "{size}: {out}");
            }
            out.push_str(&stream.finish());
            assert_eq!(out, whole, "pieces of {size} characters");
        }
        // A long text goes out while it streams, not only at the end.
        let mut stream = StreamRedactor::new(Some(&r));
        let long = "word ".repeat(100);
        assert!(stream.push(&long).len() >= long.len() - MATCH_SPAN_BYTES_MAX);
        // Without a key the text goes out as it comes.
        let mut plain = StreamRedactor::new(None);
        assert_eq!(plain.push(KEY), KEY);
        assert_eq!(plain.finish(), "");
    }

    #[test]
    fn short_keys_multibyte_text_and_no_key() {
        assert!(Redactor::new("").is_none());
        let short = Redactor::new("abc12").unwrap();
        assert_eq!(short.redact("x ABC12 y abc1"), "x <redacted> y abc1");
        // A match next to multi-byte characters keeps them whole.
        assert_eq!(redact(&format!("키{KEY}값")), "키<redacted>값");
        let odd = Redactor::new("ключ-секрет-123").unwrap();
        assert_eq!(odd.redact("а ключ-секрет-123 б"), "а <redacted> б");
        assert_eq!(odd.redact("а кл б"), "а кл б");
    }
}
