//! The checks on settings, and what never shows a secret.

use super::{Sent, settings, verifier};
use crate::signature::{SettingsError, Verifier};
use hookflow_shared::api::signatures::{
    HmacAlgorithm, MAX_SECRET_BYTES, SignatureEncoding, SignatureScheme, Verdict, VerificationSettings,
};

#[track_caller]
fn refused(settings: &VerificationSettings, field: &str, message: &str) -> SettingsError {
    let error = Verifier::new(settings).expect_err("refused");
    assert_eq!((error.field.as_str(), error.message.as_str()), (field, message));
    error
}

#[test]
fn secrets_one_or_two_not_empty_not_too_long() {
    refused(
        &settings(SignatureScheme::Stripe, &[]),
        "verification.secrets",
        "give one secret, or two during a rotation",
    );
    let three = settings(SignatureScheme::Stripe, &["a", "b", "c"]);
    refused(&three, "verification.secrets", "give one secret, or two during a rotation");
    refused(&settings(SignatureScheme::Github, &["a", ""]), "verification.secrets[1]", "must not be empty");
    refused(&settings(SignatureScheme::Github, &[" \t"]), "verification.secrets[0]", "must not be empty");
    let long = "k".repeat(MAX_SECRET_BYTES + 1);
    refused(&settings(SignatureScheme::Github, &[&long]), "verification.secrets[0]", "must be at most 1024 bytes");
    verifier(&settings(SignatureScheme::Github, &[&long[1..]]));
    for scheme in SignatureScheme::ALL {
        let secret = match scheme {
            SignatureScheme::StandardWebhooks => "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned(),
            SignatureScheme::Discord => "ab".repeat(32),
            _ => "a secret".to_owned(),
        };
        let mut settings = settings(scheme, &[&secret]);
        if scheme == SignatureScheme::Hmac {
            settings.header = Some("X-Signature".into());
        }
        assert_eq!(verifier(&settings).scheme(), scheme);
    }
}

#[test]
fn scheme_secret_formats() {
    let standard = |secret| settings(SignatureScheme::StandardWebhooks, &[secret]);
    let message = "must be whsec_ followed by the key in base64";
    for secret in ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_not base64!", "WHSEC_MfKQ9r8G"] {
        let error = refused(&standard(secret), "verification.secrets[0]", message);
        assert!(!error.message.contains(secret) || secret == "whsec_");
    }
    verifier(&standard("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"));
    verifier(&standard("whsec_c3RhbmRhcmQtd2ViaG9va3Mta2V5LW9uZSE"));
    let discord = |secret: &str| settings(SignatureScheme::Discord, &["00".repeat(32).as_str(), secret]);
    let message = "must be the application's Ed25519 public key: 64 hex characters";
    for secret in ["ab".repeat(31), "ab".repeat(33), "zz".repeat(32)] {
        refused(&discord(&secret), "verification.secrets[1]", message);
    }
}

#[test]
fn tolerance_and_the_hmac_options() {
    let mut stripe = settings(SignatureScheme::Stripe, &["s"]);
    stripe.tolerance_s = 604_801;
    refused(&stripe, "verification.tolerance_s", "must be at most 604800 seconds");
    stripe.tolerance_s = 604_800;
    verifier(&stripe);
    type Set = fn(&mut VerificationSettings);
    let options: [(&str, Set); 6] = [
        ("header", |s| s.header = Some("X-Sig".into())),
        ("algorithm", |s| s.algorithm = Some(HmacAlgorithm::Sha256)),
        ("encoding", |s| s.encoding = Some(SignatureEncoding::Hex)),
        ("prefix", |s| s.prefix = Some(String::new())),
        ("timestamp_header", |s| s.timestamp_header = Some("X-T".into())),
        ("separator", |s| s.separator = Some(".".into())),
    ];
    for (name, set) in options {
        let mut github = settings(SignatureScheme::Github, &["s"]);
        set(&mut github);
        refused(&github, &format!("verification.{name}"), "only with the scheme hmac");
    }
    let hmac = |f: fn(&mut VerificationSettings)| {
        let mut s = settings(SignatureScheme::Hmac, &["s"]);
        s.header = Some("X-Sig".into());
        f(&mut s);
        s
    };
    refused(&hmac(|s| s.header = None), "verification.header", "required with the scheme hmac");
    let name = "must be a header name: 1 to 200 letters, digits or !#$%&'*+-.^_`|~";
    refused(&hmac(|s| s.header = Some("X Sig".into())), "verification.header", name);
    refused(&hmac(|s| s.header = Some(String::new())), "verification.header", name);
    refused(&hmac(|s| s.header = Some("x".repeat(201))), "verification.header", name);
    refused(&hmac(|s| s.timestamp_header = Some("X-T:".into())), "verification.timestamp_header", name);
    refused(&hmac(|s| s.separator = Some(":".into())), "verification.separator", "only with timestamp_header");
    refused(&hmac(|s| s.prefix = Some("p".repeat(101))), "verification.prefix", "must be at most 100 bytes");
    verifier(&hmac(|s| {
        s.timestamp_header = Some("X-T".into());
        s.separator = Some(String::new());
        s.prefix = Some("p".repeat(100));
    }));
}

#[test]
fn a_candidate_secret_replaces_the_stored_ones() {
    let stored = verifier(&settings(SignatureScheme::Github, &["stored-one", "stored-two"]));
    let signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    let sent = Sent::new(&[("X-Hub-Signature-256", signature)], b"Hello, World!");
    assert_eq!(sent.check(&stored).verdict, Verdict::Invalid);
    let candidate = stored.with_secret("It's a Secret to Everybody").expect("a candidate");
    assert_eq!((sent.check(&candidate).verdict, sent.check(&candidate).secret_index), (Verdict::Valid, Some(0)));
    assert_eq!(candidate.scheme(), SignatureScheme::Github);
    let error = stored.with_secret("").expect_err("refused");
    assert_eq!((error.field.as_str(), error.message.as_str()), ("secret", "must not be empty"));
    let standard = verifier(&settings(SignatureScheme::StandardWebhooks, &["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]));
    let error = standard.with_secret("hunter2-candidate").expect_err("refused");
    assert_eq!(error.field, "secret");
    assert!(!error.to_string().contains("hunter2"), "{error}");
}

#[test]
fn no_secret_shows_in_debug_or_errors() {
    let secrets = ["whsec_c3RhbmRhcmQtd2ViaG9va3Mta2V5LW9uZSE=", "whsec_c3RhbmRhcmQtd2ViaG9va3Mta2V5LXR3byE="];
    let standard = verifier(&settings(SignatureScheme::StandardWebhooks, &secrets));
    let debug = format!("{standard:?}");
    assert_eq!(debug, "Verifier { scheme: \"standard_webhooks\", secrets: 2, tolerance_s: 300, .. }");
    for secret in secrets {
        assert!(!debug.contains(secret) && !debug.contains(&secret[6..14]));
    }
    let bad = ["whsec_!!hunter2!!", "hunter2 plain", &"h".repeat(2000)];
    for secret in bad {
        let error = Verifier::new(&settings(SignatureScheme::StandardWebhooks, &[secret])).expect_err("refused");
        let shown = format!("{error:?} {error}");
        assert!(!shown.contains("hunter2") && !shown.contains("hhhh"), "{shown}");
    }
    let error = Verifier::new(&settings(SignatureScheme::Discord, &["hunter2"])).expect_err("refused");
    assert!(!format!("{error:?} {error}").contains("hunter2"));
}
