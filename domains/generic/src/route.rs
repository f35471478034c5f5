//! Routing by declared hints: which registered agents a query is for, without a model, in any
//! language. Every agent declares keywords and example requests (`RoutingHints`); the router
//! scores each agent against the query and keeps those that match.
//!
//! The rules, in order of strength:
//!
//! - **Keywords** match case-insensitively. A keyword with Hangul, Kana or Han characters
//!   matches anywhere in the query (those scripts attach particles to words or use no spaces:
//!   `날씨` is in `날씨는`); any other keyword matches at the start of a word (`rent` matches
//!   `rental` but not `current`). Each keyword found adds [`KEYWORD_SCORE`].
//! - **Examples** match by shared words, more weakly: an example counts when at least two of its
//!   words (all of them, when it has one) and at least half of them are in the query; it adds
//!   up to [`EXAMPLE_SCORE_MAX`] (the share of its words found), the best example of an agent
//!   only. Two words are the same when they are equal or one begins with the other and the
//!   shorter has at least four letters, or two Hangul/Han/Kana characters (`날씨` = `날씨는`).
//!   Words that say nothing about a topic (`what`, `the`, `please`, `알려줘`, `어때` ...) and
//!   Latin words under three letters are not counted.
//! - **Purposes** are not matched: they are prose for people and models, and their common
//!   words would route a query to agents that merely mention them.
//!
//! When any agent matches by a keyword, agents that match only by an example are dropped: a
//! declared keyword is what an agent's author said the agent is for. At most
//! [`ROUTE_AGENTS_MAX`] agents are kept, the best scores first; they come back in the order the
//! query names them (the position of each agent's first hit), then best score, then name.

use chronicle_engine::agents::AgentInfo;

/// Agents one query may be routed to: past this a query is not asking for something specific.
pub const ROUTE_AGENTS_MAX: usize = 8;
/// What one keyword found in the query adds to an agent's score.
pub const KEYWORD_SCORE: f64 = 1.0;
/// What an example adds when all its words are in the query: half a keyword, because sharing
/// words with an example is weaker evidence than naming a declared keyword.
pub const EXAMPLE_SCORE_MAX: f64 = 0.5;
/// Words an example must share with the query (fewer when it has fewer), and their share.
const EXAMPLE_WORDS_MIN: usize = 2;
const EXAMPLE_SHARE_MIN: f64 = 0.5;
/// Letters the shorter of two Latin words needs before a prefix makes them the same word
/// (`forecast` = `forecasts`, but `in` ≠ `india`); two for Hangul, Kana and Han.
const PREFIX_CHARS_MIN_LATIN: usize = 4;
const PREFIX_CHARS_MIN_CJK: usize = 2;
/// Latin words shorter than this are not counted in examples (`in`, `of`, `to`).
const WORD_CHARS_MIN_LATIN: usize = 3;
/// Words of requests that say nothing about their topic, in English and Korean.
const FUNCTION_WORDS: [&str; 44] = [
    "the",
    "and",
    "for",
    "with",
    "what",
    "whats",
    "how",
    "who",
    "where",
    "when",
    "which",
    "why",
    "are",
    "was",
    "were",
    "will",
    "would",
    "can",
    "could",
    "should",
    "does",
    "did",
    "has",
    "have",
    "you",
    "your",
    "please",
    "tell",
    "give",
    "show",
    "about",
    "this",
    "that",
    "there",
    "from",
    "알려줘",
    "알려주세요",
    "어때",
    "어때요",
    "해줘",
    "해주세요",
    "뭐야",
    "좀",
    "그리고",
];

/// How a hint matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HitKind {
    Keyword,
    Example,
}

/// One hint of an agent found in the query.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    pub kind: HitKind,
    /// The keyword or the example, as the agent declared it.
    pub hint: String,
    /// Where in the query it was found, in characters.
    pub position: usize,
}

/// An agent the query is routed to, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Match {
    pub agent: String,
    /// The team the agent declares.
    pub team: String,
    pub score: f64,
    /// Keywords in the order the agent declares them, then the best example.
    pub hits: Vec<Hit>,
}

