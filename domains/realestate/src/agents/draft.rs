//! A contract drafted from a template: the placeholders filled from the query, the intent and
//! the input, then reviewed (missing fields, 전세가율, term, the 5% cap).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::data::{
    DATASET, DealType, Listing, PriceSeries, PropertyType, SQUARE_METRES_PER_PYEONG, pct, round1,
};
use super::document::{
    DocType, LEASE, SALE, Template, created_at, created_date, money_param, money_text,
};
use super::filters::Filters;
use super::increase::LEGAL_CAP_PCT;
use super::{AgentContext, AgentError};
use crate::query::{Date, Lang, Query, Subject, amount_subjects, format_won, party_name};

/// The usual 계약금 (down payment): 10% of the deposit or price.
const DOWN_PAYMENT_PCT: u64 = 10;
/// 주택임대차보호법 제4조: a shorter term is treated as two years.
pub(super) const LEASE_TERM_MONTHS_MIN: u32 = 24;
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

/// A filled template.
pub(super) struct Draft {
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

/// What the review found, as it accumulates.
#[derive(Default)]
struct Review {
    risks: Vec<Value>,
    recommendations: Vec<String>,
    compliance: Map<String, Value>,
}

impl Draft {
    pub(super) fn build(
        ctx: &AgentContext,
        input: &Map<String, Value>,
        f: &Filters,
        doc: DocType,
    ) -> Result<Self, AgentError> {
        let q = Query::parse(&ctx.query);
        let template = match doc {
            DocType::Lease => &LEASE,
            DocType::Sale => &SALE,
        };
        let over_cap_change = q
            .change
            .as_ref()
            .filter(|c| c.new.won > c.old.won + c.old.won * LEGAL_CAP_PCT / 100)
            .map(|c| (c.old.won, c.new.won));
        let mut draft = Draft {
            doc,
            template,
            values: BTreeMap::new(),
            deposit: None,
            price: None,
            term_months: None,
            region: None,
            property_type: None,
            over_cap_change,
        };
        draft.fill_parties(&ctx.query);
        draft.fill_home(&ctx.query, f);
        draft.fill_money(input, &ctx.query, &q, f)?;
        draft.fill_dates(ctx, input, &q)?;
        draft.fill_free_text(input)?;
        if !draft.values.contains_key("special_terms") {
            let terms = draft.default_special_terms();
            draft.values.insert("special_terms", terms);
        }
        Ok(draft)
    }

    /// `임대인 홍길동`, `tenant John Smith`.
    fn fill_parties(&mut self, query: &str) {
        let (first, second) = match self.doc {
            DocType::Lease => (("landlord_name", LANDLORD), ("tenant_name", TENANT)),
            DocType::Sale => (("seller_name", SELLER), ("buyer_name", BUYER)),
        };
        for (key, roles) in [first, second] {
            if let Some(name) = party_name(query, roles) {
                self.values.insert(key, name);
            }
        }
    }

    /// The home: a listing named in the query gives address and size, else the place.
    fn fill_home(&mut self, query: &str, f: &Filters) {
        let listing: Option<&Listing> = DATASET
            .listings
            .iter()
            .filter(|l| query.contains(l.name.as_str()))
            .max_by_key(|l| (l.name.len(), std::cmp::Reverse(&l.id)));
        self.region = listing.map(|l| l.region.as_str()).or(f.region());
        self.property_type = listing.map(|l| l.property_type).or(f.property_type);
        if let Some(l) = listing {
            let address = format!("{} {} {}", l.region, l.dong, l.name);
            self.values.insert("property_address", address);
        } else if let Some(p) = f.places.first() {
            let address = match (p.dong, p.station) {
                (Some(d), _) => format!("{} {d}", p.region),
                (None, Some(s)) => format!("{} ({s} 인근)", p.region),
                (None, None) => p.region.to_owned(),
            };
            self.values.insert("property_address", address);
        }
        if let Some(t) = self.property_type {
            self.values.insert("property_type", t.ko().to_owned());
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
            self.values.insert("area", format!("{s}평 (약 {m2}㎡)"));
        }
    }

