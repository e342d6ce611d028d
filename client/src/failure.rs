//! What a call answers instead of its success: a refusal (status and the contract's error body), a transport
//! failure, or a success whose body was not the expected type.

use hookflow_shared::error::ErrorBody;
use hookflow_shared::wire::Refusal;
use reqwest::header::HeaderMap;
use std::fmt;

/// An error answer, read whole.
#[derive(Debug, Clone)]
pub struct Refused {
    pub status: u16,
    pub headers: HeaderMap,
    /// The contract's error body; `None` when the answer carried another (a proxy's page, say).
    pub body: Option<ErrorBody>,
    /// The body as sent.
    pub text: String,
}

#[derive(Debug)]
pub enum ApiFailure {
    /// The server answered with an error status.
    Refused(Refused),
    /// No answer: connection, TLS, timeout.
    Transport(reqwest::Error),
    /// A success whose body is not the expected type.
    Decode { status: u16, error: String, text: String },
}

impl ApiFailure {
    pub(crate) async fn refused(response: reqwest::Response) -> Self {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).ok();
        ApiFailure::Refused(Refused { status, headers, body, text })
    }

    /// The answer's status; 0 when there was none.
    pub fn status(&self) -> u16 {
        match self {
            ApiFailure::Refused(refused) => refused.status,
            ApiFailure::Decode { status, .. } => *status,
            ApiFailure::Transport(_) => 0,
        }
    }

    /// The error body's `error.code`, or `<no error code>`.
    pub fn code(&self) -> &str {
        self.error_body().map_or("<no error code>", |body| body.error.code.as_str())
    }

    /// The error body's `error.message` (empty without one).
    pub fn message(&self) -> &str {
        self.error_body().map_or("", |body| body.error.message.as_str())
    }

    pub fn error_body(&self) -> Option<&ErrorBody> {
        match self {
            ApiFailure::Refused(refused) => refused.body.as_ref(),
            _ => None,
        }
    }

    /// The refusal, when the server answered one.
    pub fn as_refused(&self) -> Option<&Refused> {
        match self {
            ApiFailure::Refused(refused) => Some(refused),
            _ => None,
        }
    }

    /// The refusal as every client reads one (`Refusal::parse`).
    pub fn refusal(&self) -> Option<Refusal> {
        self.as_refused().map(|r| Refusal::parse(r.status, r.text.as_bytes()))
    }

    /// Checks an error answer: its status, its `error.code`, and that its message mentions `mentioning`.
    #[track_caller]
    pub fn assert_refused(&self, status: u16, code: &str, mentioning: &str) {
        assert_eq!((self.status(), self.code()), (status, code), "{self}");
        let message = self.message();
        assert!(message.contains(mentioning), "`{message}` does not mention `{mentioning}`");
    }
}

impl fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiFailure::Refused(Refused { status, text, .. }) => write!(f, "the server answered {status}: {text}"),
            ApiFailure::Transport(e) => write!(f, "no answer: {e}"),
            ApiFailure::Decode { status, error, text } => {
                write!(f, "the {status} answer could not be decoded ({error}): {text}")
            }
        }
    }
}

impl std::error::Error for ApiFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ApiFailure::Transport(e) => Some(e),
            _ => None,
        }
    }
}
