//! The OpenAPI schemas of the types whose JSON is not what their Rust shape says: ids are
//! strings (a run id a UUID), instants are RFC 3339 strings. Only with the `openapi` feature.

use std::borrow::Cow;

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::{PartialSchema, ToSchema};

use crate::{ApprovalId, CheckpointId, RunId, SessionId, Timestamp, TodoId, ToolCallId};

fn string(description: &str, format: Option<SchemaFormat>) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(format)
        .description(Some(description))
        .into()
}

impl PartialSchema for RunId {
    fn schema() -> RefOr<Schema> {
        string(
            "A run's id: a UUID",
            Some(SchemaFormat::Custom("uuid".into())),
        )
    }
}

impl ToSchema for RunId {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("RunId")
    }
}

impl PartialSchema for Timestamp {
    fn schema() -> RefOr<Schema> {
        string(
            "An instant in UTC, RFC 3339 with microseconds: `2025-10-05T10:00:00.000000Z`",
            Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)),
        )
    }
}

impl ToSchema for Timestamp {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Timestamp")
    }
}

macro_rules! string_id_schema {
    ($($name:ident: $description:literal;)*) => {$(
        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                string($description, None)
            }
        }

        impl ToSchema for $name {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }
        }
    )*};
}

string_id_schema! {
    SessionId: "A session (a conversation's thread) id";
    TodoId: "A TODO's id within its run: `todo_001`, `todo_002`, ...";
    ApprovalId: "An approval's id within its run";
    CheckpointId: "A checkpoint's id within its run: `cp_001`, `cp_002`, ...";
    ToolCallId: "A tool call's id within its run";
}
