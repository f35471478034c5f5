//! The text a person reads in a model's answer, while the answer streams. Planners ask for a
//! JSON object whose `answer` field is that text (the field the agent reply contract and every
//! final response call `answer`), so what goes to subscribers as the message is that field's
//! string, decoded as it arrives, and not the JSON around it. An answer that is not a JSON object
//! (plain text, after an optional ```` ``` ```` fence line) goes out as it comes.

/// The field whose string is the message.
const ANSWER_FIELD: &str = "answer";
/// Bytes of leading text looked at to tell a fence line from plain text.
const HEAD_BYTES_MAX: usize = 64;
/// Bytes of a top-level key kept (longer keys are not the answer's).
const KEY_BYTES_MAX: usize = 64;

/// Turns the pieces of a model's answer into the pieces of its `answer` text.
#[derive(Debug, Default)]
pub(crate) struct AnswerText {
    mode: Mode,
    /// Leading text not yet known to be a fence line or plain text.
    head: String,
    json: Json,
}

#[derive(Debug, Default, PartialEq)]
enum Mode {
    /// Nothing but whitespace (and fence lines) so far.
    #[default]
    Start,
    /// Inside a fence's first line (```` ```json ````).
    Fence,
    /// Not JSON: everything goes out.
    Plain,
    /// A JSON object, read until its `answer` string has ended.
    Json,
    /// The answer has been given out (or there is none): the rest is not the message.
    Done,
}

impl AnswerText {
    /// The next piece of the model's text; answers the next piece of the message (maybe empty).
    pub(crate) fn push(&mut self, piece: &str) -> String {
        let mut out = String::new();
        for (i, c) in piece.char_indices() {
            match self.mode {
                Mode::Start if c.is_whitespace() => {}
                Mode::Start if c == '{' => {
                    self.mode = Mode::Json;
                    self.json_char(c, &mut out);
                }
                Mode::Start if c == '`' => {
                    self.mode = Mode::Fence;
                    self.head.push(c);
                }
                Mode::Start => {
                    self.mode = Mode::Plain;
                    out.push_str(&piece[i..]);
                    return out;
                }
                Mode::Fence if c == '\n' => {
                    if self.head.starts_with("```") {
                        self.head.clear();
                        self.mode = Mode::Start;
                    } else {
                        self.turn_plain(&mut out, &piece[i..]);
                        return out;
                    }
                }
                // One or two backticks and something else: not a fence.
                Mode::Fence if self.head.len() < 3 && c != '`' => {
                    self.turn_plain(&mut out, &piece[i..]);
                    return out;
                }
                Mode::Fence => {
                    self.head.push(c);
                    if self.head.len() > HEAD_BYTES_MAX {
                        self.turn_plain(&mut out, &piece[i + c.len_utf8()..]);
                        return out;
                    }
                }
                Mode::Plain => {
                    out.push_str(&piece[i..]);
                    return out;
                }
                Mode::Json => self.json_char(c, &mut out),
                Mode::Done => return out,
            }
        }
        out
    }

    fn turn_plain(&mut self, out: &mut String, rest: &str) {
        self.mode = Mode::Plain;
        out.push_str(&std::mem::take(&mut self.head));
        out.push_str(rest);
    }

    fn json_char(&mut self, c: char, out: &mut String) {
        if self.json.char(c, out) {
            self.mode = Mode::Done;
        }
    }
}

/// Where the reader is inside the top-level object.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum Expect {
    #[default]
    Key,
    Colon,
    Value,
    Comma,
}

/// What a string being read is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Role {
    Key,
    Answer,
    Skip,
}

#[derive(Debug, Default)]
enum Escape {
    #[default]
    None,
    Backslash,
    Unicode(String),
}

/// A JSON reader that only tracks what finding one top-level string field needs.
#[derive(Debug, Default)]
struct Json {
    /// Objects and arrays open.
    depth: u32,
    expect: Expect,
    string: Option<Role>,
    escape: Escape,
    /// A high surrogate waiting for its low half (`\ud83d\ude00`).
    high: Option<u32>,
    key: String,
}

