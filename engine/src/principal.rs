//! Who acts on a run: a principal's name (what the log records as `by` / `decided_by`) and
//! whether it may act on every run. Every run and session belongs to the principal that started
//! it; another principal is told it does not exist, so existence is never disclosed.

/// An authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    /// Sees and acts on every run, and may start runs for another `user_id`.
    pub admin: bool,
}

impl Principal {
    /// The one principal of a server without tokens (and of the embedded CLI): it owns
    /// everything.
    pub fn local() -> Self {
        Self::admin(chronicle_schemas::OWNER_OF_OLD_RUNS)
    }

    /// An ordinary principal: its own runs only.
    pub fn user(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            admin: false,
        }
    }

    /// A principal with the `admin` role.
    pub fn admin(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            admin: true,
        }
    }

    /// Whose items a list shows when this principal asks for those of `owner` (every owner's
    /// when neither says: `None`): an admin's choice, and an ordinary principal's own name;
    /// [`crate::Error::NotYourOwner`] when an ordinary principal names another.
    pub fn list_owner<'a>(&'a self, owner: Option<&'a str>) -> crate::Result<Option<&'a str>> {
        match (self.admin, owner) {
            (true, owner) => Ok(owner),
            (false, Some(o)) if o != self.name => Err(crate::Error::NotYourOwner {
                given: o.to_owned(),
            }),
            (false, _) => Ok(Some(&self.name)),
        }
    }

    /// May this principal see and act on what `owner` owns?
    pub fn may_access(&self, owner: &str) -> bool {
        self.admin || self.name == owner
    }
}

impl Default for Principal {
    fn default() -> Self {
        Self::local()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_shows_an_admins_choice_and_anyone_elses_own() {
        let root = Principal::admin("root");
        assert_eq!(root.list_owner(None).unwrap(), None);
        assert_eq!(root.list_owner(Some("bob")).unwrap(), Some("bob"));
        let alice = Principal::user("alice");
        assert_eq!(alice.list_owner(None).unwrap(), Some("alice"));
        assert_eq!(alice.list_owner(Some("alice")).unwrap(), Some("alice"));
        let refused = alice.list_owner(Some("bob")).unwrap_err();
        assert!(
            matches!(&refused, crate::Error::NotYourOwner { given } if given == "bob"),
            "{refused}"
        );
        assert_eq!(
            refused.to_string(),
            r#"owner "bob" is not you: only an admin may list another principal's items"#
        );
    }
}
