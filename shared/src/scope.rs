//! The closed scope catalog, the presets, and the one pure function that decides whether scopes grant a scope.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

macro_rules! scopes {
    ($($variant:ident => $name:literal, $description:literal;)*) => {
        /// A permission of the shape `resource:action`. The catalog is closed: these are all of them.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Scope { $($variant),* }

        impl Scope {
            /// Every scope, in catalog order.
            pub const ALL: &'static [Scope] = &[$(Scope::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self { $(Scope::$variant => $name),* }
            }

            pub fn description(self) -> &'static str {
                match self { $(Scope::$variant => $description),* }
            }
        }

        impl FromStr for Scope {
            type Err = UnknownScope;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s { $($name => Ok(Scope::$variant),)* other => Err(UnknownScope(other.to_owned())) }
            }
        }
    };
}

scopes! {
    WebhooksRead => "webhooks:read", "Read webhook endpoints, captured requests, their streams and analytics.";
    WebhooksWrite => "webhooks:write", "Create, change and delete webhook endpoints and captured requests; replay captures.";
    FlowsRead => "flows:read", "List and read flows, versions, environments and executions (needed to launch by tag).";
    FlowsWrite => "flows:write", "Create, change, publish, restore, import and delete flows and their environments.";
    FlowsExecute => "flows:execute", "Launch and cancel flow executions.";
    CollectionsRead => "collections:read", "Read collections and their requests, preview OpenAPI syncs.";
    CollectionsWrite => "collections:write", "Create, change, import, sync and delete collections.";
    ResourcesRead => "resources:read", "List organization secrets (names only) and variables.";
    ResourcesWrite => "resources:write", "Write and delete organization secrets and variables.";
    KeysRead => "keys:read", "List and read API keys (never their secrets).";
    KeysWrite => "keys:write", "Create and delete API keys, never with more scopes than the caller has.";
    OrganizationRead => "organization:read", "Read the organization, its members and its audit log.";
    OrganizationWrite => "organization:write", "Change the organization and its members.";
    RunnersRead => "runners:read", "List and read registered runners.";
    RunnersWrite => "runners:write", "Deregister runners.";
    RunnerComplete => "runner:complete", "Runner protocol: register, heartbeat and claim jobs.";
}

impl Scope {
    pub fn is_read(self) -> bool {
        self.as_str().ends_with(":read")
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Scope {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Scope {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl utoipa::PartialSchema for Scope {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some(Scope::ALL.iter().map(|s| s.as_str())))
            .into()
    }
}

impl utoipa::ToSchema for Scope {}

/// A scope name outside the catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scope `{0}` (GET /permissions lists the catalog)")]
pub struct UnknownScope(pub String);

/// A set of scopes, as carried by a key or a role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeSet(BTreeSet<Scope>);

impl ScopeSet {
    pub fn all() -> Self {
        Self(Scope::ALL.iter().copied().collect())
    }

    /// Parses scope names, rejecting the first one outside the catalog.
    pub fn parse<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Self, UnknownScope> {
        names.into_iter().map(str::parse).collect::<Result<_, _>>().map(Self)
    }

    /// Whether these scopes grant `required`. Scopes are exact: no scope implies another.
    pub fn grants(&self, required: Scope) -> bool {
        self.0.contains(&required)
    }

    /// The scopes of `other` that this set lacks, in catalog order (empty when `other` is a subset).
    pub fn missing_from<'a>(&'a self, other: &'a ScopeSet) -> impl Iterator<Item = Scope> + 'a {
        other.0.iter().copied().filter(|s| !self.0.contains(s))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = Scope> + '_ {
        self.0.iter().copied()
    }

    pub fn names(&self) -> Vec<String> {
        self.iter().map(|s| s.as_str().to_owned()).collect()
    }
}

impl FromIterator<Scope> for ScopeSet {
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

/// A named bundle of scopes offered when creating a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    Ci,
    Runner,
    ReadOnly,
}

impl Preset {
    pub const ALL: &'static [Preset] = &[Preset::Ci, Preset::Runner, Preset::ReadOnly];

    pub fn name(self) -> &'static str {
        match self {
            Preset::Ci => "ci",
            Preset::Runner => "runner",
            Preset::ReadOnly => "read-only",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Preset::Ci => {
                "Launch flows from CI by id or tag. Review it down to flows:execute when you launch by id only."
            }
            Preset::Runner => "What a self-hosted runner needs: register, heartbeat, claim and complete jobs.",
            Preset::ReadOnly => "Every :read scope: inventories and dashboards, no changes.",
        }
    }

    pub fn scopes(self) -> ScopeSet {
        match self {
            Preset::Ci => [Scope::FlowsExecute, Scope::FlowsRead].into_iter().collect(),
            Preset::Runner => [Scope::RunnerComplete].into_iter().collect(),
            Preset::ReadOnly => Scope::ALL.iter().copied().filter(|s| s.is_read()).collect(),
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|p| p.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_round_trips_and_is_closed() {
        assert_eq!(Scope::ALL.len(), 16);
        for scope in Scope::ALL {
            assert_eq!(scope.as_str().parse::<Scope>(), Ok(*scope));
            assert!(!scope.description().is_empty());
        }
        assert_eq!("flows:admin".parse::<Scope>(), Err(UnknownScope("flows:admin".into())));
        assert!("FLOWS:READ".parse::<Scope>().is_err(), "scope names are case-sensitive");
    }

    #[test]
    fn grants_is_exact() {
        let set = ScopeSet::parse(["flows:read", "flows:execute"]).expect("valid");
        assert!(set.grants(Scope::FlowsRead));
        assert!(set.grants(Scope::FlowsExecute));
        assert!(!set.grants(Scope::FlowsWrite), "read does not imply write");
        assert!(!ScopeSet::default().grants(Scope::FlowsRead));
        assert!(ScopeSet::all().grants(Scope::RunnerComplete));
    }

    #[test]
    fn missing_from_finds_escalation() {
        let caller = ScopeSet::parse(["keys:write", "flows:read"]).expect("valid");
        let wanted = ScopeSet::parse(["flows:read", "flows:write", "keys:read"]).expect("valid");
        let missing: Vec<_> = caller.missing_from(&wanted).collect();
        assert_eq!(missing, vec![Scope::FlowsWrite, Scope::KeysRead]);
        let subset = ScopeSet::parse(["flows:read"]).expect("valid");
        assert_eq!(caller.missing_from(&subset).count(), 0);
    }

    #[test]
    fn presets_match_the_contract() {
        assert_eq!(Preset::Ci.scopes().names(), vec!["flows:read", "flows:execute"]);
        assert_eq!(Preset::Runner.scopes().names(), vec!["runner:complete"]);
        let read_only = Preset::ReadOnly.scopes();
        assert_eq!(read_only.iter().count(), 7);
        assert!(read_only.iter().all(Scope::is_read));
        assert_eq!(Preset::from_name("read-only"), Some(Preset::ReadOnly));
        assert_eq!(Preset::from_name("admin"), None);
    }
}
