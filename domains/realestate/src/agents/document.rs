//! `document_team` (seed 001's document team): drafts a 주택임대차계약서 or a 부동산
//! 매매계약서 from a template, fills its placeholders from the query, the intent and the input,
//! and reviews the draft (missing fields, 전세가율, term, the 5% cap).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::analysis::LEGAL_CAP_PCT;
use super::data::{
    DATASET, DealType, Listing, PropertyType, SQUARE_METRES_PER_PYEONG, pct, round1,
};
use super::filters::{Filters, input_object};
use super::{Agent, AgentContext, AgentError, AgentInfo, AgentOutput, declared};
use crate::query::{self, Date, Lang, Subject, format_won};

/// The usual 계약금 (down payment): 10% of the deposit or price.
const DOWN_PAYMENT_PCT: u64 = 10;
/// 주택임대차보호법 제4조: a shorter term is treated as two years.
const LEASE_TERM_MONTHS_MIN: u32 = 24;
/// 전세가율 at which a deposit is at real risk of not coming back (깡통전세), and the level
/// worth a warning.
const JEONSE_RATIO_HIGH_PCT: f64 = 80.0;
const JEONSE_RATIO_WARN_PCT: f64 = 70.0;
/// A sale this far above the district average deserves a second look.
const SALE_PRICE_WARN_PCT: f64 = 130.0;
/// Characters of a free-text input field that a draft takes.
const FIELD_CHARS_MAX: usize = 500;

const LANDLORD: &[&str] = &["임대인", "집주인", "landlord", "lessor"];
const TENANT: &[&str] = &["임차인", "세입자", "tenant", "lessee"];
const SELLER: &[&str] = &["매도인", "매도자", "seller", "vendor"];
const BUYER: &[&str] = &["매수인", "매수자", "buyer", "purchaser"];

/// The two documents the team drafts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DocType {
    Lease,
    Sale,
}

impl DocType {
    fn as_str(self) -> &'static str {
        match self {
            DocType::Lease => "lease_contract",
            DocType::Sale => "sales_contract",
        }
    }
}

struct Template {
    id: &'static str,
    name: &'static str,
    name_en: &'static str,
    content: &'static str,
    /// `(placeholder, label, required)`, in the order the form asks for them.
    fields: &'static [(&'static str, &'static str, bool)],
}

const LEASE: Template = Template {
    id: "lease_contract_v1",
    name: "주택임대차계약서",
    name_en: "Residential Lease Agreement",
    content: "\
임대인 {{landlord_name}}과(와) 임차인 {{tenant_name}}은(는) 아래 주택에 관하여 다음과 같이 임대차계약을 체결한다.

## 1. 부동산의 표시

- 소재지: {{property_address}}
- 주택 유형: {{property_type}}
- 면적: {{area}}

## 2. 계약 내용

**제1조 (보증금과 차임)** 보증금은 {{deposit}}, 차임(월세)은 {{monthly_rent}}로 한다. 계약금 {{down_payment}}은(는) 계약 시 지급하고, 잔금 {{balance}}은(는) {{contract_start}}에 지급한다.

**제2조 (임대차기간)** 임대인은 {{contract_start}}까지 주택을 임차인에게 인도하며, 임대차기간은 인도일부터 {{contract_end}}까지 {{lease_term}}으로 한다.

**제3조 (용도변경 및 전대)** 임차인은 임대인의 동의 없이 주택의 구조·용도를 변경하거나 전대·임차권 양도를 할 수 없다.

**제4조 (계약의 해제)** 임차인이 잔금을 지급하기 전까지 임대인은 계약금의 배액을 상환하고, 임차인은 계약금을 포기하고 이 계약을 해제할 수 있다 (민법 제565조).

**제5조 (차임 등의 증감)** 보증금과 차임의 증액은 주택임대차보호법 제7조에 따라 약정한 금액의 20분의 1(5%)을 초과할 수 없으며, 계약 또는 증액 후 1년 이내에는 청구할 수 없다.

**제6조 (계약갱신요구)** 임차인은 주택임대차보호법 제6조의3에 따라 임대차기간이 끝나기 6개월 전부터 2개월 전까지 1회에 한하여 계약갱신을 요구할 수 있다.

**제7조 (대항력과 우선변제)** 임차인은 주택의 인도와 전입신고로 대항력을, 확정일자로 우선변제권을 취득한다 (주택임대차보호법 제3조, 제3조의2).

**제8조 (보증금의 반환)** 임대차가 끝나면 임대인은 보증금을 임차인에게 반환하고, 임차인은 주택을 원상으로 회복하여 반환한다.

**제9조 (임대차 신고)** 보증금 6천만원 또는 월 차임 30만원을 초과하는 계약은 계약일부터 30일 이내에 신고한다 (부동산 거래신고 등에 관한 법률 제6조의2).

## 3. 특약사항

{{special_terms}}

계약일: {{contract_date}}

- 임대인: {{landlord_name}} (서명 또는 인)
- 임차인: {{tenant_name}} (서명 또는 인)
",
    fields: &[
        ("landlord_name", "임대인 성명", true),
        ("tenant_name", "임차인 성명", true),
        ("property_address", "소재지", true),
        ("property_type", "주택 유형", false),
        ("area", "면적", false),
        ("deposit", "보증금", true),
        ("monthly_rent", "차임(월세)", false),
        ("down_payment", "계약금", false),
        ("balance", "잔금", false),
        ("contract_start", "임대차 시작일(인도일)", true),
        ("contract_end", "임대차 종료일", false),
        ("lease_term", "임대차기간", false),
        ("special_terms", "특약사항", false),
        ("contract_date", "계약일", false),
    ],
};

