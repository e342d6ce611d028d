//! Mail: the server's SMTP settings (`--smtp-url`, `--smtp-from`, `--smtp-password-file`) and the sender that
//! delivers mails from a bounded queue with a few retries, so no request waits on SMTP. Every subject begins
//! `[hookflow]`; what a mail says is its caller's, and carries no secret but the one-time link it exists for.

pub mod allowance;
pub mod sender;
pub mod settings;

pub use sender::{Lane, MailError, Mailer, SUBJECT_PREFIX};
pub use settings::{SmtpSettings, SmtpTls};
