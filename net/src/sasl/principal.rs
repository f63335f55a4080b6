//! The principal a SASL exchange authenticated: `User:<name>`, carried in the connection's
//! [`crate::server::ConnectionInfo`], which is `Copy` and passed by value with every request.
//!
//! So that it stays `Copy` (a pointer and a length), the name is interned: the first login of a
//! name leaks one copy of it for the life of the process, and every later login of the same
//! name reuses it. Only names that authenticated are interned, so the table is bounded by the
//! users an administrator created (AlterUserScramCredentials), not by what clients send.

use std::collections::HashSet;
use std::sync::Mutex;

/// A user a SASL/SCRAM exchange authenticated; its Kafka principal is `User:<name>`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SaslUser(&'static str);

impl SaslUser {
    /// The interned user named `name`.
    pub fn intern(name: &str) -> SaslUser {
        static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
        let mut names = NAMES
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let names = names.get_or_insert_with(HashSet::new);
        if let Some(known) = names.get(name) {
            return SaslUser(known);
        }
        let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
        names.insert(leaked);
        SaslUser(leaked)
    }

    /// The user name (without `User:`).
    pub fn name(self) -> &'static str {
        self.0
    }

    /// The Kafka principal, `User:<name>`.
    pub fn principal(self) -> String {
        format!("User:{}", self.0)
    }
}

impl std::fmt::Debug for SaslUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "User:{}", self.0)
    }
}

impl std::fmt::Display for SaslUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "User:{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_interned_once_and_prints_as_a_kafka_principal() {
        let a = SaslUser::intern("alice");
        let b = SaslUser::intern(&String::from("alice"));
        assert!(std::ptr::eq(a.name(), b.name()));
        assert_eq!(a.principal(), "User:alice");
        assert_ne!(a, SaslUser::intern("bob"));
    }
}
