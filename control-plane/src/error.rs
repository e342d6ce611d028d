//! `ApiError`, the control plane's one error type, and what gives every error response the
//! contract's body `{"error": {"code", "message", "request_id"}}` — ours and axum's own (unknown route, 405, 413).

use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hookflow_shared::{ErrorBody, ErrorCode, ErrorDetail, Scope};

/// An error as the API answers it. Internal causes are logged where they happen, never sent.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub retry_after_s: Option<u64>,
    /// The status when it is not the code's own (`quota_exceeded` on the capture path: 429).
    pub status: Option<u16>,
}

/// What handlers answer.
pub type ApiResult<T> = Result<T, ApiError>;

/// What a create handler answers: 201 with the new resource.
pub type Created<T> = ApiResult<(StatusCode, axum::Json<T>)>;

/// Seconds a client should wait when the database is unreachable.
const UNAVAILABLE_RETRY_S: u64 = 5;

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), retry_after_s: None, status: None }
    }

    pub fn unauthorized() -> Self {
        Self::new(ErrorCode::Unauthorized, "missing or invalid credentials")
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(ErrorCode::NotFound, format!("{what} not found"))
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }

    pub fn insufficient_scope(scope: Scope) -> Self {
        Self::new(ErrorCode::InsufficientScope, format!("this operation needs the scope `{scope}`"))
    }

    pub fn unavailable() -> Self {
        Self {
            code: ErrorCode::Unavailable,
            message: "the database is unavailable; retry shortly".into(),
            retry_after_s: Some(UNAVAILABLE_RETRY_S),
            status: None,
        }
    }

    /// Whether this is the database-unavailable answer (retrying at once would only wait again).
    pub fn is_unavailable(&self) -> bool {
        self.code == ErrorCode::Unavailable
    }

    pub fn internal() -> Self {
        Self::new(ErrorCode::Internal, "internal error; the server log has details under this request id")
    }

    /// An internal error whose cause is logged here and never sent.
    pub fn internal_because(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::internal()
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code.as_str())
    }
}

/// Serializes a value of ours to JSON; a failure is an internal error (logged), never empty data.
pub fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> ApiResult<serde_json::Value> {
    serde_json::to_value(value).map_err(|e| ApiError::internal_because(format!("serializing failed: {e}")))
}

/// As [`to_json`], as text.
pub fn to_json_string<T: serde::Serialize + ?Sized>(value: &T) -> ApiResult<String> {
    serde_json::to_string(value).map_err(|e| ApiError::internal_because(format!("serializing failed: {e}")))
}

/// As [`to_json`], as bytes.
pub fn to_json_bytes<T: serde::Serialize + ?Sized>(value: &T) -> ApiResult<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| ApiError::internal_because(format!("serializing failed: {e}")))
}