impl Match {
    /// True when a keyword matched, not only an example.
    pub fn by_keyword(&self) -> bool {
        self.hits.iter().any(|h| h.kind == HitKind::Keyword)
    }

    /// Where the agent's first hit stands in the query, in characters.
    pub fn position(&self) -> usize {
        self.hits.iter().map(|h| h.position).min().unwrap_or(0)
    }

    /// The hints that matched, as declared.
    pub fn hints(&self) -> Vec<&str> {
        self.hits.iter().map(|h| h.hint.as_str()).collect()
    }

    /// `keyword "weather", example "Will it rain?" (score 1.25)`.
    pub fn describe(&self) -> String {
        let hits: Vec<String> = self
            .hits
            .iter()
            .map(|h| match h.kind {
                HitKind::Keyword => format!("keyword {:?}", h.hint),
                HitKind::Example => format!("example {:?}", h.hint),
            })
            .collect();
        format!("{} (score {:.2})", hits.join(", "), self.score)
    }
}

/// The agents `query` is routed to, in plan order (see the module's rules). Empty when no
/// agent's hints match.
pub fn route<'a>(query: &str, agents: impl IntoIterator<Item = &'a AgentInfo>) -> Vec<Match> {
    let query = Query::new(query);
    let mut matches: Vec<Match> = agents
        .into_iter()
        .filter_map(|info| score(info, &query))
        .collect();
    if matches.iter().any(Match::by_keyword) {
        matches.retain(Match::by_keyword);
    }
    matches.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.agent.cmp(&b.agent)));
    matches.truncate(ROUTE_AGENTS_MAX);
    matches.sort_by(|a, b| {
        a.position()
            .cmp(&b.position())
            .then(b.score.total_cmp(&a.score))
            .then(a.agent.cmp(&b.agent))
    });
    matches
}

/// The query lower-cased, and its words with their character positions.
struct Query {
    lower: String,
    words: Vec<(usize, String)>,
}

impl Query {
    fn new(text: &str) -> Self {
        let lower = text.to_lowercase();
        let words = words(&lower);
        Query { lower, words }
    }

    /// The character position of the keyword's first match, if any.
    fn find_keyword(&self, keyword: &str) -> Option<usize> {
        let keyword = keyword.trim().to_lowercase();
        if keyword.is_empty() {
            return None;
        }
        let lower = self.lower.as_str();
        let byte = if keyword.chars().any(is_cjk) {
            lower.find(&keyword)
        } else {
            lower.match_indices(&keyword).map(|(i, _)| i).find(|&i| {
                lower[..i]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !c.is_alphanumeric())
            })
        }?;
        Some(lower[..byte].chars().count())
    }

    /// The share of the example's counted words found in the query, and where the first one
    /// stands, when the example counts (see the module's rules).
    fn example_share(&self, example: &str) -> Option<(f64, usize)> {
        let mut counted: Vec<String> = Vec::new();
        for (_, word) in words(&example.to_lowercase()) {
            if counts(&word) && !counted.contains(&word) {
                counted.push(word);
            }
        }
        let mut found = 0usize;
        let mut first: Option<usize> = None;
        for word in &counted {
            let at = self
                .words
                .iter()
                .find(|(_, q)| same_word(word, q))
                .map(|(p, _)| *p);
            if let Some(p) = at {
                found += 1;
                first = Some(first.map_or(p, |f| f.min(p)));
            }
        }
        let share = found as f64 / counted.len().max(1) as f64;
        if found >= EXAMPLE_WORDS_MIN.min(counted.len()) && share >= EXAMPLE_SHARE_MIN {
            first.map(|p| (share, p))
        } else {
            None
        }
    }
}

