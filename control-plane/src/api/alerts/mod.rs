//! Monitors (issue #50), alerts: the organization's notification channels (`channels`) and the alerts sent to
//! them (`list`), and the alert rules (`rules`). Sending is `crate::alerts`' (a process), from the `alerts` rows written here and by it.

pub mod channels;
pub mod list;
pub mod rules;

use crate::state::AppState;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(channels::create_channel, channels::list_channels))
        .routes(routes!(channels::get_channel, channels::update_channel, channels::delete_channel))
        .routes(routes!(channels::test_channel))
        .routes(routes!(list::list_alerts))
        .routes(routes!(rules::create_rule, rules::list_rules))
        .routes(routes!(rules::delete_rule))
}
