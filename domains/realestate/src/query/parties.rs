//! The names of the parties to a contract, written after their role (`임대인 홍길동`,
//! `tenant: John Smith`).

use super::terms::{find_all_terms, is_hangul, strip_prefix_ci};

/// Words after a role that are not names (`임대인 정보`, `임차인 서명`).
const NOT_NAMES: &[&str] = &[
    "정보",
    "성명",
    "이름",
    "서명",
    "본인",
    "미정",
    "없음",
    "주소",
    "연락처",
];

/// The name written after one of `roles`: `임대인 홍길동`, `임차인은 김철수`, `집주인: 박영희`,
/// `landlord Kim Minsu`, `tenant: John Smith`, `the buyer is Jane Doe`. Korean names are 2 to
/// 4 syllables; English names are up to four capitalised words.
pub(crate) fn party_name(text: &str, roles: &[&str]) -> Option<String> {
    // ASCII lower-casing keeps byte offsets, so positions found in it index `text` too.
    let lower = text.to_ascii_lowercase();
    for role in roles {
        for pos in find_all_terms(&lower, role) {
            let rest = &text[pos + role.len()..];
            let name = if role.is_ascii() {
                english_name(rest)
            } else {
                korean_name(rest)
            };
            if name.is_some() {
                return name;
            }
        }
    }
    None
}

fn korean_name(rest: &str) -> Option<String> {
    let mut rest = rest;
    for particle in ["은", "는", "이", "가", "측"] {
        if let Some(r) = rest.strip_prefix(particle) {
            rest = r;
            break;
        }
    }
    let rest = rest.trim_start_matches([' ', ':', '：', '=']);
    let mut token: String = rest.chars().take_while(|c| is_hangul(*c)).collect();
    for suffix in ["이고", "이며", "씨", "님", "와", "과"] {
        if token.chars().count() > 2
            && let Some(t) = token.strip_suffix(suffix)
        {
            token = t.to_owned();
            break;
        }
    }
    let len = token.chars().count();
    ((2..=4).contains(&len) && !NOT_NAMES.iter().any(|w| token.starts_with(w))).then_some(token)
}

fn english_name(rest: &str) -> Option<String> {
    let mut rest = rest.trim_start_matches([' ', ':', '=']);
    for lead in ["is ", "named ", "name is ", "will be "] {
        if let Some(r) = strip_prefix_ci(rest, lead) {
            rest = r.trim_start();
        }
    }
    let words: Vec<&str> = rest
        .split(' ')
        .map(|w| w.trim_end_matches([',', '.', ';', ')']))
        .take_while(|w| {
            w.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && w.chars()
                    .all(|c| c.is_ascii_alphabetic() || matches!(c, '.' | '\'' | '-'))
        })
        .take(4)
        .collect();
    // A comma or period ends the name even when the next word is capitalised.
    let mut out = Vec::new();
    for (w, raw) in words.iter().zip(rest.split(' ')) {
        out.push(*w);
        if raw.ends_with([',', '.', ';']) {
            break;
        }
    }
    (!out.is_empty()).then(|| out.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn party_names() {
        let landlord = ["임대인", "집주인", "landlord", "lessor"];
        let tenant = ["임차인", "세입자", "tenant", "lessee"];
        let q = "임대인 홍길동, 임차인은 김철수이고 보증금 3억";
        assert_eq!(party_name(q, &landlord).as_deref(), Some("홍길동"));
        assert_eq!(party_name(q, &tenant).as_deref(), Some("김철수"));
        assert_eq!(
            party_name("집주인: 박영희", &landlord).as_deref(),
            Some("박영희")
        );
        let q = "Draft a lease: landlord Kim Minsu, tenant John Smith. Deposit 500 million won";
        assert_eq!(party_name(q, &landlord).as_deref(), Some("Kim Minsu"));
        assert_eq!(party_name(q, &tenant).as_deref(), Some("John Smith"));
        assert_eq!(
            party_name("the tenant is Jane Doe", &tenant).as_deref(),
            Some("Jane Doe")
        );
        assert_eq!(party_name("임대인 정보는 모름", &landlord), None);
        assert_eq!(party_name("the landlord wants more", &landlord), None);
        assert_eq!(party_name("전세 계약서 작성해줘", &landlord), None);
    }
}
