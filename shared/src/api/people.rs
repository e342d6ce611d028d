//! People (API.md section 2, Auth and Administration): sign-in, sessions, passwords, organizations and members.

use crate::api::fields::{Email, Name};
use crate::ids::{InvitationId, OrgId, UserId};
use crate::role::Role;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// `POST /auth/sessions`.
#[derive(Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SignIn {
    #[schema(schema_with = crate::api::rules::email)]
    pub email: Email,
    #[schema(max_length = 1024)]
    pub password: String,
}

impl std::fmt::Debug for SignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignIn").field("email", &self.email).finish_non_exhaustive()
    }
}

/// `POST /auth/sessions/refresh`: the refresh token in the body, or (the app) in the `hookflow_refresh` cookie.
#[derive(Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Refresh {
    pub refresh_token: Option<String>,
}

impl std::fmt::Debug for Refresh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Refresh { .. }")
    }
}

/// A person as the API shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct User {
    pub id: UserId,
    pub email: String,
}

/// `POST /auth/sessions` and `/auth/sessions/refresh` answers.
#[derive(Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SessionTokens {
    /// A JWT for `Authorization: Bearer`, valid until `expires_at`.
    pub access_token: String,
    /// Single use: refreshing answers a new one. Null when it was set in the `hookflow_refresh` cookie instead.
    pub refresh_token: Option<String>,
    pub expires_at: Timestamp,
    pub user: User,
    /// Signed in with a one-time password: only `PUT /auth/password`, `GET` and `DELETE /auth/session` work
    /// until it is changed.
    pub password_change_required: bool,
}

impl std::fmt::Debug for SessionTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionTokens").field("user", &self.user).field("expires_at", &self.expires_at).finish()
    }
}

/// An organization the person belongs to, with their role there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OrganizationRole {
    pub id: OrgId,
    pub name: String,
    pub role: Role,
}

/// `GET /auth/session`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SessionInfo {
    pub user: User,
    pub organizations: Vec<OrganizationRole>,
    /// When the access token presented ends.
    pub expires_at: Timestamp,
    pub password_change_required: bool,
}

/// `PUT /auth/password`.
#[derive(Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangePassword {
    #[schema(max_length = 1024)]
    pub current_password: String,
    /// 12 to 1024 characters.
    #[schema(min_length = 12, max_length = 1024)]
    pub new_password: String,
}

impl std::fmt::Debug for ChangePassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChangePassword { .. }")
    }
}

/// `POST /auth/signup` (when the operator enabled it).
#[derive(Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Signup {
    #[schema(schema_with = crate::api::rules::email)]
    pub email: Email,
    #[schema(min_length = 12, max_length = 1024)]
    pub password: String,
    #[schema(schema_with = crate::api::rules::name)]
    pub organization_name: Name,
}

impl std::fmt::Debug for Signup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signup").field("email", &self.email).finish_non_exhaustive()
    }
}

/// `POST /auth/signup` answer.
#[derive(Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SignedUp {
    pub user: User,
    pub organization: OrganizationRole,
    pub access_token: String,
    pub refresh_token: Option<String>,
    pub expires_at: Timestamp,
}

impl std::fmt::Debug for SignedUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedUp").field("user", &self.user).field("organization", &self.organization).finish()
    }
}

/// `POST /organizations`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateOrganization {
    #[schema(schema_with = crate::api::rules::name)]
    pub name: String,
}

/// One entry of `GET /organization/members`: a member, or an invitation waiting for its person.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Member {
    /// Null for an invitation.
    pub user_id: Option<UserId>,
    /// The invitation's id (for `DELETE /organization/invitations/{id}`); null for a member.
    pub invitation_id: Option<InvitationId>,
    pub email: String,
    pub role: Role,
    /// `active`, or `invited` (waiting for someone to accept its link; an email never binds by itself).
    pub status: String,
    pub created_at: Timestamp,
    /// When an invitation stops working; null for a member.
    pub expires_at: Option<Timestamp>,
}

