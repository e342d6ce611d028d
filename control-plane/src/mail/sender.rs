//! The sender: `Mailer::send` puts a mail on a bounded queue and returns at once; a task takes mails off it and
//! delivers a few at a time over SMTP, each with a time limit and a few retries (a permanent refusal, such as an
//! unknown recipient, is not retried). A full queue refuses new mails rather than growing. `Mailer::deliver` waits
//! for the outcome (for callers that show it, such as notification channels).
//!
//! Mail goes in one of two lanes ([`Lane`]), each with its own queue and its own SMTP slots: account mail (password
//! resets, sign-up confirmations) and everything else (invitations, notifications). A flood of the second kind
//! fills only its own queue, so it never drops nor holds up a reset or a confirmation.
//!
//! Logs name the mail's subject and the outcome, never its body (which holds the one-time link).

use crate::mail::settings::{SmtpSettings, SmtpTls};
use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport as _, Message, Tokio1Executor};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// What every subject begins with.
pub const SUBJECT_PREFIX: &str = "[hookflow]";
/// Mails waiting to be sent at most, per lane; past it `send` refuses.
pub const QUEUE: usize = 1024;
/// Mails being delivered at once, per lane.
const CONCURRENT: usize = 4;

/// Which queue a mail waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Mail a person asked for about their own account (resets, sign-up confirmations): never behind other mail.
    Account,
    /// Everything else: invitations, notifications.
    Other,
}
/// Tries per mail: the first and the retries.
const ATTEMPTS: usize = 3;
/// Waits before the retries.
const BACKOFF: [Duration; ATTEMPTS - 1] = [Duration::from_secs(2), Duration::from_secs(10)];
/// How long one SMTP conversation may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest subject and body accepted (callers write short texts; this bounds what a queue can hold).
const MAX_SUBJECT: usize = 300;
const MAX_TEXT: usize = 64 * 1024;

/// Why a mail was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MailError {
    #[error("the recipient is not a mail address")]
    Recipient,
    #[error("the mail is too long")]
    TooLong,
    #[error("too many mails are waiting to be sent; try again later")]
    QueueFull,
    #[error("the server is stopping")]
    Stopped,
    /// The SMTP server refused or could not be reached (after the retries): its reason, without the mail.
    #[error("SMTP: {0}")]
    Smtp(String),
}

/// A mail on the queue.
struct Queued {
    subject: String,
    message: Message,
    outcome: Option<oneshot::Sender<Result<(), MailError>>>,
}

/// The handle every sender of mail holds (cheap to clone).
#[derive(Clone)]
pub struct Mailer {
    account: mpsc::Sender<Queued>,
    other: mpsc::Sender<Queued>,
    from: Mailbox,
    allowances: Arc<crate::mail::allowance::Allowances>,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailer").field("from", &self.from).finish_non_exhaustive()
    }
}

impl Mailer {
    /// Starts the sending task (until `shutdown`); must be called within a Tokio runtime.
    pub fn start(settings: &SmtpSettings, shutdown: CancellationToken) -> Result<Self, String> {
        let from: Mailbox = settings.from.parse().map_err(|e| format!("--smtp-from: {e}"))?;
        let transport = transport(settings)?;
        let transport = Arc::new(transport);
        let (mailer, account, other) = Self::unstarted(from);
        tokio::spawn(run(transport.clone(), account, shutdown.clone()));
        tokio::spawn(run(transport, other, shutdown));
        Ok(mailer)
    }

    /// The handle and its two queues' receiving ends (account, other), nothing taking mails off them yet.
    fn unstarted(from: Mailbox) -> (Self, mpsc::Receiver<Queued>, mpsc::Receiver<Queued>) {
        let (account, account_receiver) = mpsc::channel(QUEUE);
        let (other, other_receiver) = mpsc::channel(QUEUE);
        let allowances = Arc::default();
        (Self { account, other, from, allowances }, account_receiver, other_receiver)
    }

    /// Queues a mail to `to` in `lane`; returns at once. The subject gets the `[hookflow]` prefix.
    pub fn send(&self, lane: Lane, to: &str, subject: &str, text: String) -> Result<(), MailError> {
        let queued = self.compose(to, subject, text, None)?;
        self.enqueue(lane, queued)
    }

    /// Counts a mail about `account` asked for by `requester` (a budget key: an IPv4 address or an IPv6 /64), or
    /// false when that requester asked for as many as it may lately (see `allowance`).
    pub fn allow(&self, account: &str, requester: std::net::IpAddr) -> bool {
        self.allowances.allow(account, requester)
    }

    /// Sends a mail to `to` and waits for the outcome, retries included (up to about a minute).
    pub async fn deliver(&self, to: &str, subject: &str, text: String) -> Result<(), MailError> {
        let (tell, outcome) = oneshot::channel();
        let queued = self.compose(to, subject, text, Some(tell))?;
        self.enqueue(Lane::Other, queued)?;
        outcome.await.unwrap_or(Err(MailError::Stopped))
    }

