//! Which occurrences of a due schedule fire now: those not yet fired whose time has come, each at most once and in
//! order. An occurrence fires when its time came less than the window ago: the on-time grace (a pass runs about
//! every second, so an occurrence is normally seconds late) or, when longer, the schedule's `catch_up_s`. Older
//! ones (a server that was down longer) are passed over.

use crate::schedules::occurrences::ZonedCron;
use chrono::{DateTime, TimeDelta, Utc};

/// At most this many occurrences of one schedule fire in one pass; the rest fire in the next passes, in order.
pub const MAX_PER_PASS: usize = 20;

/// What a pass does with one due schedule.
#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    /// Occurrences to fire now, oldest first.
    pub fire: Vec<DateTime<Utc>>,
    /// The next occurrence not yet fired (none: the pattern never matches again).
    pub next_at: Option<DateTime<Utc>>,
}

/// Plans a schedule whose next unfired occurrence is `next_at` (none: never computed; then nothing fires and the
/// first occurrence after `now` is next).
pub fn plan(cron: &ZonedCron, next_at: Option<DateTime<Utc>>, now: DateTime<Utc>, window: TimeDelta) -> Plan {
    let Some(next_at) = next_at else {
        return Plan { fire: Vec::new(), next_at: cron.next_after(now).map(|t| t.to_utc()) };
    };
    // Occurrences older than the window are passed over without being walked one by one.
    let oldest = now - window;
    let mut cursor = if next_at < oldest { cron.first_from(oldest).map(|t| t.to_utc()) } else { Some(next_at) };
    let mut fire = Vec::new();
    while let Some(at) = cursor {
        if at > now || fire.len() == MAX_PER_PASS {
            break;
        }
        fire.push(at);
        cursor = cron.next_after(at).map(|t| t.to_utc());
    }
    Plan { fire, next_at: cursor }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).expect("time").with_timezone(&Utc)
    }

    #[test]
    fn on_time_occurrence_fires_once_and_moves_on() {
        let cron = ZonedCron::parse("*/1 * * * *", "Europe/Paris").expect("valid");
        let at = utc("2026-11-22T10:20:00Z");
        let plan = plan(&cron, Some(at), at + TimeDelta::milliseconds(300), TimeDelta::seconds(10));
        assert_eq!(plan.fire, [at]);
        assert_eq!(plan.next_at, Some(utc("2026-11-22T10:21:00Z")));
    }

    #[test]
    fn catch_up_fires_missed_occurrences_in_the_window_in_order() {
        let cron = ZonedCron::parse("*/1 * * * *", "UTC").expect("valid");
        let next_at = utc("2026-11-22T10:00:00Z");
        let now = utc("2026-11-22T10:03:30Z");
        let caught = plan(&cron, Some(next_at), now, TimeDelta::seconds(600));
        let expected = ["10:00", "10:01", "10:02", "10:03"].map(|t| utc(&format!("2026-11-22T{t}:00Z")));
        assert_eq!(caught.fire, expected);
        assert_eq!(caught.next_at, Some(utc("2026-11-22T10:04:00Z")));
        // A window shorter than the downtime keeps only the recent ones; the grace alone keeps none of these.
        assert_eq!(plan(&cron, Some(next_at), now, TimeDelta::seconds(100)).fire, expected[2..]);
        let none = plan(&cron, Some(next_at), now, TimeDelta::seconds(10));
        assert!(none.fire.is_empty());
        assert_eq!(none.next_at, Some(utc("2026-11-22T10:04:00Z")));
    }

    #[test]
    fn a_long_window_fires_in_bounded_passes() {
        let cron = ZonedCron::parse("* * * * * *", "UTC").expect("valid");
        let now = utc("2026-11-22T10:00:00Z");
        let first = plan(&cron, Some(now - TimeDelta::hours(2)), now, TimeDelta::seconds(86_400));
        assert_eq!(first.fire.len(), MAX_PER_PASS);
        assert_eq!(first.next_at, Some(now - TimeDelta::hours(2) + TimeDelta::seconds(MAX_PER_PASS as i64)));
    }

    #[test]
    fn never_computed_fires_nothing() {
        let cron = ZonedCron::parse("0 * * * *", "UTC").expect("valid");
        let now = utc("2026-11-22T10:20:00Z");
        assert_eq!(
            plan(&cron, None, now, TimeDelta::seconds(600)),
            Plan { fire: Vec::new(), next_at: Some(utc("2026-11-22T11:00:00Z")) }
        );
    }
}
