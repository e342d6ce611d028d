//! What can go wrong in a command, and the exit code each failure maps to (documented in `--help`).

use hookflow_shared::api::fields::Refusal;
use std::process::ExitCode;

/// Exit codes: 0 all passed, 1 a flow failed, 2 usage or configuration, 3 network or runtime, 4 API refusal.
pub mod code {
    pub const PASSED: u8 = 0;
    pub const FLOW_FAILED: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const RUNTIME: u8 = 3;
    pub const API: u8 = 4;
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad flags, a missing credential, an unreadable file.
    #[error("{0}")]
    Usage(String),
    /// Something broke locally (a file could not be written, a task died).
    #[error("{0}")]
    Runtime(String),
    /// The service could not be reached or the connection broke.
    #[error("{0}")]
    Network(String),
    /// The service refused the request (authentication, scope, not found, invalid input).
    #[error("{message} ({status} {code})")]
    Api { status: u16, code: String, message: String },
}

impl CliError {
    pub fn usage(message: impl Into<String>) -> Self {
        CliError::Usage(message.into())
    }

    /// A value the service would refuse by its field's rule (`hookflow_shared::api::fields`), refused before any
    /// request: a usage error naming the option.
    pub fn option<T: TryFrom<V, Error = Refusal>, V>(option: &str, value: V) -> Result<T, CliError> {
        T::try_from(value).map_err(|refusal| CliError::usage(refusal.for_field(option)))
    }

    pub fn runtime(message: impl Into<String>) -> Self {
        CliError::Runtime(message.into())
    }

    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            CliError::Usage(_) => code::USAGE,
            CliError::Runtime(_) | CliError::Network(_) => code::RUNTIME,
            CliError::Api { .. } => code::API,
        })
    }

    /// Whether sending the same request again may succeed (network trouble, 5xx, 429).
    pub fn is_transient(&self) -> bool {
        match self {
            CliError::Network(_) => true,
            CliError::Api { status, .. } => *status >= 500 || *status == 429,
            CliError::Usage(_) | CliError::Runtime(_) => false,
        }
    }
}
