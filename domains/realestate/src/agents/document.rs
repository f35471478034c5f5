//! `document_team` (the document team): drafts a 주택임대차계약서 or a 부동산 매매계약서
//! (`draft.rs`), or writes a market report of what the run found (`report.rs`), and saves it
//! to the session's workspace.

use serde_json::{Map, Value, json};

use super::data::{DATASET, DealType};
use super::draft::Draft;
use super::filters::Filters;
use super::report::market_report;
use super::{AgentContext, AgentError, Asked, DatasetAgent};
use crate::query::{self, Date, Lang, REPORT_TERMS, contains_any, format_won};

/// The two contracts the team drafts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DocType {
    Lease,
    Sale,
}

impl DocType {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            DocType::Lease => "lease_contract",
            DocType::Sale => "sales_contract",
        }
    }
}

pub(super) struct Template {
    pub id: &'static str,
    pub name: &'static str,
    pub name_en: &'static str,
    pub content: &'static str,
    /// `(placeholder, label, required)`, in the order the form asks for them.
    pub fields: &'static [(&'static str, &'static str, bool)],
}

pub(super) const LEASE: Template = Template {
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

pub(super) const SALE: Template = Template {
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

/// Words that ask for a contract.
const CONTRACT_TERMS: &[&str] = &["계약서", "contract", "agreement"];

/// What the team is asked to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Requested {
    Contract(DocType),
    Report,
}

impl Requested {
    fn as_str(self) -> &'static str {
        match self {
            Self::Contract(doc) => doc.as_str(),
            Self::Report => "market_report",
        }
    }
}

/// The document team: contracts and market reports.
#[derive(Debug, Default)]
pub struct DocumentTeam;

impl DatasetAgent for DocumentTeam {
    const NAME: &'static str = "document_team";

    async fn answer(
        &self,
        Asked {
            ctx,
            input,
            f,
            lang,
        }: Asked<'_>,
    ) -> Result<Value, AgentError> {
        let requested = requested(ctx, &input, &f)?;
        let mut result = match requested {
            Requested::Contract(doc) => Draft::build(ctx, &input, &f, doc)?.to_json(ctx, lang),
            Requested::Report => market_report(ctx, &f, lang),
        };
        // The document goes to the session's workspace through the tool host: under HITL
        // `tools` a human approves (or edits, or rejects) the write first.
        let file_path = format!(
            "/workspace/documents/{}_{}.md",
            ctx.todo_id,
            requested.as_str()
        );
        let args = json!({"file_path": file_path, "content": result["final_document"]});
        result["saved_document"] = match ctx.tools.call("write_file", args).await {
            Ok(out) => json!({"file_path": out["file_path"], "bytes": out["bytes"]}),
            Err(e) => json!({"file_path": null, "error": e.to_string()}),
        };
        Ok(result)
    }
}

/// The input's `document_type`, else what the query asks for: a report when it says so and
/// names no contract, else a sales contract for a sale, else a lease.
fn requested(
    ctx: &AgentContext,
    input: &Map<String, Value>,
    f: &Filters,
) -> Result<Requested, AgentError> {
    match input.get("document_type") {
        None | Some(Value::Null) => {}
        Some(v) => {
            return match v.as_str() {
                Some("lease_contract") => Ok(Requested::Contract(DocType::Lease)),
                Some("sales_contract") => Ok(Requested::Contract(DocType::Sale)),
                Some("market_report") => Ok(Requested::Report),
                _ => Err(AgentError::fatal(format!(
                    "input field `document_type` must be \"lease_contract\", \"sales_contract\" or \"market_report\", got {v}"
                ))),
            };
        }
    }
    let lower = ctx.query.to_lowercase();
    if contains_any(&lower, REPORT_TERMS) && !contains_any(&lower, CONTRACT_TERMS) {
        return Ok(Requested::Report);
    }
    let sale = f.deal_type == Some(DealType::Sale) || contains_any(&lower, SALE_TERMS);
    Ok(Requested::Contract(if sale {
        DocType::Sale
    } else {
        DocType::Lease
    }))
}

/// `6억 5,000만원 (금 650,000,000원)`: contracts spell amounts both ways so neither can be
/// misread.
pub(super) fn money_text(won: u64) -> String {
    format!(
        "{} (금 {}원)",
        format_won(won, Lang::Ko),
        query::group_thousands(won)
    )
}

pub(super) fn money_param(
    input: &Map<String, Value>,
    key: &str,
) -> Result<Option<u64>, AgentError> {
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
pub(super) fn created_at(ctx: &AgentContext) -> String {
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

pub(super) fn created_date(ctx: &AgentContext) -> Date {
    Date::parse_iso(&created_at(ctx)).unwrap_or(Date {
        year: 2025,
        month: 9,
        day: 30,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::Agent;
    use crate::agents::testing::ctx;
    use chronicle_schemas::RunId;

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
            turn: Default::default(),
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