const SALE: Template = Template {
    id: "sales_contract_v1",
    name: "부동산 매매계약서",
    name_en: "Real Estate Sales Contract",
    content: "\
매도인 {{seller_name}}과(와) 매수인 {{buyer_name}}은(는) 아래 부동산에 관하여 다음과 같이 매매계약을 체결한다.

## 1. 부동산의 표시

- 소재지: {{property_address}}
- 주택 유형: {{property_type}}
- 면적: {{area}}

## 2. 계약 내용

**제1조 (매매대금)** 매매대금은 {{sale_price}}으로 한다. 계약금 {{down_payment}}은(는) 계약 시 지급하고, 잔금 {{balance}}은(는) {{balance_date}}에 지급한다.

**제2조 (소유권 이전)** 매도인은 잔금 수령과 동시에 소유권이전등기에 필요한 모든 서류를 매수인에게 교부하고 부동산을 인도한다.

**제3조 (제한물권 등의 소멸)** 매도인은 잔금 지급일까지 저당권 등 소유권 행사를 제한하는 권리와 조세·공과금 등의 미납금을 말소·정산한다.

**제4조 (계약의 해제)** 매수인이 중도금(중도금이 없으면 잔금)을 지급하기 전까지 매도인은 계약금의 배액을 상환하고, 매수인은 계약금을 포기하고 이 계약을 해제할 수 있다 (민법 제565조).

**제5조 (거래 신고)** 거래당사자는 계약일부터 30일 이내에 실제 거래가격을 관할 시·군·구청에 신고한다 (부동산 거래신고 등에 관한 법률 제3조).

## 3. 특약사항

{{special_terms}}

계약일: {{contract_date}}

- 매도인: {{seller_name}} (서명 또는 인)
- 매수인: {{buyer_name}} (서명 또는 인)
",
    fields: &[
        ("seller_name", "매도인 성명", true),
        ("buyer_name", "매수인 성명", true),
        ("property_address", "소재지", true),
        ("property_type", "주택 유형", false),
        ("area", "면적", false),
        ("sale_price", "매매대금", true),
        ("down_payment", "계약금", false),
        ("balance", "잔금", false),
        ("balance_date", "잔금일", true),
        ("special_terms", "특약사항", false),
        ("contract_date", "계약일", false),
    ],
};

const SALE_TERMS: &[&str] = &[
    "매매계약",
    "매매 계약",
    "매도",
    "매수",
    "sale contract",
    "sales contract",
    "sale agreement",
    "purchase agreement",
    "purchase contract",
    "buy",
    "sell",
];

#[derive(Debug, Default)]
pub struct DocumentTeam;

#[async_trait::async_trait]
impl Agent for DocumentTeam {
    fn info(&self) -> &AgentInfo {
        declared("document_team")
    }

    async fn run(&self, ctx: &AgentContext, input: Value) -> Result<AgentOutput, AgentError> {
        let input = input_object(&input)?;
        let f = Filters::resolve(ctx, &input)?;
        let lang = Lang::of(&ctx.query);
        let doc = doc_type(ctx, &input, &f)?;
        let draft = Draft::build(ctx, &input, &f, doc)?;
        let mut result = draft.to_json(ctx, lang);
        // The draft goes to the session's workspace through the tool host: under HITL `tools`
        // a human approves (or edits, or rejects) the write first.
        let file_path = format!("/workspace/documents/{}_{}.md", ctx.todo_id, doc.as_str());
        let args = json!({"file_path": file_path, "content": result["final_document"]});
        result["saved_document"] = match ctx.tools.call("write_file", args).await {
            Ok(out) => json!({"file_path": out["file_path"], "bytes": out["bytes"]}),
            Err(e) => json!({"file_path": null, "error": e.to_string()}),
        };
        Ok(AgentOutput { result })
    }
}

