//! The SMTP settings as the flags give them: `smtp://host[:port]` (STARTTLS when the server offers it;
//! `?tls=required` refuses to send without it), `smtps://host[:port]` (TLS from the first byte), credentials in the
//! URL (`smtp://user:password@host`) or the password in a file, the sender's address, and a certificate to trust
//! besides the platform's (`--smtp-ca-file`, for a relay with a private CA). The password is never printed
//! (`Debug` hides it).

use std::path::Path;

/// How the connection to the SMTP server is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTls {
    /// `smtp://`: STARTTLS when the server offers it, plain otherwise.
    Opportunistic,
    /// `smtp://...?tls=required`: STARTTLS or no mail.
    Required,
    /// `smtps://`: TLS from the first byte.
    Wrapper,
}

/// Where and as whom mails are sent.
#[derive(Clone, PartialEq, Eq)]
pub struct SmtpSettings {
    pub host: String,
    pub port: u16,
    pub tls: SmtpTls,
    pub username: Option<String>,
    pub password: Option<String>,
    /// The `From` of every mail (`--smtp-from`), e.g. `hookflow <hookflow@example.com>`.
    pub from: String,
    /// A PEM certificate trusted for the SMTP server's TLS besides the platform's roots (`--smtp-ca-file`).
    pub ca_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for SmtpSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpSettings")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<hidden>"))
            .field("from", &self.from)
            .field("ca_pem", &self.ca_pem.as_ref().map(|_| "<certificate>"))
            .finish()
    }
}