    fn enqueue(&self, lane: Lane, queued: Queued) -> Result<(), MailError> {
        let queue = match lane {
            Lane::Account => &self.account,
            Lane::Other => &self.other,
        };
        queue.try_send(queued).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => MailError::QueueFull,
            mpsc::error::TrySendError::Closed(_) => MailError::Stopped,
        })
    }

    fn compose(
        &self,
        to: &str,
        subject: &str,
        text: String,
        outcome: Option<oneshot::Sender<Result<(), MailError>>>,
    ) -> Result<Queued, MailError> {
        let to: Mailbox = to.parse().map_err(|_| MailError::Recipient)?;
        let subject = one_line(subject);
        if subject.chars().count() > MAX_SUBJECT || text.len() > MAX_TEXT {
            return Err(MailError::TooLong);
        }
        let subject =
            if subject.starts_with(SUBJECT_PREFIX) { subject } else { format!("{} {subject}", SUBJECT_PREFIX) };
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject.clone())
            .header(ContentType::TEXT_PLAIN)
            .body(text)
            .map_err(|e| MailError::Smtp(format!("the mail could not be built: {e}")))?;
        Ok(Queued { subject, message, outcome })
    }
}

/// A subject on one line (line breaks would start headers of their own).
fn one_line(subject: &str) -> String {
    subject.split(['\r', '\n']).map(str::trim).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ")
}

fn transport(settings: &SmtpSettings) -> Result<AsyncSmtpTransport<Tokio1Executor>, String> {
    let parameters = || {
        let mut builder = TlsParameters::builder(settings.host.clone());
        if let Some(pem) = &settings.ca_pem {
            let certificate = Certificate::from_pem(pem).map_err(|e| format!("the SMTP CA certificate: {e}"))?;
            builder = builder.add_root_certificate(certificate);
        }
        builder.build().map_err(|e| format!("TLS settings for {}: {e}", settings.host))
    };
    let tls = match settings.tls {
        SmtpTls::Opportunistic => Tls::Opportunistic(parameters()?),
        SmtpTls::Required => Tls::Required(parameters()?),
        SmtpTls::Wrapper => Tls::Wrapper(parameters()?),
    };
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(settings.host.clone())
        .port(settings.port)
        .tls(tls)
        .timeout(Some(SMTP_TIMEOUT));
    if let Some(username) = &settings.username {
        builder =
            builder.credentials(Credentials::new(username.clone(), settings.password.clone().unwrap_or_default()));
    }
    Ok(builder.build())
}

/// Delivers one lane's mails, with slots of its own.
async fn run(
    transport: Arc<AsyncSmtpTransport<Tokio1Executor>>,
    mut receiver: mpsc::Receiver<Queued>,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(CONCURRENT));
    loop {
        let queued = tokio::select! {
            () = shutdown.cancelled() => return,
            queued = receiver.recv() => match queued { Some(q) => q, None => return },
        };
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let transport = transport.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let outcome = tokio::select! {
                () = shutdown.cancelled() => Err(MailError::Stopped),
                outcome = deliver(&transport, &queued.message) => outcome,
            };
            match &outcome {
                Ok(()) => tracing::info!(subject = %queued.subject, "mail sent"),
                Err(e) => tracing::warn!(subject = %queued.subject, error = %e, "mail not sent"),
            }
            if let Some(tell) = queued.outcome {
                let _ = tell.send(outcome);
            }
        });
    }
}

/// One mail, with the retries.
async fn deliver(transport: &AsyncSmtpTransport<Tokio1Executor>, message: &Message) -> Result<(), MailError> {
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(BACKOFF[attempt - 1]).await;
        }
        match tokio::time::timeout(SMTP_TIMEOUT, transport.send(message.clone())).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) if e.is_permanent() => return Err(MailError::Smtp(e.to_string())),
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => last = "the SMTP server did not answer in time".into(),
        }
    }
    Err(MailError::Smtp(last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_stay_on_one_line() {
        assert_eq!(one_line("Reset\r\nBcc: x@example.com"), "Reset Bcc: x@example.com");
    }

    #[tokio::test]
    async fn mails_are_composed_with_the_prefix_and_refused_when_bad() {
        let settings = SmtpSettings::parse("smtp://127.0.0.1:9", Some("hookflow <h@example.com>"), None).expect("ok");
        let mailer = Mailer::start(&settings, CancellationToken::new()).expect("start");
        let queued = mailer.compose("ada@example.com", "Hello", "text".into(), None).expect("composed");
        assert_eq!(queued.subject, "[hookflow] Hello");
        let queued = mailer.compose("ada@example.com", "[hookflow] Hi", "text".into(), None).expect("composed");
        assert_eq!(queued.subject, "[hookflow] Hi");
        assert_eq!(mailer.compose("not an address", "x", "y".into(), None).err(), Some(MailError::Recipient));
        assert_eq!(
            mailer.compose("a@example.com", "x", "y".repeat(MAX_TEXT + 1), None).err(),
            Some(MailError::TooLong)
        );
    }

    /// Finding 7: a flood of invitations filled the one queue, and resets were refused (`QueueFull`).
    #[test]
    fn a_full_lane_of_other_mail_never_drops_account_mail() {
        let from: Mailbox = "hookflow <h@example.com>".parse().expect("from");
        let (mailer, mut account, _other) = Mailer::unstarted(from);
        let invite = || mailer.send(Lane::Other, "invitee@example.com", "You are invited", "link".into());
        for _ in 0..QUEUE {
            invite().expect("queued");
        }
        assert_eq!(invite(), Err(MailError::QueueFull), "the invitation lane is full");
        for _ in 0..QUEUE {
            mailer.send(Lane::Account, "ada@example.com", "Reset your password", "link".into()).expect("queued");
        }
        assert_eq!(account.try_recv().expect("a reset waits").subject, "[hookflow] Reset your password");
        assert_eq!(invite(), Err(MailError::QueueFull), "still full: the lanes share nothing");
    }
}
