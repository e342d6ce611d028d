//! Who a capture URL belongs to: an endpoint, or an execution (its own URL). Beneath the capture path's other
//! modules, which all name it.

use hookflow_shared::{ExecutionId, WebhookId};

/// Who a capture URL belongs to: an endpoint, or an execution (its own URL, `{{execution.capture_url}}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureTarget {
    Webhook(WebhookId),
    Execution(ExecutionId),
}
