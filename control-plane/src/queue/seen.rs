//! Runners this server saw lately, with their labels, for a second: a runner's polls read and touch its row at
//! most once a second (a busy runner polls many times a second). The claim statement itself checks that the
//! runner still exists, so a runner removed meanwhile claims nothing; its polls are answered 404 once its entry
//! has expired.

use crate::cache::BoundedCache;
use hookflow_shared::{OrgId, RunnerId};
use std::time::Duration;

/// Runners remembered at most (a fleet of 20,000 runners fits).
const CAPACITY: usize = 50_000;
/// How long a runner's row is taken as read.
const FRESH: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct SeenRunners {
    /// By (organization, or none for the embedded runner, and runner), the runner's labels.
    entries: BoundedCache<(Option<OrgId>, RunnerId), Vec<String>>,
}

impl Default for SeenRunners {
    fn default() -> Self {
        Self { entries: BoundedCache::new(CAPACITY).with_ttl(FRESH) }
    }
}

impl SeenRunners {
    /// The labels of a runner seen within the last second.
    pub fn labels(&self, org_id: Option<OrgId>, runner_id: RunnerId) -> Option<Vec<String>> {
        self.entries.get(&(org_id, runner_id))
    }

    /// Forgets a runner (removed through this server).
    pub fn forget(&self, org_id: Option<OrgId>, runner_id: RunnerId) {
        self.entries.remove(&(org_id, runner_id));
    }

    /// Remembers that the runner's row was just read (and touched).
    pub fn saw(&self, org_id: Option<OrgId>, runner_id: RunnerId, labels: Vec<String>) {
        self.entries.insert((org_id, runner_id), labels);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runner_is_remembered_for_a_second_within_its_organization() {
        let seen = SeenRunners::default();
        let (org, runner) = (OrgId::now_v7(), RunnerId::now_v7());
        assert_eq!(seen.labels(Some(org), runner), None);
        seen.saw(Some(org), runner, vec!["linux".into()]);
        assert_eq!(seen.labels(Some(org), runner), Some(vec!["linux".to_owned()]));
        assert_eq!(seen.labels(Some(OrgId::now_v7()), runner), None, "another organization's key");
        assert_eq!(seen.labels(None, runner), None);
        seen.forget(Some(org), runner);
        assert_eq!(seen.labels(Some(org), runner), None, "removed");
    }
}