fn doc_type(
    ctx: &AgentContext,
    input: &Map<String, Value>,
    f: &Filters,
) -> Result<DocType, AgentError> {
    match input.get("document_type") {
        None | Some(Value::Null) => {}
        Some(v) => {
            return match v.as_str() {
                Some("lease_contract") => Ok(DocType::Lease),
                Some("sales_contract") => Ok(DocType::Sale),
                _ => Err(AgentError::fatal(format!(
                    "input field `document_type` must be \"lease_contract\" or \"sales_contract\", got {v}"
                ))),
            };
        }
    }
    let lower = ctx.query.to_lowercase();
    let sale = f.deal_type == Some(DealType::Sale) || query::contains_any(&lower, SALE_TERMS);
    Ok(if sale { DocType::Sale } else { DocType::Lease })
}

/// A filled template.
struct Draft {
    doc: DocType,
    template: &'static Template,
    /// Placeholder → value; absent when nothing said what to fill in.
    values: BTreeMap<&'static str, String>,
    /// Raw numbers the review needs.
    deposit: Option<u64>,
    price: Option<u64>,
    term_months: Option<u32>,
    region: Option<&'static str>,
    property_type: Option<PropertyType>,
    /// The query asked for a raise above the cap (a lease drafted in that situation).
    over_cap_change: Option<(u64, u64)>,
}

impl Draft {
    fn build(
        ctx: &AgentContext,
        input: &Map<String, Value>,
        f: &Filters,
        doc: DocType,
    ) -> Result<Self, AgentError> {
        let q = ctx.query.as_str();
        let template = match doc {
            DocType::Lease => &LEASE,
            DocType::Sale => &SALE,
        };
        let mut values: BTreeMap<&'static str, String> = BTreeMap::new();

        // Parties.
        let (first, second) = match doc {
            DocType::Lease => (("landlord_name", LANDLORD), ("tenant_name", TENANT)),
            DocType::Sale => (("seller_name", SELLER), ("buyer_name", BUYER)),
        };
        for (key, roles) in [first, second] {
            if let Some(name) = query::party_name(q, roles) {
                values.insert(key, name);
            }
        }

        // The home: a listing named in the query gives address and size, else the place.
        let listing: Option<&Listing> = DATASET
            .listings
            .iter()
            .filter(|l| q.contains(l.name.as_str()))
            .max_by_key(|l| (l.name.len(), std::cmp::Reverse(&l.id)));
        let region = listing.map(|l| l.region.as_str()).or(f.region());
        let property_type = listing.map(|l| l.property_type).or(f.property_type);
        if let Some(l) = listing {
            values.insert(
                "property_address",
                format!("{} {} {}", l.region, l.dong, l.name),
            );
        } else if let Some(p) = f.places.first() {
            let address = match (p.dong, p.station) {
                (Some(d), _) => format!("{} {d}", p.region),
                (None, Some(s)) => format!("{} ({s} 인근)", p.region),
                (None, None) => p.region.to_owned(),
            };
            values.insert("property_address", address);
        }
        if let Some(t) = property_type {
            values.insert("property_type", t.ko().to_owned());
        }
        let size = f
            .size_range
            .and_then(|r| match (r.min, r.max) {
                (Some(a), Some(b)) if b == a + 1 => Some(a),
                _ => None,
            })
            .or(listing.map(|l| l.size_pyeong));
        if let Some(s) = size {
            let m2 = round1(f64::from(s) * SQUARE_METRES_PER_PYEONG);
            values.insert("area", format!("{s}평 (약 {m2}㎡)"));
        }

        // Money. Each amount belongs to the word before it (`보증금 5000만원에 월세 100만원`).
        let change = query::detect_change_request(q);
        let amounts = query::amount_subjects(q);
        let (mut deposit, mut rent, mut price) = (None, None, None);
        match doc {
            DocType::Lease => {
                // When the query is about a raise, the contract is for the new amount.
                let (mut deposits, mut rents, mut other) = (Vec::new(), Vec::new(), Vec::new());
                for (a, s) in &amounts {
                    match s {
                        Some(Subject::Deposit) => deposits.push(a.won),
                        Some(Subject::MonthlyRent) => rents.push(a.won),
                        None => other.push(a.won),
                    }
                }
                if let Some(c) = &change {
                    match c.subject {
                        Subject::Deposit => deposits = vec![c.new.won],
                        Subject::MonthlyRent => rents = vec![c.new.won],
                    }
                }
                deposit = deposits.first().copied().or_else(|| other.first().copied());
                rent = rents.first().copied();
            }
            DocType::Sale => price = amounts.first().map(|(a, _)| a.won),
        }
        deposit = money_param(input, "deposit")?.or(deposit);
        rent = money_param(input, "monthly_rent")?.or(rent);
        price = money_param(input, "sale_price")?.or(price);
        let principal = match doc {
            DocType::Lease => deposit,
            DocType::Sale => price,
        };
        if let Some(p) = principal {
            let down = money_param(input, "down_payment")?.unwrap_or(p * DOWN_PAYMENT_PCT / 100);
            values.insert(
                if doc == DocType::Lease {
                    "deposit"
                } else {
                    "sale_price"
                },
                money_text(p),
            );
            values.insert("down_payment", money_text(down.min(p)));
            values.insert("balance", money_text(p - down.min(p)));
        }
        if doc == DocType::Lease {
            let is_monthly = rent.is_some() || f.deal_type == Some(DealType::Monthly);
            values.insert(
                "monthly_rent",
                match rent {
                    Some(r) => format!("월 {} (매월 말일 지급)", money_text(r)),
                    None if is_monthly => String::new(),
                    None => "없음 (전세)".to_owned(),
                },
            );
            if values.get("monthly_rent").is_some_and(String::is_empty) {
                values.remove("monthly_rent");
            }
        }

        // Dates and term.
        let dates = query::parse_dates(q);
        let start = match input.get("contract_start") {
            None | Some(Value::Null) => dates.first().copied(),
            Some(v) => Some(v.as_str().and_then(Date::parse_iso).ok_or_else(|| {
                AgentError::fatal(format!(
                    "input field `contract_start` must be a date like \"2025-11-01\", got {v}"
                ))
            })?),
        };
        let term_months = match doc {
            DocType::Lease => Some(query::parse_term_months(q).unwrap_or(LEASE_TERM_MONTHS_MIN)),
            DocType::Sale => None,
        };
        if let Some(start) = start {
            match (doc, term_months) {
                (DocType::Lease, Some(months)) => {
                    values.insert("contract_start", start.ko());
                    let end = dates
                        .get(1)
                        .copied()
                        .filter(|d| *d > start)
                        .unwrap_or_else(|| start.term_end(months));
                    values.insert("contract_end", end.ko());
                }
                _ => {
                    values.insert("balance_date", start.ko());
                }
            }
        }
        if let Some(m) = term_months {
            values.insert(
                "lease_term",
                if m % 12 == 0 {
                    format!("{}년", m / 12)
                } else {
                    format!("{m}개월")
                },
            );
        }
        values.insert("contract_date", created_date(ctx).ko());

        // Free-text fields a human (or a plan) may set directly.
        for (key, _, _) in template.fields {
            if let Some(v) = input.get(*key) {
                if matches!(
                    *key,
                    "deposit" | "monthly_rent" | "sale_price" | "down_payment" | "contract_start"
                ) {
                    continue;
                }
                let text = match v {
                    Value::String(s) => s.chars().take(FIELD_CHARS_MAX).collect(),
                    Value::Array(items) if *key == "special_terms" => items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|s| s.chars().take(FIELD_CHARS_MAX).collect::<String>())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    Value::Null => continue,
                    other => {
                        return Err(AgentError::fatal(format!(
                            "input field `{key}` must be a string, got {}",
                            chronicle_engine::agents::json_type(other)
                        )));
                    }
                };
                values.insert(key, text);
            }
        }