    /// The deposit and rent, or the price, with the down payment and the balance. Each amount
    /// belongs to the word before it (`보증금 5000만원에 월세 100만원`); when the query is about a
    /// raise, the contract is for the new amount.
    fn fill_money(
        &mut self,
        input: &Map<String, Value>,
        query: &str,
        q: &Query,
        f: &Filters,
    ) -> Result<(), AgentError> {
        let amounts = amount_subjects(query);
        let (mut deposits, mut rents, mut other) = (Vec::new(), Vec::new(), Vec::new());
        for (a, s) in &amounts {
            match s {
                Some(Subject::Deposit) => deposits.push(a.won),
                Some(Subject::MonthlyRent) => rents.push(a.won),
                None => other.push(a.won),
            }
        }
        if let Some(c) = &q.change {
            match c.subject {
                Subject::Deposit => deposits = vec![c.new.won],
                Subject::MonthlyRent => rents = vec![c.new.won],
            }
        }
        let lease = self.doc == DocType::Lease;
        let (deposit, rent, price) = if lease {
            (
                deposits.first().or(other.first()).copied(),
                rents.first().copied(),
                None,
            )
        } else {
            (None, None, amounts.first().map(|(a, _)| a.won))
        };
        self.deposit = money_param(input, "deposit")?.or(deposit);
        let rent = money_param(input, "monthly_rent")?.or(rent);
        self.price = money_param(input, "sale_price")?.or(price);
        let principal = if lease { self.deposit } else { self.price };
        if let Some(p) = principal {
            let down = money_param(input, "down_payment")?.unwrap_or(p * DOWN_PAYMENT_PCT / 100);
            let key = if lease { "deposit" } else { "sale_price" };
            self.values.insert(key, money_text(p));
            self.values.insert("down_payment", money_text(down.min(p)));
            self.values.insert("balance", money_text(p - down.min(p)));
        }
        if lease {
            let is_monthly = rent.is_some() || f.deal_type == Some(DealType::Monthly);
            match rent {
                Some(r) => {
                    let text = format!("월 {} (매월 말일 지급)", money_text(r));
                    self.values.insert("monthly_rent", text);
                }
                None if !is_monthly => {
                    self.values.insert("monthly_rent", "없음 (전세)".to_owned());
                }
                None => {}
            }
        }
        Ok(())
    }

    /// The start (the input's, else the query's first date), the end (the query's second date,
    /// else start + term) and the term; the contract date.
    fn fill_dates(
        &mut self,
        ctx: &AgentContext,
        input: &Map<String, Value>,
        q: &Query,
    ) -> Result<(), AgentError> {
        let start = match input.get("contract_start") {
            None | Some(Value::Null) => q.dates.first().copied(),
            Some(v) => Some(v.as_str().and_then(Date::parse_iso).ok_or_else(|| {
                AgentError::fatal(format!(
                    "input field `contract_start` must be a date like \"2025-11-01\", got {v}"
                ))
            })?),
        };
        self.term_months = match self.doc {
            DocType::Lease => Some(q.term_months.unwrap_or(LEASE_TERM_MONTHS_MIN)),
            DocType::Sale => None,
        };
        match (start, self.term_months) {
            (Some(start), Some(months)) => {
                self.values.insert("contract_start", start.ko());
                let end = q
                    .dates
                    .get(1)
                    .copied()
                    .filter(|d| *d > start)
                    .unwrap_or_else(|| start.term_end(months));
                self.values.insert("contract_end", end.ko());
            }
            (Some(start), None) => {
                self.values.insert("balance_date", start.ko());
            }
            (None, _) => {}
        }
        if let Some(m) = self.term_months {
            let term = if m % 12 == 0 {
                format!("{}년", m / 12)
            } else {
                format!("{m}개월")
            };
            self.values.insert("lease_term", term);
        }
        self.values.insert("contract_date", created_date(ctx).ko());
        Ok(())
    }