impl Json {
    /// Reads one character; true when the answer has ended (or the object, without one).
    fn char(&mut self, c: char, out: &mut String) -> bool {
        if let Some(role) = self.string {
            return self.string_char(role, c, out);
        }
        match c {
            '"' => {
                self.string = Some(match (self.depth, self.expect) {
                    (1, Expect::Key) => {
                        self.key.clear();
                        Role::Key
                    }
                    (1, Expect::Value) if self.key == ANSWER_FIELD => Role::Answer,
                    _ => Role::Skip,
                });
            }
            '{' | '[' => {
                self.depth += 1;
                if self.depth == 1 {
                    self.expect = Expect::Key;
                }
            }
            '}' | ']' => {
                self.depth = self.depth.saturating_sub(1);
                match self.depth {
                    0 => return true,
                    1 => self.expect = Expect::Comma,
                    _ => {}
                }
            }
            ':' if self.depth == 1 && self.expect == Expect::Colon => self.expect = Expect::Value,
            ',' if self.depth == 1 => self.expect = Expect::Key,
            _ => {}
        }
        false
    }

    fn string_char(&mut self, role: Role, c: char, out: &mut String) -> bool {
        let decoded = match std::mem::take(&mut self.escape) {
            Escape::Backslash => match c {
                'u' => {
                    self.escape = Escape::Unicode(String::new());
                    return false;
                }
                'n' => Some('\n'),
                't' => Some('\t'),
                'r' => Some('\r'),
                'b' => Some('\u{8}'),
                'f' => Some('\u{c}'),
                other => Some(other),
            },
            Escape::Unicode(mut hex) => {
                hex.push(c);
                if hex.len() < 4 {
                    self.escape = Escape::Unicode(hex);
                    return false;
                }
                self.unicode(u32::from_str_radix(&hex, 16).ok())
            }
            Escape::None if c == '\\' => {
                self.escape = Escape::Backslash;
                return false;
            }
            Escape::None if c == '"' => {
                self.string = None;
                return match role {
                    Role::Key => {
                        self.expect = Expect::Colon;
                        false
                    }
                    Role::Answer => true,
                    Role::Skip => {
                        if self.depth == 1 {
                            self.expect = Expect::Comma;
                        }
                        false
                    }
                };
            }
            Escape::None => Some(c),
        };
        if let Some(d) = decoded {
            match role {
                Role::Answer => out.push(d),
                Role::Key if self.key.len() < KEY_BYTES_MAX => self.key.push(d),
                _ => {}
            }
        }
        false
    }

    /// The character of a `\uXXXX` escape, pairing surrogates; `None` while half a pair waits
    /// (or for an escape that encodes nothing).
    fn unicode(&mut self, code: Option<u32>) -> Option<char> {
        let code = code?;
        match (self.high.take(), code) {
            (_, 0xD800..=0xDBFF) => {
                self.high = Some(code);
                None
            }
            (Some(high), 0xDC00..=0xDFFF) => {
                char::from_u32(0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00))
            }
            (_, code) => char::from_u32(code),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` fed one piece of `size` characters at a time.
    fn streamed(text: &str, size: usize) -> String {
        let mut a = AnswerText::default();
        let chars: Vec<char> = text.chars().collect();
        chars
            .chunks(size)
            .map(|p| a.push(&p.iter().collect::<String>()))
            .collect()
    }

    #[test]
    fn the_answer_field_of_a_json_object_is_the_message_wherever_the_pieces_cut() {
        let cases = [
            (
                r#"{"answer": "Seoul: \"sunny\"\n18°C"}"#,
                "Seoul: \"sunny\"\n18°C",
            ),
            (
                "```json\n{\"insights\": [\"a\", {\"answer\": \"no\"}], \"answer\": \"강남 \\uc2dc\\uc138 😀 \\ud83d\\ude00\", \"sources\": []}\n```",
                "강남 시세 😀 😀",
            ),
            (
                r#"{"metadata": {"answer": "nested"}, "n": 3, "answer": "top"}"#,
                "top",
            ),
            (r#"{"listings": [], "insights": ["x"]}"#, ""),
            ("  plain text answer", "plain text answer"),
            ("`inline` code", "`inline` code"),
        ];
        for (text, message) in cases {
            for size in [1, 2, 3, 7, 1000] {
                assert_eq!(
                    streamed(text, size),
                    message,
                    "{text:?} in pieces of {size}"
                );
            }
        }
    }

    #[test]
    fn what_follows_the_answer_is_not_the_message() {
        let mut a = AnswerText::default();
        assert_eq!(a.push(r#"{"answer": "hi"#), "hi");
        assert_eq!(a.push(r#"!", "answer": "again"}"#), "!");
        assert_eq!(a.push("more"), "");
    }
}