        let over_cap_change = change
            .filter(|c| c.new.won > c.old.won + c.old.won * LEGAL_CAP_PCT / 100)
            .map(|c| (c.old.won, c.new.won));
        let mut draft = Draft {
            doc,
            template,
            values,
            deposit,
            price,
            term_months,
            region,
            property_type,
            over_cap_change,
        };
        if !draft.values.contains_key("special_terms") {
            let terms = draft.default_special_terms();
            draft.values.insert("special_terms", terms);
        }
        Ok(draft)
    }

    /// Clauses that protect the weaker side, which standard forms leave to 특약.
    fn default_special_terms(&self) -> String {
        let mut terms: Vec<String> = match self.doc {
            DocType::Lease => vec![
                "임대인은 잔금 지급일 다음 날까지 저당권 등 담보권을 설정하지 않는다.".into(),
                "임대인은 계약 체결 시 국세·지방세 완납증명서를 임차인에게 제시한다.".into(),
                "임차인은 잔금 지급일에 전입신고와 확정일자를 받으며, 임대인은 이에 협조한다.".into(),
                "임차인의 전세보증금반환보증 가입이 거절되면 임차인은 계약을 해제할 수 있고 임대인은 계약금을 반환한다.".into(),
            ],
            DocType::Sale => vec![
                "매도인은 잔금일까지 등기부상 근저당 등 제한물권을 말소한다.".into(),
                "잔금일 기준으로 관리비·공과금을 정산한다.".into(),
                "계약 후 발견된 중대한 하자(누수 등)는 매도인이 잔금일로부터 6개월간 책임진다.".into(),
            ],
        };
        if let Some((old, _)) = self.over_cap_change {
            terms.push(format!(
                "보증금·차임의 증액은 주택임대차보호법 제7조의 범위({LEGAL_CAP_PCT}%, 최대 {}) 안에서만 한다.",
                money_text(old + old * LEGAL_CAP_PCT / 100)
            ));
        }
        terms
            .iter()
            .enumerate()
            .map(|(i, t)| format!("{}. {t}", i + 1))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn missing(&self) -> Vec<&'static str> {
        self.template
            .fields
            .iter()
            .filter(|(key, _, required)| *required && !self.values.contains_key(key))
            .map(|(_, label, _)| *label)
            .collect()
    }

    /// The filled template. A missing required field is marked so it cannot be overlooked; a
    /// missing optional one is left as a blank to fill in by hand, as on a paper form.
    fn content(&self) -> String {
        let mut out = self.template.content.to_owned();
        for (key, label, required) in self.template.fields {
            let value = match self.values.get(key) {
                Some(v) => v.clone(),
                None if *required => format!("[미기재: {label}]"),
                None => "________".to_owned(),
            };
            out = out.replace(&format!("{{{{{key}}}}}"), &value);
        }
        out
    }

    fn review(&self, lang: Lang) -> (Value, &'static str) {
        let mut risks: Vec<Value> = Vec::new();
        let mut recommendations: Vec<String> = Vec::new();
        let missing = self.missing();
        if !missing.is_empty() {
            risks.push(json!({
                "type": lang.pick("필수 항목 미기재", "missing required fields"),
                "severity": "medium",
                "description": match lang {
                    Lang::Ko => format!("{} 항목이 비어 있습니다", missing.join(", ")),
                    Lang::En => format!("Not filled in: {}", missing.join(", ")),
                },
            }));
            recommendations.push(match lang {
                Lang::Ko => format!("서명 전에 {}을(를) 채우세요", missing.join(", ")),
                Lang::En => format!("Fill in {} before signing", missing.join(", ")),
            });
        }
        let market = self
            .region
            .and_then(|r| DATASET.series(r, self.property_type.unwrap_or(PropertyType::Apartment)));
        let mut compliance: Map<String, Value> = Map::new();
        match self.doc {
            DocType::Lease => {
                let term_ok = self.term_months.is_none_or(|m| m >= LEASE_TERM_MONTHS_MIN);
                if !term_ok {
                    risks.push(json!({
                        "type": lang.pick("임대차기간", "lease term"),
                        "severity": "medium",
                        "description": lang.pick(
                            "2년 미만으로 정했지만 임차인은 2년을 주장할 수 있습니다 (주택임대차보호법 제4조)",
                            "The term is under two years, but the tenant may still claim two years (Art. 4)",
                        ),
                        "clause": "제2조",
                    }));
                }
                if let (Some(d), Some(s)) = (self.deposit, market) {
                    let ratio = pct(d, s.latest().avg_price);
                    let severity = if ratio >= JEONSE_RATIO_HIGH_PCT {
                        Some("high")
                    } else if ratio >= JEONSE_RATIO_WARN_PCT {
                        Some("medium")
                    } else {
                        None
                    };
                    if let Some(severity) = severity {
                        risks.push(json!({
                            "type": lang.pick("깡통전세 위험", "deposit at risk (high jeonse ratio)"),
                            "severity": severity,
                            "description": match lang {
                                Lang::Ko => format!("보증금이 지역 평균 매매가의 {ratio:.1}%입니다. 집값이 내리면 보증금을 돌려받지 못할 수 있습니다"),
                                Lang::En => format!("The deposit is {ratio:.1}% of the district's average sale price; if prices fall it may not come back"),
                            },
                            "clause": "제1조",
                        }));
                        recommendations.push(lang.pick(
                            "전세보증금반환보증(HUG·HF·SGI) 가입이 가능한지 계약 전에 확인하세요",
                            "Check before signing that deposit return insurance (HUG, HF, SGI) will accept the contract",
                        ).to_owned());
                    }
                    compliance.insert(
                        "jeonse_ratio_below_70_percent".into(),
                        (ratio < JEONSE_RATIO_WARN_PCT).into(),
                    );
                }
                if let Some((old, new)) = self.over_cap_change {
                    risks.push(json!({
                        "type": lang.pick("법정 상한 초과 증액", "increase over the legal cap"),
                        "severity": "high",
                        "description": match lang {
                            Lang::Ko => format!("{} → {} 증액은 {}%를 넘습니다 (주택임대차보호법 제7조)", format_won(old, lang), format_won(new, lang), LEGAL_CAP_PCT),
                            Lang::En => format!("{} → {} exceeds the {}% cap (Art. 7)", format_won(old, lang), format_won(new, lang), LEGAL_CAP_PCT),
                        },
                        "clause": "제1조",
                    }));
                }
                compliance.insert("lease_term_at_least_2_years".into(), term_ok.into());
                compliance.insert(
                    "increase_within_5_percent".into(),
                    self.over_cap_change.is_none().into(),
                );
                compliance.insert("opposability_clause".into(), true.into());
                compliance.insert("renewal_right_clause".into(), true.into());
                compliance.insert("lease_report_clause".into(), true.into());
                recommendations.extend(
                    [
                        lang.pick("계약 직전과 잔금일에 등기부등본(소유자·근저당)을 다시 확인하세요", "Check the land registry (owner, mortgages) again just before signing and on the balance day"),
                        lang.pick("잔금일에 전입신고와 확정일자를 받아 대항력과 우선변제권을 확보하세요", "Register your move-in and get a fixed date on the balance day to secure opposability and priority"),
                        lang.pick("임대인의 국세·지방세 체납 여부를 확인하세요", "Check the landlord for unpaid national and local taxes"),
                    ]
                    .map(str::to_owned),
                );
            }
            DocType::Sale => {
                if let (Some(p), Some(s)) = (self.price, market) {
                    let ratio = pct(p, s.latest().avg_price);
                    if ratio >= SALE_PRICE_WARN_PCT {
                        risks.push(json!({
                            "type": lang.pick("시세 대비 고가", "price above market"),
                            "severity": "medium",
                            "description": match lang {
                                Lang::Ko => format!("매매대금이 지역 평균의 {ratio:.1}%입니다. 실거래가를 비교해 보세요"),
                                Lang::En => format!("The price is {ratio:.1}% of the district average; compare recent deals"),
                            },
                            "clause": "제1조",
                        }));
                    }
                    compliance.insert(
                        "price_within_market_range".into(),
                        (ratio < SALE_PRICE_WARN_PCT).into(),
                    );
                }
                compliance.insert("down_payment_clause".into(), true.into());
                compliance.insert("transaction_report_clause".into(), true.into());
                recommendations.extend(
                    [
                        lang.pick("계약 전 등기부등본·건축물대장·토지이용계획을 확인하세요", "Check the land registry, building register and land-use plan before signing"),
                        lang.pick("계약일부터 30일 이내에 실거래 신고를 하세요", "Report the deal within 30 days of the contract"),
                        lang.pick("잔금일에 소유권이전등기 서류를 받고 바로 등기를 신청하세요", "Take the transfer documents on the balance day and register the transfer at once"),
                    ]
                    .map(str::to_owned),
                );
            }
        }
        compliance.insert("required_fields_filled".into(), missing.is_empty().into());
        let level = if risks.iter().any(|r| r["severity"] == "high") {
            "high"
        } else if risks.iter().any(|r| r["severity"] == "medium") {
            "medium"
        } else {
            "low"
        };
        let review = json!({
            "reviewed": true,
            "risk_level": level,
            "risks": risks,
            "recommendations": recommendations,
            "compliance_check": compliance,
        });
        (review, level)
    }

    fn to_json(&self, ctx: &AgentContext, lang: Lang) -> Value {
        let t = self.template;
        let title = match lang {
            Lang::Ko => t.name.to_owned(),
            Lang::En => format!("{} ({})", t.name, t.name_en),
        };
        let content = self.content();
        let missing = self.missing();
        let (review, level) = self.review(lang);
        let review_needed = level != "low" || !missing.is_empty();
        let fields: Map<String, Value> = t
            .fields
            .iter()
            .map(|(key, _, _)| {
                (
                    (*key).to_owned(),
                    self.values.get(key).map_or(Value::Null, |v| json!(v)),
                )
            })
            .collect();

        let mut md = format!("# {title}\n\n");
        if !missing.is_empty() {
            md.push_str(&format!("> 초안: 미기재 항목 ({})\n\n", missing.join(", ")));
        }
        md.push_str(&content);
        md.push_str(&format!("\n## {}\n\n", lang.pick("검토 결과", "Review")));
        md.push_str(&format!(
            "- {}: {level}\n",
            lang.pick("위험도", "Risk level")
        ));
        for r in review["risks"].as_array().into_iter().flatten() {
            md.push_str(&format!(
                "- [{}] {}: {}\n",
                r["severity"].as_str().unwrap_or_default(),
                r["type"].as_str().unwrap_or_default(),
                r["description"].as_str().unwrap_or_default()
            ));
        }
        for r in review["recommendations"].as_array().into_iter().flatten() {
            md.push_str(&format!("- {}\n", r.as_str().unwrap_or_default()));
        }

        json!({
            "team_name": "document",
            "status": "completed",
            "document_type": self.doc.as_str(),
            "template": {
                "template_id": t.id,
                "template_name": t.name,
                "template_content": t.content,
                "placeholders": t.fields.iter().map(|(k, _, _)| *k).collect::<Vec<_>>(),
            },
            "document_content": {
                "title": title,
                "content": content,
                "metadata": {
                    "template_id": t.id,
                    "language": "ko",
                    "request_language": lang.pick("ko", "en"),
                    "fields": fields,
                    "missing_fields": missing,
                    "region": self.region,
                    "dataset_as_of": DATASET.meta.as_of,
                },
                "created_at": created_at(ctx),
            },
            "review_needed": review_needed,
            "review_result": review,
            "final_document": md,
        })
    }
}

