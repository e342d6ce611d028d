//! Roles of people in an organization and the scopes each grants (API.md section 1): owners and admins hold
//! every scope but `runner:complete`; members all but `keys:write`, `organization:write`, `runners:write` and
//! `runner:complete`; viewers the `:read` ones. Runners are machines, not people: no role holds
//! `runner:complete`, and only owners and admins may put it into a key (the `runner` preset).

use crate::scope::{Scope, ScopeSet};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Member,
    Admin,
    Owner,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Owner, Role::Admin, Role::Member, Role::Viewer];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Member => "member",
            Role::Viewer => "viewer",
        }
    }

    pub fn parse(name: &str) -> Option<Role> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// The scopes the role grants a person acting with it.
    pub fn scopes(self) -> ScopeSet {
        self.key_scopes().iter().filter(|s| *s != Scope::RunnerComplete).collect()
    }

    /// The scopes a key made by a person of this role may hold: the role's own, and for owners and admins also
    /// `runner:complete` (runner keys are made by the people who place runners).
    pub fn key_scopes(self) -> ScopeSet {
        let all = Scope::ALL.iter().copied();
        match self {
            Role::Owner | Role::Admin => all.collect(),
            Role::Member => all
                .filter(|s| {
                    !matches!(
                        s,
                        Scope::KeysWrite | Scope::OrganizationWrite | Scope::RunnersWrite | Scope::RunnerComplete
                    )
                })
                .collect(),
            Role::Viewer => all.filter(|s| s.is_read()).collect(),
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_map_to_the_contracts_scopes() {
        assert_eq!(Role::Owner.key_scopes(), ScopeSet::all());
        assert_eq!(Role::Admin.key_scopes(), ScopeSet::all());
        for role in Role::ALL {
            assert!(!role.scopes().grants(Scope::RunnerComplete), "no person acts as a runner: {role}");
        }
        assert!(Role::Admin.scopes().grants(Scope::KeysWrite) && Role::Admin.scopes().grants(Scope::RunnersWrite));
        let member = Role::Member.key_scopes();
        for scope in [Scope::KeysWrite, Scope::OrganizationWrite, Scope::RunnersWrite, Scope::RunnerComplete] {
            assert!(!member.grants(scope), "{scope}");
        }
        assert!(member.grants(Scope::FlowsWrite) && member.grants(Scope::KeysRead));
        let viewer = Role::Viewer.scopes();
        assert!(Scope::ALL.iter().all(|s| viewer.grants(*s) == s.is_read()));
        assert_eq!(Role::parse("admin"), Some(Role::Admin));
        assert_eq!(Role::parse("root"), None);
        assert!(Role::Owner > Role::Admin && Role::Admin > Role::Member && Role::Member > Role::Viewer);
    }
}