/// A unique violation as 409 with `message` (a taken name, a repeated member); any other error as itself.
pub fn conflict_on_unique(error: sqlx::Error, message: &str) -> ApiError {
    match &error {
        sqlx::Error::Database(db) if db.code().as_deref() == Some("23505") => ApiError::conflict(message.to_owned()),
        _ => error.into(),
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> Self {
        // Text PostgreSQL cannot hold (U+0000 in text or jsonb): the client's input, not the server's fault.
        if let sqlx::Error::Database(db) = &error
            && matches!(db.code().as_deref(), Some("22021" | "22P05"))
        {
            return Self::invalid("the request holds a NUL character (U+0000), which cannot be stored");
        }
        if is_unavailable(&error) {
            tracing::warn!(error = %error, "database unavailable");
            Self::unavailable()
        } else {
            tracing::error!(error = %error, "database error");
            Self::internal()
        }
    }
}

/// The part of an error response that the body middleware turns into the JSON body.
#[derive(Debug, Clone)]
struct ErrorMark {
    code: ErrorCode,
    message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status.unwrap_or(self.code.status());
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = status.into_response();
        if let Some(seconds) = self.retry_after_s {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response.extensions_mut().insert(ErrorMark { code: self.code, message: self.message });
        response
    }
}

/// Marks a response to be sent exactly as built, error status or not (an endpoint's custom capture answer).
#[derive(Debug, Clone, Copy)]
pub struct Verbatim;

/// Writes the error body, with the request id, into an error response that lacks a JSON body (the envelope calls
/// it for every answer; `method` and `path` name an unknown route or a refused method in the message).
pub fn with_error_body(response: Response, request_id: &str, method: &Method, path: &str) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let mut response = response;
    if response.extensions().get::<Verbatim>().is_some() {
        return response;
    }
    let (code, message) = match response.extensions_mut().remove::<ErrorMark>() {
        Some(mark) => (mark.code, mark.message),
        None if is_json(&response) => return response,
        None => match status {
            StatusCode::NOT_FOUND => (ErrorCode::NotFound, format!("no route for {method} {path}")),
            StatusCode::METHOD_NOT_ALLOWED => {
                (ErrorCode::MethodNotAllowed, format!("{method} is not allowed on {path}"))
            }
            StatusCode::PAYLOAD_TOO_LARGE => (ErrorCode::PayloadTooLarge, "request body too large".into()),
            StatusCode::REQUEST_TIMEOUT | StatusCode::SERVICE_UNAVAILABLE => {
                (ErrorCode::Unavailable, "the server is busy; retry shortly".into())
            }
            s if s.is_server_error() => (ErrorCode::Internal, "internal error".into()),
            _ => (ErrorCode::InvalidRequest, status.canonical_reason().unwrap_or("bad request").to_owned()),
        },
    };
    let body = ErrorBody { error: ErrorDetail { code, message, request_id: request_id.to_owned() } };
    let (mut parts, _) = response.into_parts();
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    parts.headers.remove(header::CONTENT_LENGTH);
    let bytes = match serde_json::to_vec(&body) {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::error!(error = %e, "an error body cannot be serialized");
            br#"{"error":{"code":"internal","message":"internal error","request_id":""}}"#.to_vec()
        }
    };
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// Whether an error means the database cannot be reached or cannot write now (answered 503), rather than a failed
/// statement: connection trouble, shutdown and recovery, too many connections, a statement over its time limit, and
/// a read-only transaction (a primary demoted under a connection, during a failover). A protocol error is the
/// connection's trouble too: a connection cut while it was being opened (`db::fence` cuts those to a frozen host)
/// reads its end as a zero byte where PostgreSQL's answer to the TLS question belongs.
pub fn is_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // Connection trouble, shutdown, too many connections, a cancelled statement, a read-only standby, and a
            // deadlock or serialization failure (the statement's neighbour won; trying again succeeds).
            code.starts_with("08")
                || code.starts_with("57P")
                || matches!(code.as_ref(), "53300" | "57014" | "25006" | "40P01" | "40001")
        }),
        _ => false,
    }
}

/// Whether a statement was cancelled (its statement timeout, most often): a caller that set a timeout of its own
/// for one statement (a trigger's match) tells it from an unavailable database with this.
pub fn is_statement_timeout(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.code().as_deref() == Some("57014"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn connection_trouble_is_unavailable_and_a_bad_statement_is_not() {
        use super::is_unavailable;
        let io = sqlx::Error::Io(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused"));
        assert!(is_unavailable(&io) && is_unavailable(&sqlx::Error::PoolTimedOut));
        assert!(is_unavailable(&sqlx::Error::WorkerCrashed));
        // What sqlx says of a connection cut while it was being opened (a frozen primary's, cut by `db::fence`).
        let cut = sqlx::Error::Protocol("unexpected response from SSLRequest: 0x00".into());
        assert!(is_unavailable(&cut), "a connection cut while opening is unavailable, not internal");
        assert!(!is_unavailable(&sqlx::Error::RowNotFound));
    }
}