impl SmtpSettings {
    /// Reads the flags: `url` (`--smtp-url`), `from` (`--smtp-from`) and the file holding the password
    /// (`--smtp-password-file`, one line; it wins over a password in the URL). Errors name the flag and never
    /// repeat the URL (it may hold a password).
    pub fn parse(url: &str, from: Option<&str>, password_file: Option<&Path>) -> Result<Self, String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("--smtp-url is not a URL: {e}"))?;
        let query: Vec<(String, String)> =
            parsed.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        let tls_option = match query.as_slice() {
            [] => None,
            [(key, value)] if key == "tls" => Some(value.as_str()),
            _ => return Err("--smtp-url takes one query option at most: tls=required".into()),
        };
        let (tls, default_port) = match (parsed.scheme(), tls_option) {
            ("smtp", None | Some("opportunistic")) => (SmtpTls::Opportunistic, 587),
            ("smtp", Some("required")) => (SmtpTls::Required, 587),
            ("smtps", None) => (SmtpTls::Wrapper, 465),
            ("smtp" | "smtps", Some(other)) => {
                return Err(format!("--smtp-url: tls={other} is not known (smtp:// takes tls=required)"));
            }
            (scheme, _) => return Err(format!("--smtp-url must be smtp:// or smtps://, not {scheme}://")),
        };
        let host = parsed.host_str().filter(|h| !h.is_empty()).ok_or("--smtp-url names no host")?;
        let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
        let decode = |s: &str| {
            form_urlencoded::parse(format!("v={}", s.replace('+', "%2B")).as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        let username = (!parsed.username().is_empty()).then(|| decode(parsed.username()));
        let mut password = parsed.password().map(decode);
        if let Some(file) = password_file {
            let text =
                std::fs::read_to_string(file).map_err(|e| format!("--smtp-password-file {}: {e}", file.display()))?;
            password = Some(text.trim_end_matches(['\n', '\r']).to_owned());
        }
        if password.is_some() && username.is_none() {
            return Err("an SMTP password needs a user name in --smtp-url (smtp://user@host)".into());
        }
        let from = from.ok_or("--smtp-url needs --smtp-from (the address mails are sent from)")?;
        from.parse::<lettre::message::Mailbox>().map_err(|e| format!("--smtp-from is not a mail address: {e}"))?;
        Ok(Self {
            host,
            port: parsed.port().unwrap_or(default_port),
            tls,
            username,
            password,
            from: from.to_owned(),
            ca_pem: None,
        })
    }

    /// Trusts the PEM certificate in `file` (`--smtp-ca-file`) for the SMTP server's TLS, besides the platform's
    /// roots; an error names the flag.
    pub fn with_ca_file(self, file: &Path) -> Result<Self, String> {
        let pem = std::fs::read(file).map_err(|e| format!("--smtp-ca-file {}: {e}", file.display()))?;
        self.with_ca_pem(pem).map_err(|e| format!("--smtp-ca-file {}: {e}", file.display()))
    }

    /// Trusts `pem` (one PEM certificate) for the SMTP server's TLS, besides the platform's roots.
    pub fn with_ca_pem(mut self, pem: Vec<u8>) -> Result<Self, String> {
        // The parser answers no certificate, not an error, for text without any.
        if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
            return Err("not a PEM certificate (no BEGIN CERTIFICATE)".to_owned());
        }
        lettre::transport::smtp::client::Certificate::from_pem(&pem)
            .map_err(|e| format!("not a PEM certificate: {e}"))?;
        self.ca_pem = Some(pem);
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_tls_ports_and_credentials() {
        let s = SmtpSettings::parse("smtp://mail.example.com", Some("hookflow <h@example.com>"), None).expect("ok");
        assert_eq!(
            (s.host.as_str(), s.port, s.tls, s.username.clone()),
            ("mail.example.com", 587, SmtpTls::Opportunistic, None)
        );
        let s =
            SmtpSettings::parse("smtps://ada:p%40ss+w@mail.example.com:2465", Some("h@example.com"), None).expect("ok");
        assert_eq!((s.port, s.tls), (2465, SmtpTls::Wrapper));
        assert_eq!((s.username.as_deref(), s.password.as_deref()), (Some("ada"), Some("p@ss+w")));
        assert!(!format!("{s:?}").contains("p@ss"), "the password is never printed");
        let s = SmtpSettings::parse("smtp://127.0.0.1:2525?tls=required", Some("h@example.com"), None).expect("ok");
        assert_eq!((s.port, s.tls), (2525, SmtpTls::Required));
    }

    #[test]
    fn a_ca_file_must_hold_a_certificate_and_is_named_in_errors() {
        let s = SmtpSettings::parse("smtps://mail.example.com", Some("h@example.com"), None).expect("ok");
        let missing = std::env::temp_dir().join(format!("smtp-ca-{}", uuid::Uuid::new_v4()));
        let error = s.clone().with_ca_file(&missing).expect_err("no such file");
        assert!(error.starts_with("--smtp-ca-file"), "{error}");
        std::fs::write(&missing, "not a certificate").expect("write");
        let error = s.with_ca_file(&missing).expect_err("not PEM");
        assert!(error.contains("--smtp-ca-file") && error.contains("PEM"), "{error}");
        let _ = std::fs::remove_file(&missing);
    }

    #[test]
    fn a_password_file_wins_and_bad_flags_are_named_without_the_password() {
        let file = std::env::temp_dir().join(format!("smtp-password-{}", uuid::Uuid::new_v4()));
        std::fs::write(&file, "from the file\n").expect("write");
        let s =
            SmtpSettings::parse("smtp://ada:inurl@mail.example.com", Some("h@example.com"), Some(&file)).expect("ok");
        assert_eq!(s.password.as_deref(), Some("from the file"));
        let _ = std::fs::remove_file(&file);
        for (url, from, needle) in [
            ("http://ada:secretpw@mail.example.com", Some("h@example.com"), "smtp://"),
            ("smtp://ada:secretpw@mail.example.com?tls=maybe", Some("h@example.com"), "tls=maybe"),
            ("smtp://ada:secretpw@mail.example.com", None, "--smtp-from"),
            ("smtp://ada:secretpw@mail.example.com", Some("not an address"), "--smtp-from"),
            ("smtp://:secretpw@mail.example.com", Some("h@example.com"), "user name"),
        ] {
            let error = SmtpSettings::parse(url, from, None).expect_err(url);
            assert!(error.contains(needle), "{error}");
            assert!(!error.contains("secretpw"), "{error}");
        }
    }
}