/// `6억 5,000만원 (금 650,000,000원)`: contracts spell amounts both ways so neither can be
/// misread.
fn money_text(won: u64) -> String {
    format!(
        "{} (금 {}원)",
        format_won(won, Lang::Ko),
        query::group_thousands(won)
    )
}

fn money_param(input: &Map<String, Value>, key: &str) -> Result<Option<u64>, AgentError> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let won = match v {
                Value::Number(n) => n.as_u64(),
                Value::String(s) => query::parse_amount(s),
                _ => None,
            };
            won.map(Some).ok_or_else(|| {
                AgentError::fatal(format!(
                    "input field `{key}` must be an amount in won (a number or text like \"3억\"), got {v}"
                ))
            })
        }
    }
}

/// When the draft was made. Agents read no clock (a replay must produce the same document), so
/// this is the time inside a v7 run id, else the dataset's date.
fn created_at(ctx: &AgentContext) -> String {
    match ctx.run_id.0.get_timestamp() {
        Some(ts) => {
            let (secs, _) = ts.to_unix();
            let secs = i64::try_from(secs).unwrap_or_default();
            let date = Date::from_unix_days(secs.div_euclid(86_400));
            let s = secs.rem_euclid(86_400);
            format!(
                "{}T{:02}:{:02}:{:02}Z",
                date.iso(),
                s / 3600,
                s / 60 % 60,
                s % 60
            )
        }
        None => format!("{}T00:00:00+09:00", DATASET.meta.as_of),
    }
}

