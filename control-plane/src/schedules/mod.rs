//! Schedules of flows (issue #50): fire times in IANA zones (`occurrences`), what a pass fires (`plan`: on time,
//! caught up, bounded), the rows and their writes (`store`, with the mirror of a flow's legacy `schedule` text),
//! and the launcher (`launcher`: one launch per occurrence across replicas, overlap skip). A scheduled execution's
//! end updates its schedule's state and writes a `schedule_transitions` row per change, in the database itself
//! (migration 20261128000055), in the transaction that records the end.

pub mod launcher;
pub mod occurrences;
pub mod plan;
pub mod store;
