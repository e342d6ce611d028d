//! Job tokens this server handed out to runners and not yet seen completed here, so a completion sent back through
//! it is checked (the token's hash names the job of the path) without a database round trip before its body is read.
//! The completion statement re-checks that the job still holds its execution; a token this server does not know
//! (another replica issued it, or it was forgotten) is checked in the database as before. Bounded: past
//! [`CAPACITY`] tokens the oldest are forgotten, one at a time (a [`BoundedCache`]).

use crate::cache::BoundedCache;
use hookflow_shared::{ExecutionId, JobId, token};

/// Tokens remembered at most (about 100 bytes each).
const CAPACITY: usize = 50_000;

/// What an issued token names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IssuedJob {
    pub job_id: JobId,
    pub execution_id: ExecutionId,
    pub attempt: i32,
}

#[derive(Debug)]
pub struct IssuedJobs {
    /// By the hash of the token, oldest issued first out.
    entries: BoundedCache<Vec<u8>, IssuedJob>,
}

impl Default for IssuedJobs {
    fn default() -> Self {
        Self { entries: BoundedCache::new(CAPACITY) }
    }
}

impl IssuedJobs {
    /// Remembers the token handed out for `job`.
    pub fn record(&self, job_token: &str, job: IssuedJob) {
        self.entries.insert(token::hash(job_token), job);
    }

    /// Whether this server issued `job_token` for `job_id` and has not seen it complete.
    pub fn knows(&self, job_token: &str, job_id: JobId) -> bool {
        self.entries.read(token::hash(job_token).as_slice(), |job, _| job.job_id == job_id).unwrap_or(false)
    }

    /// The job `job_token` was issued for, when it is `job_id`, forgotten from now on (a completion is made once;
    /// any later call goes to the database). `None` when this server does not know the token for that job.
    pub fn take(&self, job_token: &str, job_id: JobId) -> Option<IssuedJob> {
        self.entries.remove_if(token::hash(job_token).as_slice(), |job, _| job.job_id == job_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> IssuedJob {
        IssuedJob { job_id: JobId::now_v7(), execution_id: ExecutionId::now_v7(), attempt: 1 }
    }

    #[test]
    fn a_token_names_its_own_job_once() {
        let issued = IssuedJobs::default();
        let (first, second) = (job(), job());
        issued.record("hfj_first", first);
        issued.record("hfj_second", second);
        assert_eq!(issued.take("hfj_first", second.job_id), None, "a token sent for another job's path");
        assert_eq!(issued.take("hfj_unknown", first.job_id), None);
        assert_eq!(issued.take("hfj_first", first.job_id), Some(first));
        assert_eq!(issued.take("hfj_first", first.job_id), None, "taken once");
        assert_eq!(issued.take("hfj_second", second.job_id), Some(second));
    }

    #[test]
    fn the_oldest_tokens_are_forgotten_past_the_capacity() {
        let issued = IssuedJobs::default();
        let oldest = job();
        issued.record("hfj_oldest", oldest);
        for n in 0..CAPACITY {
            issued.record(&format!("hfj_{n}"), job());
        }
        assert_eq!(issued.take("hfj_oldest", oldest.job_id), None);
        assert_eq!(issued.entries.len(), CAPACITY);
    }
}