    /// Free-text fields a human (or a plan) may set directly; the amounts and the start date
    /// were read above.
    fn fill_free_text(&mut self, input: &Map<String, Value>) -> Result<(), AgentError> {
        const READ_ABOVE: [&str; 5] = [
            "deposit",
            "monthly_rent",
            "sale_price",
            "down_payment",
            "contract_start",
        ];
        for (key, _, _) in self.template.fields {
            let Some(v) = input.get(*key) else {
                continue;
            };
            if READ_ABOVE.contains(key) {
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
            self.values.insert(key, text);
        }
        Ok(())
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

    /// The review: risks, recommendations and compliance checks, and the overall risk level.
    fn review(&self, lang: Lang) -> (Value, &'static str) {
        let mut r = Review::default();
        let missing = self.missing();
        if !missing.is_empty() {
            let fields = missing.join(", ");
            r.risks.push(json!({
                "type": lang.pick("필수 항목 미기재", "missing required fields"),
                "severity": "medium",
                "description": match lang {
                    Lang::Ko => format!("{fields} 항목이 비어 있습니다"),
                    Lang::En => format!("Not filled in: {fields}"),
                },
            }));
            r.recommendations.push(match lang {
                Lang::Ko => format!("서명 전에 {fields}을(를) 채우세요"),
                Lang::En => format!("Fill in {fields} before signing"),
            });
        }
        let market = self.region.and_then(|region| {
            DATASET.series(
                region,
                self.property_type.unwrap_or(PropertyType::Apartment),
            )
        });
        match self.doc {
            DocType::Lease => self.review_lease(&mut r, market, lang),
            DocType::Sale => self.review_sale(&mut r, market, lang),
        }
        r.compliance
            .insert("required_fields_filled".into(), missing.is_empty().into());
        let level = if r.risks.iter().any(|x| x["severity"] == "high") {
            "high"
        } else if r.risks.iter().any(|x| x["severity"] == "medium") {
            "medium"
        } else {
            "low"
        };
        let review = json!({
            "reviewed": true,
            "risk_level": level,
            "risks": r.risks,
            "recommendations": r.recommendations,
            "compliance_check": r.compliance,
        });
        (review, level)
    }

    /// A lease: the term, the deposit against the district's sale prices (깡통전세), a raise
    /// over the cap.
    fn review_lease(&self, r: &mut Review, market: Option<&PriceSeries>, lang: Lang) {
        let term_ok = self.term_months.is_none_or(|m| m >= LEASE_TERM_MONTHS_MIN);
        if !term_ok {
            r.risks.push(json!({
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
                r.risks.push(json!({
                    "type": lang.pick("깡통전세 위험", "deposit at risk (high jeonse ratio)"),
                    "severity": severity,
                    "description": match lang {
                        Lang::Ko => format!("보증금이 지역 평균 매매가의 {ratio:.1}%입니다. 집값이 내리면 보증금을 돌려받지 못할 수 있습니다"),
                        Lang::En => format!("The deposit is {ratio:.1}% of the district's average sale price; if prices fall it may not come back"),
                    },
                    "clause": "제1조",
                }));
                r.recommendations.push(lang.pick(
                    "전세보증금반환보증(HUG·HF·SGI) 가입이 가능한지 계약 전에 확인하세요",
                    "Check before signing that deposit return insurance (HUG, HF, SGI) will accept the contract",
                ).to_owned());
            }
            r.compliance.insert(
                "jeonse_ratio_below_70_percent".into(),
                (ratio < JEONSE_RATIO_WARN_PCT).into(),
            );
        }
        if let Some((old, new)) = self.over_cap_change {
            let (old, new) = (format_won(old, lang), format_won(new, lang));
            r.risks.push(json!({
                "type": lang.pick("법정 상한 초과 증액", "increase over the legal cap"),
                "severity": "high",
                "description": match lang {
                    Lang::Ko => format!("{old} → {new} 증액은 {LEGAL_CAP_PCT}%를 넘습니다 (주택임대차보호법 제7조)"),
                    Lang::En => format!("{old} → {new} exceeds the {LEGAL_CAP_PCT}% cap (Art. 7)"),
                },
                "clause": "제1조",
            }));
        }
        for (check, ok) in [
            ("lease_term_at_least_2_years", term_ok),
            ("increase_within_5_percent", self.over_cap_change.is_none()),
            ("opposability_clause", true),
            ("renewal_right_clause", true),
            ("lease_report_clause", true),
        ] {
            r.compliance.insert(check.into(), ok.into());
        }
        r.recommendations.extend(
            [
                lang.pick("계약 직전과 잔금일에 등기부등본(소유자·근저당)을 다시 확인하세요", "Check the land registry (owner, mortgages) again just before signing and on the balance day"),
                lang.pick("잔금일에 전입신고와 확정일자를 받아 대항력과 우선변제권을 확보하세요", "Register your move-in and get a fixed date on the balance day to secure opposability and priority"),
                lang.pick("임대인의 국세·지방세 체납 여부를 확인하세요", "Check the landlord for unpaid national and local taxes"),
            ]
            .map(str::to_owned),
        );
    }

    /// A sale: the price against the district's average.
    fn review_sale(&self, r: &mut Review, market: Option<&PriceSeries>, lang: Lang) {
        if let (Some(p), Some(s)) = (self.price, market) {
            let ratio = pct(p, s.latest().avg_price);
            if ratio >= SALE_PRICE_WARN_PCT {
                r.risks.push(json!({
                    "type": lang.pick("시세 대비 고가", "price above market"),
                    "severity": "medium",
                    "description": match lang {
                        Lang::Ko => format!("매매대금이 지역 평균의 {ratio:.1}%입니다. 실거래가를 비교해 보세요"),
                        Lang::En => format!("The price is {ratio:.1}% of the district average; compare recent deals"),
                    },
                    "clause": "제1조",
                }));
            }
            r.compliance.insert(
                "price_within_market_range".into(),
                (ratio < SALE_PRICE_WARN_PCT).into(),
            );
        }
        r.compliance
            .insert("down_payment_clause".into(), true.into());
        r.compliance
            .insert("transaction_report_clause".into(), true.into());
        r.recommendations.extend(
            [
                lang.pick("계약 전 등기부등본·건축물대장·토지이용계획을 확인하세요", "Check the land registry, building register and land-use plan before signing"),
                lang.pick("계약일부터 30일 이내에 실거래 신고를 하세요", "Report the deal within 30 days of the contract"),
                lang.pick("잔금일에 소유권이전등기 서류를 받고 바로 등기를 신청하세요", "Take the transfer documents on the balance day and register the transfer at once"),
            ]
            .map(str::to_owned),
        );
    }

    /// The draft as the document team reports it: the template, the filled document with its
    /// fields, the review, the Markdown of it all, and a summary.
    pub(super) fn to_json(&self, ctx: &AgentContext, lang: Lang) -> Value {
        let t = self.template;
        let title = match lang {
            Lang::Ko => t.name.to_owned(),
            Lang::En => format!("{} ({})", t.name, t.name_en),
        };
        let content = self.content();
        let missing = self.missing();
        let (review, level) = self.review(lang);
        let fields: Map<String, Value> = t
            .fields
            .iter()
            .map(|(key, _, _)| {
                let value = self.values.get(key).map_or(Value::Null, |v| json!(v));
                ((*key).to_owned(), value)
            })
            .collect();
        json!({
            "team_name": "document",
            "status": "completed",
            "summary": self.summary(&missing, level, lang),
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
                    "request_language": lang.code(),
                    "fields": fields,
                    "missing_fields": missing,
                    "region": self.region,
                    "dataset_as_of": DATASET.meta.as_of,
                },
                "created_at": created_at(ctx),
            },
            "review_needed": level != "low" || !missing.is_empty(),
            "review_result": review,
            "final_document": markdown(&title, &missing, &content, &review, lang),
            "sources": self.sources(),
        })
    }

    /// `주택임대차계약서 초안을 작성했습니다 (위험도 low, 미기재 항목 없음).`
    fn summary(&self, missing: &[&str], level: &str, lang: Lang) -> String {
        let name = self.template.name;
        match (lang, missing.is_empty()) {
            (Lang::Ko, true) => format!("{name} 초안을 작성했습니다 (위험도 {level})."),
            (Lang::Ko, false) => format!(
                "{name} 초안을 작성했습니다 (위험도 {level}, 미기재 항목 {}개).",
                missing.len()
            ),
            (Lang::En, true) => format!("Drafted the {} (risk {level}).", self.template.name_en),
            (Lang::En, false) => format!(
                "Drafted the {} (risk {level}, {} required fields left blank).",
                self.template.name_en,
                missing.len()
            ),
        }
    }

    /// The laws the contract's clauses follow.
    fn sources(&self) -> Vec<String> {
        let laws: &[&str] = match self.doc {
            DocType::Lease => &[
                "주택임대차보호법",
                "민법 제565조",
                "부동산 거래신고 등에 관한 법률 제6조의2",
            ],
            DocType::Sale => &["민법 제565조", "부동산 거래신고 등에 관한 법률 제3조"],
        };
        laws.iter().map(|l| (*l).to_owned()).collect()
    }
}

/// The draft, its missing fields and its review as one Markdown document.
fn markdown(title: &str, missing: &[&str], content: &str, review: &Value, lang: Lang) -> String {
    let mut md = format!("# {title}\n\n");
    if !missing.is_empty() {
        md.push_str(&format!("> 초안: 미기재 항목 ({})\n\n", missing.join(", ")));
    }
    md.push_str(content);
    md.push_str(&format!("\n## {}\n\n", lang.pick("검토 결과", "Review")));
    md.push_str(&format!(
        "- {}: {}\n",
        lang.pick("위험도", "Risk level"),
        review["risk_level"].as_str().unwrap_or_default()
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
    md
}
