//! Tests of the schemes: provider-published examples, and vectors computed independently with Python's `hmac`,
//! `hashlib` and `base64` (each constant shows the one-liner that made it, run after
//! `import hmac, hashlib, base64; BODY = b'{"id":"evt_1","type":"ping"}'; T = b"1700000000"`).
//!
//! [`Suite`] runs what every scheme must do: valid, a body changed by one byte, a wrong secret, a rotation, the
//! `expected` hint, a missing header, a malformed header, timestamps past and future; then each file adds what
//! is particular to its schemes.

mod body;
mod discord;
mod generic;
mod settings;
mod slack;
mod standard_webhooks;
mod stripe;
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
    VerificationSettings {
        scheme,
        secrets: secrets.iter().map(|s| s.to_string()).collect(),
        tolerance_s: 300,
        mode: Default::default(),
        header: None,
        algorithm: None,
        encoding: None,
        prefix: None,
        timestamp_header: None,
        separator: None,
    }
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

/// What every scheme must do, given two secrets and a message signed with each.
pub(super) struct Suite {
    /// The settings, whose secrets each step replaces.
    pub settings: VerificationSettings,
    pub secrets: [String; 2],
    /// A well-formed secret that signed neither message.
    pub wrong: String,
    /// The same message signed with the first and with the second secret.
    pub signed: [Sent; 2],
    pub signature_header: &'static str,
    /// A header value that cannot be read, and the start of its reason.
    pub malformed: (&'static str, &'static str, &'static str),
    pub no_match: &'static str,
    /// The message signs [`T`] as its timestamp.
    pub timed: bool,
    /// The hex SHA-256 of the signed bytes and the first 8 characters of the first secret's signature.
    pub expected: Option<(&'static str, &'static str)>,
}

impl Suite {
    fn verifier(&self, secrets: &[&String]) -> Verifier {
        let secrets = secrets.iter().map(|s| s.to_string()).collect();
        verifier(&VerificationSettings { secrets, ..self.settings.clone() })
    }

    pub(super) fn run(&self) {
        let [a, b] = &self.signed;
        let one = self.verifier(&[&self.secrets[0]]);
        let both = self.verifier(&[&self.secrets[0], &self.secrets[1]]);
        assert_valid(&a.check(&one), 0);

        let mut changed = a.body.clone();
        *changed.last_mut().expect("a body") ^= 1;
        assert_invalid(&a.body(&changed).check(&one), self.no_match);
        assert_invalid(&a.check(&self.verifier(&[&self.wrong])), self.no_match);

        assert_valid(&a.check(&both), 0);
        assert_valid(&b.check(&both), 1);
        let check = b.check(&one);
        assert_invalid(&check, self.no_match);
        let expected = check.expected.map(|e| (e.signed_content_sha256, e.signature_prefix));
        assert_eq!(expected, self.expected.map(|(s, p)| (s.to_owned(), p.to_owned())));

        let missing = a.without(self.signature_header).check(&one);
        assert_eq!(missing.verdict, Verdict::Missing);
        assert_eq!(missing.reason, Some(format!("missing header {}", self.signature_header)));
        let (name, value, reason) = self.malformed;
        let check = a.with(name, value).check(&one);
        assert_eq!(check.verdict, Verdict::Invalid, "{check:?}");
        assert!(check.reason.as_deref().is_some_and(|r| r.starts_with(reason)), "{check:?}");

        if self.timed {
            assert_valid(&a.received(T + 300).check(&one), 0);
            assert_valid(&a.received(T - 300).check(&one), 0);
            let old = "timestamp outside the tolerance of 300 s (301 s old)";
            assert_invalid(&a.received(T + 301).check(&one), old);
            let future = "timestamp outside the tolerance of 300 s (301 s in the future)";
            assert_invalid(&a.received(T - 301).check(&one), future);
        } else {
            assert_valid(&a.received(T + 86_400 * 365).check(&one), 0);
        }

        let debug = format!("{both:?}");
        assert!(self.secrets.iter().all(|s| !debug.contains(s.as_str())), "{debug}");
    }
}
