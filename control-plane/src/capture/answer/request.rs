//! A request as answering reads it: what the capture path received (or what `rules/test` describes).

use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// A request as answering reads it.
#[derive(Debug)]
pub struct Incoming<'a> {
    pub method: &'a str,
    /// The capture's path, as captures store it (empty for the capture URL itself).
    pub path: &'a str,
    pub query: &'a BTreeMap<String, Vec<String>>,
    pub headers: &'a [(String, String)],
    pub content_type: Option<&'a str>,
    pub body: &'a [u8],
    pub source_ip: &'a str,
    /// The signature verdict (`valid`, `unverified`, ...), for `signature:` in a rule's `q`.
    pub verdict: &'a str,
    pub received_at: DateTime<Utc>,
}