/// `POST /organization/members` answer: the invitation and its link, shown this once. The answer is the same
/// whether or not someone has an account with the email.
#[derive(Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CreatedInvitation {
    pub invitation_id: InvitationId,
    /// Where the link is meant to go (the link works for whoever opens it: share it with that person only).
    pub email: String,
    pub role: Role,
    /// Always `invited`.
    pub status: String,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    /// The app's address that accepts the invitation: `<public URL>/#/invite/<token>`. Single use; only a hash of
    /// the token is stored.
    pub invite_url: String,
    /// The invitation's token (`hfi_...`), for `POST /auth/invitations/accept`.
    pub token: String,
    /// Whether the link was also mailed to `email`: false without SMTP, past the organization's invitation mail
    /// budget (50 per hour), or when the mail could not be queued. The link works either way: share it yourself.
    #[serde(default)]
    pub mailed: bool,
}

impl std::fmt::Debug for CreatedInvitation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreatedInvitation").field("invitation_id", &self.invitation_id).finish_non_exhaustive()
    }
}

/// `POST /auth/invitations/accept`.
#[derive(Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AcceptInvitation {
    /// The invitation's token (the part of its link after `#/invite/`).
    #[schema(max_length = 64)]
    pub token: String,
}

impl std::fmt::Debug for AcceptInvitation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AcceptInvitation { .. }")
    }
}

/// `POST /auth/identities`: an external provider's access token to link to the signed-in account.
#[derive(Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkIdentity {
    #[schema(max_length = 16384)]
    pub token: String,
}

impl std::fmt::Debug for LinkIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkIdentity { .. }")
    }
}

/// `POST /auth/identities` answer: the external identity now linked to the account.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LinkedIdentity {
    pub issuer: String,
    pub subject: String,
}

/// `POST /organization/members`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddMember {
    #[schema(schema_with = crate::api::rules::email)]
    pub email: Email,
    pub role: Role,
}

/// `PATCH /organization/members/{user_id}`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMember {
    pub role: Role,
}

/// `GET /.well-known/jwks.json`: the built-in provider's published signing keys.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Jwks {
    pub keys: Vec<Jwk>,
}

/// One Ed25519 public key (RFC 8037).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Jwk {
    /// Always `OKP`.
    pub kty: String,
    /// Always `Ed25519`.
    pub crv: String,
    /// Always `EdDSA`.
    pub alg: String,
    /// Always `sig`.
    #[serde(rename = "use")]
    pub use_: String,
    /// The key id tokens name in their header.
    pub kid: String,
    /// The public key, base64url without padding.
    pub x: String,
}

/// `POST /auth/password-reset`: asks for a mail with a one-time link to choose a new password.
#[derive(Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordResetRequest {
    #[schema(schema_with = crate::api::rules::email)]
    pub email: Email,
}

impl std::fmt::Debug for PasswordResetRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PasswordResetRequest").finish_non_exhaustive()
    }
}

/// `POST /auth/password-reset`'s answer: the same whether or not an account has the email.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PasswordResetRequested {
    /// Always `requested`.
    #[schema(example = "requested")]
    pub status: String,
}

/// `POST /auth/password-reset/confirm`: the mailed token and the new password.
#[derive(Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordResetConfirm {
    /// The token of the mailed link (the part after `#/reset-password/`).
    #[schema(max_length = 64)]
    pub token: String,
    #[schema(min_length = 12, max_length = 1024)]
    pub password: String,
}

impl std::fmt::Debug for PasswordResetConfirm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PasswordResetConfirm { .. }")
    }
}

/// `POST /auth/signup/confirm`: the mailed token of a sign-up.
#[derive(Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SignupConfirm {
    /// The token of the mailed link (the part after `#/signup/confirm/`).
    #[schema(max_length = 64)]
    pub token: String,
}

impl std::fmt::Debug for SignupConfirm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignupConfirm { .. }")
    }
}

/// `POST /auth/signup` with mail on: the same answer whether or not the email has an account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SignupPending {
    /// Always `confirmation_sent`.
    #[schema(example = "confirmation_sent")]
    pub status: String,
}
