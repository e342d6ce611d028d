//! The API error body `{"error": {"code", "message", "request_id"}}` and the closed set of error codes.

use serde::{Deserialize, Serialize};

/// Every error code the API answers with, and the HTTP status each one goes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    Unauthorized,
    OrganizationRequired,
    OrganizationMismatch,
    InsufficientScope,
    /// A session opened with a one-time password may only change it (or end).
    PasswordChangeRequired,
    /// A cookie-authenticated request without the app's `X-Hookflow-CSRF` header.
    CsrfRequired,
    NotFound,
    MethodNotAllowed,
    InvalidRequest,
    Conflict,
    IdempotencyKeyReused,
    PayloadTooLarge,
    RateLimited,
    /// A lasting allowance is used up (organizations one person may make): 403, no retry will help.
    QuotaExceeded,
    Unavailable,
    Internal,
    /// The capture URL of an endpoint in `enforce` mode refused a request whose signature is invalid, missing or a
    /// duplicate (the capture is still stored, with its verdict).
    SignatureInvalid,
    /// A mailed one-time token (password reset, sign-up confirmation) that is unknown, used or expired.
    InvalidToken,
}

impl ErrorCode {
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::Unauthorized | ErrorCode::SignatureInvalid => 401,
            ErrorCode::OrganizationRequired | ErrorCode::InvalidRequest | ErrorCode::InvalidToken => 400,
            ErrorCode::OrganizationMismatch
            | ErrorCode::InsufficientScope
            | ErrorCode::PasswordChangeRequired
            | ErrorCode::CsrfRequired
            | ErrorCode::QuotaExceeded => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::Conflict => 409,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::IdempotencyKeyReused => 422,
            ErrorCode::RateLimited => 429,
            ErrorCode::Internal => 500,
            ErrorCode::Unavailable => 503,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::OrganizationRequired => "organization_required",
            ErrorCode::OrganizationMismatch => "organization_mismatch",
            ErrorCode::InsufficientScope => "insufficient_scope",
            ErrorCode::PasswordChangeRequired => "password_change_required",
            ErrorCode::CsrfRequired => "csrf_required",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::Conflict => "conflict",
            ErrorCode::IdempotencyKeyReused => "idempotency_key_reused",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::QuotaExceeded => "quota_exceeded",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Internal => "internal",
            ErrorCode::SignatureInvalid => "signature_invalid",
            ErrorCode::InvalidToken => "invalid_token",
        }
    }
}

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    pub code: ErrorCode,
    pub message: String,
    pub request_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_serialize_as_their_names() {
        for code in [ErrorCode::IdempotencyKeyReused, ErrorCode::OrganizationRequired, ErrorCode::Internal] {
            assert_eq!(serde_json::to_value(code).expect("ser"), serde_json::json!(code.as_str()));
        }
        assert_eq!(ErrorCode::InsufficientScope.status(), 403);
        assert_eq!(ErrorCode::Unavailable.status(), 503);
    }
}
