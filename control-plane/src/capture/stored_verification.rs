//! How `webhooks.verification` holds an endpoint's verification settings (never its secrets): in the form the
//! previous release reads too (docs/RUNBOOK.md, "Upgrades"). That release knows the modes `record` and `enforce`
//! only, and answers 500 for an endpoint whose stored mode it cannot read: `reject` is written as `enforce` with
//! `"reject": true` beside it (expand), which the previous release reads as `enforce` (401 to a bad signature, the
//! capture stored) and this one as `reject`. Contract, a release later: write `"mode": "reject"` itself, which this
//! reader already takes (rows written so before this form).

use hookflow_shared::api::signatures::{Verification, VerificationMode};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredVerification {
    #[serde(flatten)]
    settings: Verification,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    reject: bool,
}

impl StoredVerification {
    /// The stored form of what reads answer.
    pub fn new(view: Verification) -> Self {
        let reject = view.mode == VerificationMode::Reject;
        let mode = if reject { VerificationMode::Enforce } else { view.mode };
        Self { settings: Verification { mode, ..view }, reject }
    }

    /// What reads answer.
    pub fn into_verification(self) -> Verification {
        let mode = if self.reject { VerificationMode::Reject } else { self.settings.mode };
        Verification { mode, ..self.settings }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookflow_shared::api::signatures::SignatureScheme;
    use serde_json::json;

    fn view(mode: VerificationMode) -> Verification {
        let stored = json!({"scheme": "hmac", "secrets_count": 1, "tolerance_s": 300, "mode": "record",
                            "header": "x-signature"});
        Verification { mode, ..serde_json::from_value(stored).expect("a verification") }
    }

    #[test]
    fn reject_is_stored_as_enforce_with_a_flag_and_read_back_as_reject() {
        let stored = serde_json::to_value(StoredVerification::new(view(VerificationMode::Reject))).expect("json");
        assert_eq!((stored["mode"].clone(), stored["reject"].clone()), (json!("enforce"), json!(true)));
        assert_eq!(stored["scheme"], json!("hmac"));
        assert_eq!(stored["header"], json!("x-signature"));
        let read: StoredVerification = serde_json::from_value(stored).expect("read back");
        assert_eq!(read.into_verification(), view(VerificationMode::Reject));
    }

    /// The previous release's reader of the column: the modes it knows, unknown fields ignored.
    #[derive(Debug, PartialEq, Eq, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum PreviousMode {
        Record,
        Enforce,
    }

    #[derive(Debug, serde::Deserialize)]
    struct PreviousVerification {
        scheme: SignatureScheme,
        mode: PreviousMode,
    }

    #[test]
    fn the_previous_release_reads_a_rejecting_endpoint_as_enforcing() {
        let stored = serde_json::to_value(StoredVerification::new(view(VerificationMode::Reject))).expect("json");
        let read: PreviousVerification = serde_json::from_value(stored).expect("the previous release reads it");
        assert_eq!((read.scheme, read.mode), (SignatureScheme::Hmac, PreviousMode::Enforce));
        let unreadable = serde_json::to_value(view(VerificationMode::Reject)).expect("json");
        assert!(serde_json::from_value::<PreviousVerification>(unreadable).is_err(), "what it answered 500 for");
    }

    #[test]
    fn other_modes_are_stored_as_they_are_and_rows_with_mode_reject_still_read() {
        for mode in [VerificationMode::Record, VerificationMode::Enforce] {
            let stored = serde_json::to_value(StoredVerification::new(view(mode))).expect("json");
            assert!(stored.get("reject").is_none(), "{stored}");
            let read: StoredVerification = serde_json::from_value(stored).expect("read back");
            assert_eq!(read.into_verification().mode, mode);
        }
        let written_before = json!({"scheme": "hmac", "secrets_count": 1, "tolerance_s": 300, "mode": "reject",
                                    "header": "x-signature"});
        let read: StoredVerification = serde_json::from_value(written_before).expect("read");
        assert_eq!(read.into_verification(), view(VerificationMode::Reject));
    }
}
