//! The constant `status` strings of replies (`{"status": "accepted", ...}`), each a type with one
//! value, so a reply decodes only with its own status and a client can tell replies apart by it.

use serde::{Deserialize, Serialize};

macro_rules! tags {
    ($($(#[$doc:meta])* $name:ident = $text:literal;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            #[default]
            #[serde(rename = $text)]
            $name,
        }

        // By hand: the derive does not see a `rename` that a macro passes in, and the schema
        // needs a name of its own (`Restored` is also the reply a restore sends).
        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$text]))
                    .into()
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(concat!(stringify!($name), "Status"))
            }
        }
    )*};
}

tags! {
    /// `"accepted"`: a decision was taken.
    Accepted = "accepted";
    /// `"cancelled"`: a run was cancelled.
    Cancelled = "cancelled";
    /// `"resumed"`: approved; the run goes on.
    Resumed = "resumed";
    /// `"rejected"`.
    Rejected = "rejected";
    /// `"skipped"`.
    Skipped = "skipped";
    /// `"added"`.
    Added = "added";
    /// `"updated"`.
    Updated = "updated";
    /// `"restored"`.
    Restored = "restored";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_is_its_string_and_nothing_else() {
        assert_eq!(
            serde_json::to_string(&Resumed::Resumed).unwrap(),
            "\"resumed\""
        );
        assert_eq!(
            serde_json::from_str::<Restored>("\"restored\"").unwrap(),
            Restored::Restored
        );
        assert!(serde_json::from_str::<Restored>("\"resumed\"").is_err());
    }
}