/// The agent's match, or `None` when none of its hints are in the query.
fn score(info: &AgentInfo, query: &Query) -> Option<Match> {
    let mut hits: Vec<Hit> = Vec::new();
    for keyword in &info.hints.keywords {
        if hits.iter().any(|h| &h.hint == keyword) {
            continue;
        }
        if let Some(position) = query.find_keyword(keyword) {
            hits.push(Hit {
                kind: HitKind::Keyword,
                hint: keyword.clone(),
                position,
            });
        }
    }
    let mut score = hits.len() as f64 * KEYWORD_SCORE;
    // The best example; the first of equally good ones, as declared.
    let mut best: Option<(f64, usize, &String)> = None;
    for example in &info.hints.examples {
        if let Some((share, position)) = query.example_share(example)
            && best.is_none_or(|(b, _, _)| share > b)
        {
            best = Some((share, position, example));
        }
    }
    if let Some((share, position, example)) = best {
        score += share * EXAMPLE_SCORE_MAX;
        hits.push(Hit {
            kind: HitKind::Example,
            hint: example.clone(),
            position,
        });
    }
    (!hits.is_empty()).then(|| Match {
        agent: info.name.clone(),
        team: info.team.clone(),
        score,
        hits,
    })
}

/// Hangul, Kana and Han: scripts whose words take particles or are not separated by spaces.
fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{1100}'..='\u{11FF}'     // Hangul Jamo
        | '\u{3040}'..='\u{30FF}'   // Hiragana, Katakana
        | '\u{3130}'..='\u{318F}'   // Hangul compatibility Jamo
        | '\u{3400}'..='\u{4DBF}'   // Han extension A
        | '\u{4E00}'..='\u{9FFF}'   // Han
        | '\u{AC00}'..='\u{D7A3}'   // Hangul syllables
        | '\u{F900}'..='\u{FAFF}'   // Han compatibility
        | '\u{20000}'..='\u{2FA1F}' // Han extensions B–F
    )
}

/// The runs of letters and digits of `text`, with their character positions.
fn words(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, c) in text.chars().enumerate() {
        if c.is_alphanumeric() {
            current.get_or_insert_with(|| (i, String::new())).1.push(c);
        } else if let Some(word) = current.take() {
            out.push(word);
        }
    }
    out.extend(current);
    out
}

/// Whether an example's word says something about its topic.
fn counts(word: &str) -> bool {
    let long_enough = word.chars().any(is_cjk) || word.chars().count() >= WORD_CHARS_MIN_LATIN;
    long_enough && !FUNCTION_WORDS.contains(&word)
}

/// Equal, or one begins with the other and the shorter is long enough to be a word of its own.
fn same_word(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (short, long) = if a.chars().count() <= b.chars().count() {
        (a, b)
    } else {
        (b, a)
    };
    let min = if short.chars().any(is_cjk) {
        PREFIX_CHARS_MIN_CJK
    } else {
        PREFIX_CHARS_MIN_LATIN
    };
    short.chars().count() >= min && long.starts_with(short)
}

#[cfg(test)]
mod tests {
    use chronicle_engine::agents::RoutingHints;

    use super::*;

    fn agent(name: &str, team: &str, keywords: &[&str], examples: &[&str]) -> AgentInfo {
        let own = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect();
        AgentInfo::new(name, team, "what it does").with_hints(RoutingHints {
            keywords: own(keywords),
            examples: own(examples),
        })
    }

    fn agents() -> Vec<AgentInfo> {
        vec![
            agent(
                "weather",
                "weather",
                &["weather", "forecast", "rain", "날씨", "기온", "일기예보"],
                &[
                    "Will it be sunny in Busan this weekend?",
                    "내일 부산 날씨 어때?",
                ],
            ),
            agent(
                "search",
                "search",
                &["search", "find", "검색", "찾아"],
                &["Look up recent articles about electric cars"],
            ),
            agent(
                "report",
                "report",
                &["report", "summary", "보고서", "요약"],
                &["Write a short memo on the findings"],
            ),
            agent("rent", "housing", &["rent", "월세"], &[]),
        ]
    }

    /// `(agent, hints)` of each match, in plan order.
    fn routed(query: &str) -> Vec<(String, Vec<String>)> {
        let agents = agents();
        route(query, &agents)
            .into_iter()
            .map(|m| {
                let hints = m.hints().into_iter().map(str::to_owned).collect();
                (m.agent, hints)
            })
            .collect()
    }

    fn names(query: &str) -> Vec<String> {
        routed(query).into_iter().map(|(a, _)| a).collect()
    }