fn created_date(ctx: &AgentContext) -> Date {
    Date::parse_iso(&created_at(ctx)).unwrap_or(Date {
        year: 2025,
        month: 9,
        day: 30,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronicle_schemas::RunId;

    fn ctx(query: &str) -> AgentContext {
        AgentContext {
            query: query.into(),
            ..AgentContext::default()
        }
    }

    #[tokio::test]
    async fn korean_lease_draft_fills_the_template() {
        let c = ctx(
            "마포구 공덕동 아파트 전세 계약서 작성해줘. 임대인 홍길동, 임차인 김철수, 보증금 6억 5천만원, 2025년 11월 1일부터 2년",
        );
        let out = DocumentTeam.run(&c, Value::Null).await.unwrap().result;
        assert_eq!(out["document_type"], "lease_contract");
        assert_eq!(out["template"]["template_id"], "lease_contract_v1");
        assert_eq!(out["template"]["template_name"], "주택임대차계약서");
        let fields = &out["document_content"]["metadata"]["fields"];
        assert_eq!(fields["landlord_name"], "홍길동");
        assert_eq!(fields["tenant_name"], "김철수");
        assert_eq!(fields["property_address"], "서울특별시 마포구 공덕동");
        assert_eq!(fields["deposit"], "6억 5,000만원 (금 650,000,000원)");
        assert_eq!(fields["down_payment"], "6,500만원 (금 65,000,000원)");
        assert_eq!(fields["contract_start"], "2025년 11월 1일");
        assert_eq!(fields["contract_end"], "2027년 10월 31일");
        assert_eq!(fields["monthly_rent"], "없음 (전세)");
        let content = out["document_content"]["content"].as_str().unwrap();
        assert!(
            !content.contains("{{") && !content.contains("미기재"),
            "{content}"
        );
        assert_eq!(
            out["document_content"]["created_at"],
            "2025-09-30T00:00:00+09:00"
        );
        assert_eq!(out["review_result"]["risk_level"], "low");
        assert_eq!(out["review_needed"], false);
        assert_eq!(
            out["review_result"]["compliance_check"]["required_fields_filled"],
            true
        );
        assert!(
            out["final_document"]
                .as_str()
                .unwrap()
                .starts_with("# 주택임대차계약서\n")
        );
        insta::assert_json_snapshot!("document_team_korean_lease", out);
    }

    #[tokio::test]
    async fn bare_request_lists_what_is_missing() {
        let out = DocumentTeam
            .run(&ctx("전세 계약서 작성해줘"), Value::Null)
            .await
            .unwrap()
            .result;
        assert_eq!(out["document_type"], "lease_contract");
        let missing = out["document_content"]["metadata"]["missing_fields"]
            .as_array()
            .unwrap();
        assert_eq!(missing.len(), 5, "{missing:?}");
        assert_eq!(out["review_needed"], true);
        assert_eq!(out["review_result"]["risk_level"], "medium");
        assert!(
            out["document_content"]["content"]
                .as_str()
                .unwrap()
                .contains("[미기재: 임대인 성명]")
        );
    }

    #[tokio::test]
    async fn english_lease_draft() {
        let c = ctx(
            "Draft a lease contract for an apartment in Mapo: landlord Kim Minsu, tenant John Smith, deposit 500 million won, monthly rent 1 million won, starting 2025-11-01 for 1 year",
        );
        let out = DocumentTeam.run(&c, Value::Null).await.unwrap().result;
        assert_eq!(out["document_type"], "lease_contract");
        assert_eq!(
            out["document_content"]["title"],
            "주택임대차계약서 (Residential Lease Agreement)"
        );
        let fields = &out["document_content"]["metadata"]["fields"];
        assert_eq!(fields["landlord_name"], "Kim Minsu");
        assert_eq!(fields["tenant_name"], "John Smith");
        assert_eq!(fields["deposit"], "5억원 (금 500,000,000원)");
        assert_eq!(
            fields["monthly_rent"],
            "월 100만원 (금 1,000,000원) (매월 말일 지급)"
        );
        assert_eq!(fields["lease_term"], "1년");
        assert_eq!(fields["contract_end"], "2026년 10월 31일");
        let review = &out["review_result"];
        assert_eq!(
            review["compliance_check"]["lease_term_at_least_2_years"],
            false
        );
        assert_eq!(review["risks"][0]["type"], "lease term");
        assert!(
            review["recommendations"][0]
                .as_str()
                .unwrap()
                .starts_with("Check the land registry")
        );
        assert_eq!(
            out["document_content"]["metadata"]["request_language"],
            "en"
        );
    }

    #[tokio::test]
    async fn sales_contract_and_risks() {
        let c = ctx(
            "래미안 강남아파트 매매계약서 작성: 매도인 이영희, 매수인 박민수, 매매대금 20억, 잔금일 2025-12-20",
        );
        let out = DocumentTeam.run(&c, Value::Null).await.unwrap().result;
        assert_eq!(out["document_type"], "sales_contract");
        let fields = &out["document_content"]["metadata"]["fields"];
        assert_eq!(
            fields["property_address"],
            "서울특별시 강남구 역삼동 래미안 강남아파트"
        );
        assert_eq!(fields["area"], "32평 (약 105.8㎡)");
        assert_eq!(fields["sale_price"], "20억원 (금 2,000,000,000원)");
        assert_eq!(fields["balance_date"], "2025년 12월 20일");
        assert_eq!(out["review_result"]["risks"][0]["type"], "시세 대비 고가");
        // A deposit near the sale price is a 깡통전세 risk; a raise over the cap is flagged.
        let c = ctx("송파 빌라 전세 계약서, 보증금을 3억에서 4억으로 올려달래");
        let out = DocumentTeam.run(&c, Value::Null).await.unwrap().result;
        let types: Vec<&str> = out["review_result"]["risks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["type"].as_str().unwrap())
            .collect();
        assert!(
            types.contains(&"깡통전세 위험") && types.contains(&"법정 상한 초과 증액"),
            "{types:?}"
        );
        assert_eq!(out["review_result"]["risk_level"], "high");
        assert_eq!(
            out["document_content"]["metadata"]["fields"]["deposit"],
            "4억원 (금 400,000,000원)"
        );
    }

    #[tokio::test]
    async fn input_overrides_and_errors() {
        let input = json!({
            "document_type": "lease_contract", "landlord_name": "최임대", "deposit": "2억",
            "contract_start": "2026-03-01", "special_terms": ["반려동물 허용"]
        });
        let out = DocumentTeam
            .run(&ctx("계약서"), input)
            .await
            .unwrap()
            .result;
        let fields = &out["document_content"]["metadata"]["fields"];
        assert_eq!(fields["landlord_name"], "최임대");
        assert_eq!(fields["deposit"], "2억원 (금 200,000,000원)");
        assert_eq!(fields["contract_end"], "2028년 2월 29일");
        assert_eq!(fields["special_terms"], "반려동물 허용");
        let err = DocumentTeam
            .run(&ctx("계약서"), json!({"document_type": "will"}))
            .await
            .unwrap_err();
        assert!(err.message.contains("`document_type`") && !err.retryable);
        let err = DocumentTeam
            .run(&ctx("계약서"), json!({"contract_start": "soon"}))
            .await
            .unwrap_err();
        assert!(err.message.contains("`contract_start`"));
        let err = DocumentTeam
            .run(&ctx("계약서"), json!({"tenant_name": 3}))
            .await
            .unwrap_err();
        assert_eq!(
            err.message,
            "input field `tenant_name` must be a string, got a number"
        );
    }

    #[test]
    fn created_at_comes_from_a_v7_run_id() {
        // 2025-10-01T12:34:56Z as a v7 timestamp (milliseconds in the top 48 bits).
        let ms: u128 = 1_759_322_096_000;
        let id = RunId::from_u128((ms << 80) | (0x7 << 76) | (0b10 << 62));
        let c = AgentContext {
            run_id: id,
            ..AgentContext::default()
        };
        assert_eq!(created_at(&c), "2025-10-01T12:34:56Z");
        assert_eq!(
            created_date(&c),
            Date {
                year: 2025,
                month: 10,
                day: 1
            }
        );
    }
}
