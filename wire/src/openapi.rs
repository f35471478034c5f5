//! The OpenAPI schemas that derives cannot state: the shapes the server tells apart by more than
//! one field (a resume is an answer or a text, never both; an edit comes with its args and only
//! an edit does), the command replies (told apart by `status` or by their fields) and the error
//! body (its extra fields). The derived ones are beside their types. Only with the `openapi`
//! feature.

use std::borrow::Cow;

use chronicle_schemas::{CheckpointId, SESSION_ID_CHARS_MAX};
use utoipa::openapi::schema::{
    AdditionalProperties, AnyOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema,
    SchemaType, Type,
};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use crate::{
    Added, Approved, ApprovedAll, CheckpointEntry, CommandOutcome, DecisionRequest, ErrorBody,
    ErrorDetail, Rejected, Restored, ResumeRequest, Skipped, TodosReply, Updated,
};

/// A string with something besides whitespace: one character outside the Unicode `White_Space`
/// set, the characters the server trims. Spelled out rather than `\S`, whose meaning differs
/// between regular expression engines.
pub const NOT_ONLY_WHITESPACE: &str = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";

/// A string without NUL characters.
pub const NO_NUL: &str = "^[^\\u0000]*$";

/// A session (thread) id as the server takes it: 1..=[`SESSION_ID_CHARS_MAX`] characters
/// without NUL.
pub fn session_id() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(SESSION_ID_CHARS_MAX))
        .pattern(Some(NO_NUL))
        .into()
}

/// [`session_id`], or `null`.
pub fn optional_session_id() -> Schema {
    let Schema::Object(mut o) = session_id() else {
        unreachable!("a string schema is an object schema")
    };
    o.schema_type = SchemaType::from_iter([Type::String, Type::Null]);
    Schema::Object(o)
}

fn null() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::Null)
}

fn nullable(ty: Type) -> ObjectBuilder {
    ObjectBuilder::new().schema_type(SchemaType::from_iter([ty, Type::Null]))
}

fn strict_object() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(false)))
}

fn schema_ref<T: ToSchema>() -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(T::name()))
}

impl PartialSchema for ResumeRequest {
    fn schema() -> RefOr<Schema> {
        let answer = strict_object()
            .description(Some(
                "Approve (`true`) or reject (`false`) the pending approval",
            ))
            .property("approve", ObjectBuilder::new().schema_type(Type::Boolean))
            .required("approve")
            .property("response", null());
        let text = strict_object()
            .description(Some(
                "A `/command`, or feedback: the pending approval is decided as an edit of its \
                 args with `feedback` set to this text",
            ))
            .property(
                "response",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some(NOT_ONLY_WHITESPACE)),
            )
            .required("response")
            .property("approve", null());
        OneOfBuilder::new()
            .description(Some(
                "`{\"approve\": bool}` or `{\"response\": \"...\"}`, exactly one of them",
            ))
            .item(answer)
            .item(text)
            .into()
    }
}

impl ToSchema for ResumeRequest {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ResumeRequest")
    }
}

impl PartialSchema for DecisionRequest {
    fn schema() -> RefOr<Schema> {
        let comment = || nullable(Type::String).description(Some("Recorded with the decision"));
        let plain = strict_object()
            .property(
                "decision",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(["approve", "reject"])),
            )
            .required("decision")
            .property("edited_args", null())
            .property("comment", comment());
        let edit = strict_object()
            .property(
                "decision",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(["edit"])),
            )
            .required("decision")
            .property(
                "edited_args",
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .description(Some("The args to run with instead of the requested ones")),
            )
            .required("edited_args")
            .property("comment", comment());
        OneOfBuilder::new()
            .description(Some(
                "A human's decision: `approve` or `reject`, or `edit` with `edited_args` (only an \
                 edit carries args, and it must)",
            ))
            .item(plain)
            .item(edit)
            .into()
    }
}

impl ToSchema for DecisionRequest {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("DecisionRequest")
    }
}

impl PartialSchema for CommandOutcome {
    fn schema() -> RefOr<Schema> {
        let checkpoints = strict_object()
            .description(Some("`/checkpoint list`: the run's checkpoint tree"))
            .property(
                "checkpoints",
                ArrayBuilder::new().items(schema_ref::<CheckpointEntry>()),
            )
            .required("checkpoints");
        let help = strict_object()
            .description(Some("`/help`: the commands"))
            .property("help", ObjectBuilder::new().schema_type(Type::String))
            .required("help");
        AnyOfBuilder::new()
            .description(Some(
                "What a carried-out command answers, told apart by `status` or, without one, by \
                 its fields (a refused command is an error answer instead)",
            ))
            .item(schema_ref::<TodosReply>())
            .item(schema_ref::<Approved>())
            .item(schema_ref::<ApprovedAll>())
            .item(schema_ref::<Rejected>())
            .item(schema_ref::<Skipped>())
            .item(schema_ref::<Added>())
            .item(schema_ref::<Updated>())
            .item(checkpoints)
            .item(schema_ref::<Restored>())
            .item(help)
            .into()
    }
}

impl ToSchema for CommandOutcome {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("CommandOutcome")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        fn add<T: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
            schemas.push((T::name().into_owned(), T::schema()));
            T::schemas(schemas);
        }
        add::<TodosReply>(schemas);
        add::<Approved>(schemas);
        add::<ApprovedAll>(schemas);
        add::<Rejected>(schemas);
        add::<Skipped>(schemas);
        add::<Added>(schemas);
        add::<Updated>(schemas);
        add::<CheckpointEntry>(schemas);
        add::<Restored>(schemas);
        add::<CheckpointId>(schemas);
    }
}

impl PartialSchema for ErrorBody {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "Every error: `{\"error\": {\"code\", \"message\"}}`. Some carry fields beside \
                 `error`: a refused command its `help`, a chat turn that waits for a human the \
                 turn and the approvals it waits for",
            ))
            .property("error", schema_ref::<ErrorDetail>())
            .required("error")
            .into()
    }
}

impl ToSchema for ErrorBody {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ErrorBody")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((ErrorDetail::name().into_owned(), ErrorDetail::schema()));
    }
}