    /// The routing table: query → the agents it reaches, in order.
    #[test]
    fn the_routing_table_in_english_and_korean() {
        let table: &[(&str, &[&str])] = &[
            ("What's the weather in Seoul tomorrow?", &["weather"]),
            ("내일 서울 날씨 어때?", &["weather"]),
            ("서울 날씨는 어때요", &["weather"]),
            ("WEATHER FORECAST for Paris", &["weather"]),
            ("Is it raining in Busan?", &["weather"]),
            ("Search the news and write a report", &["search", "report"]),
            (
                "Write a report after you search the news",
                &["report", "search"],
            ),
            (
                "최신 뉴스를 검색해서 보고서로 요약해줘",
                &["search", "report"],
            ),
            ("내일 날씨 찾아줘", &["weather", "search"]),
            ("How much is the rental deposit?", &["rent"]),
            ("What is the current price?", &[]),
            ("Is it sunny in Busan this weekend?", &["weather"]),
            ("이번 주말 부산 날씨", &["weather"]),
            ("Hello there", &[]),
            ("", &[]),
        ];
        for (query, want) in table {
            assert_eq!(names(query), *want, "{query}");
        }
    }

    #[test]
    fn keywords_win_over_examples_and_say_which_hint_matched() {
        // The weather example shares "Busan" and "weekend" with the query, but the search
        // agent's keyword is stronger: example-only matches are dropped.
        assert_eq!(
            routed("find events in Busan this weekend"),
            [("search".to_owned(), vec!["find".to_owned()])]
        );
        let agents = agents();
        let m = route("Will it rain in Busan this weekend?", &agents);
        assert_eq!(m.len(), 1);
        assert_eq!(
            m[0].describe(),
            "keyword \"rain\", example \"Will it be sunny in Busan this weekend?\" (score 1.33)"
        );
        assert!(m[0].by_keyword());
        assert_eq!(m[0].position(), 8);
        // An example alone routes when no keyword does; its score stays under a keyword's.
        let m = route("sunny weekend in Busan?", &agents);
        assert_eq!(m.len(), 1);
        assert!(!m[0].by_keyword());
        assert!(m[0].score <= EXAMPLE_SCORE_MAX, "{}", m[0].score);
    }

    #[test]
    fn latin_keywords_match_at_word_starts_and_hangul_anywhere() {
        assert_eq!(names("rents are high"), ["rent"]);
        assert_eq!(names("the current rate"), Vec::<String>::new());
        assert_eq!(names("부산월세"), ["rent"]);
        assert_eq!(names("preforecast"), Vec::<String>::new());
    }

    #[test]
    fn function_words_and_short_words_do_not_route() {
        // Shares "what", "the", "in" with nothing counted: no example match.
        let weather = agent("w", "w", &[], &["What is the weather in Busan?"]);
        assert!(route("What is the price in Seoul?", [&weather]).is_empty());
        assert_eq!(route("Busan weather today", [&weather]).len(), 1);
    }

    #[test]
    fn at_most_the_best_agents_are_kept() {
        let many: Vec<AgentInfo> = (0..ROUTE_AGENTS_MAX + 3)
            .map(|i| {
                let kws: Vec<&str> = if i % 2 == 0 {
                    vec!["go", "now"]
                } else {
                    vec!["go"]
                };
                agent(&format!("a{i:02}"), "t", &kws, &[])
            })
            .collect();
        let m = route("go now", &many);
        assert_eq!(m.len(), ROUTE_AGENTS_MAX);
        // The six two-keyword agents are all kept.
        assert_eq!(m.iter().filter(|m| m.score == 2.0).count(), 6);
    }

    #[test]
    fn words_and_same_words() {
        assert_eq!(
            words("what's 30평대, ok?"),
            [
                (0, "what".into()),
                (5, "s".into()),
                (7, "30평대".into()),
                (13, "ok".into())
            ]
        );
        assert!(same_word("날씨", "날씨는"));
        assert!(same_word("forecast", "forecasts"));
        assert!(!same_word("in", "india"));
        assert!(!same_word("부", "부산"));
    }
}
