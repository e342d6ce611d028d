//! Tests of the schemes: provider-published examples, and vectors computed independently with Python's `hmac`,
//! `hashlib` and `base64` (each constant shows the one-liner that made it, run after
//! `import hmac, hashlib, base64; BODY = b'{"id":"evt_1","type":"ping"}'; T = b"1700000000"`).
//!
//! `suite` runs what every scheme must do over one table of the schemes, with the vectors each family's file
//! keeps: valid, a body changed by one byte, a wrong secret, a rotation, the `expected` hint, a missing header, a
//! malformed header, timestamps past and future; then each file adds what is particular to its schemes (the
//! providers' published examples among them).

mod body;
mod discord;
mod generic;
mod settings;
mod slack;
mod standard_webhooks;
mod stripe;
mod suite;
mod twilio;

use crate::signature::{Check, Message, Verifier};
use chrono::{DateTime, Utc};
use hookflow_shared::api::signatures::{SignatureScheme, Verdict, VerificationSettings};

/// The signed timestamp of every vector (2023-11-14T22:13:20Z), and the body most of them sign.
pub(super) const T: i64 = 1_700_000_000;
pub(super) const BODY: &[u8] = br#"{"id":"evt_1","type":"ping"}"#;
/// Where the messages were sent, unless a test says otherwise.
pub(super) const URL: &str = "https://hooks.example.com/webhook/ep_1/square?x=1";

pub(super) fn settings(scheme: SignatureScheme, secrets: &[&str]) -> VerificationSettings {
    VerificationSettings::new(scheme, secrets.iter().map(|s| s.to_string()).collect())
}

pub(super) fn verifier(settings: &VerificationSettings) -> Verifier {
    Verifier::new(settings).expect("settings that verify")
}

pub(super) fn at(unix: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(unix, 0).expect("a time")
}

/// A message as a sender made it.
#[derive(Debug, Clone)]
pub(super) struct Sent {
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub url: String,
    pub received_at: DateTime<Utc>,
}

impl Sent {
    /// Received 10 s after [`T`], at [`URL`].
    pub(super) fn new(headers: &[(&str, &str)], body: &[u8]) -> Self {
        Sent {
            headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
            body: body.to_vec(),
            url: URL.to_owned(),
            received_at: at(T + 10),
        }
    }

    pub(super) fn check(&self, verifier: &Verifier) -> Check {
        verifier.check(&Message {
            headers: &self.headers,
            body: &self.body,
            url: &self.url,
            received_at: self.received_at,
        })
    }

    /// With the header set to `value` (every header of that name replaced, any case).
    pub(super) fn with(&self, name: &str, value: &str) -> Self {
        let mut sent = self.without(name);
        sent.headers.push((name.to_owned(), value.to_owned()));
        sent
    }

    pub(super) fn without(&self, name: &str) -> Self {
        let mut sent = self.clone();
        sent.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        sent
    }

    pub(super) fn body(&self, body: &[u8]) -> Self {
        Sent { body: body.to_vec(), ..self.clone() }
    }

    pub(super) fn url(&self, url: &str) -> Self {
        Sent { url: url.to_owned(), ..self.clone() }
    }

    pub(super) fn received(&self, unix: i64) -> Self {
        Sent { received_at: at(unix), ..self.clone() }
    }
}

#[track_caller]
pub(super) fn assert_valid(check: &Check, index: u8) {
    assert_eq!((check.verdict, check.reason.as_deref()), (Verdict::Valid, None), "{check:?}");
    assert_eq!(check.secret_index, Some(index), "{check:?}");
    assert_eq!(check.expected, None);
}

#[track_caller]
pub(super) fn assert_invalid(check: &Check, reason: &str) {
    assert_eq!((check.verdict, check.reason.as_deref()), (Verdict::Invalid, Some(reason)), "{check:?}");
    assert_eq!(check.secret_index, None);
}
