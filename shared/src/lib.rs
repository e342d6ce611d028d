//! hookflow-shared: the contract both sides of hookflow speak and the pure logic they share (no I/O).

pub mod api;
pub mod error;
pub mod flow;
pub mod ids;
pub mod redacted;
pub mod role;
pub mod scope;
pub mod strict_json;
pub mod time;
pub mod token;
pub mod wire;

pub use error::{ErrorBody, ErrorCode, ErrorDetail};
pub use ids::{
    ApiKeyId, BatchId, CaptureId, CollectionId, CollectionRequestId, DeliveryId, DestinationId, ExecutionId, FlowId,
    FlowVersionId, InvitationId, JobId, OrgId, RunnerId, ScheduleId, SessionId, UserId, WebhookId,
};
pub use role::Role;
pub use scope::{Scope, ScopeSet};
pub use time::Timestamp;
