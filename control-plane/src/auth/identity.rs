//! Who a person's bearer token speaks for, whichever provider signed it, and the clock skew tolerated on the
//! times in such tokens.

use chrono::{DateTime, Utc};
use hookflow_shared::{SessionId, UserId};

/// Clock skew tolerated on `exp` and `nbf`.
pub const LEEWAY_S: u64 = 30;

/// Who a bearer token speaks for.
#[derive(Debug, Clone, Copy)]
pub struct BearerIdentity {
    pub user_id: UserId,
    /// The built-in session, if the token is the built-in provider's.
    pub session_id: Option<SessionId>,
    pub expires_at: DateTime<Utc>,
    pub password_change_required: bool,
    /// An external provider's token: its SHA-256, by which signing out revokes it.
    pub external_token: Option<[u8; 32]>,
}
