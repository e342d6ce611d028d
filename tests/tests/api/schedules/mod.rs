//! Schedules of flows (issue #50): fire times across daylight-saving changes through the preview, CRUD with
//! validation, scopes and isolation, the legacy `schedule` text as the first schedule, and scheduled runs on a real
//! runner (environment, variables, labels), state transitions, overlap skip and catch-up after downtime; the app.

mod app;
mod crud;
mod runs;
