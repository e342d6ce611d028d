//! Fire times of a cron expression in an IANA time zone, daylight-saving changes handled as cron users expect:
//! a local time the clock skips does not fire (a fixed `30 2 * * *` has no run on the day 02:30 does not exist),
//! a local time the clock passes twice fires once (its first instant), and interval patterns (`*/15 * * * *`) keep
//! firing on every real instant that matches.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use chrono_tz::Tz;
use std::str::FromStr as _;

/// A parsed cron expression and the zone it is read in.
#[derive(Debug, Clone)]
pub struct ZonedCron {
    cron: croner::Cron,
    zone: Tz,
}

/// How many non-matching answers (times past a skipped local time) one search steps over before giving up.
const MAX_SKIPS: usize = 16;

impl ZonedCron {
    /// Parses `cron` (5 fields, or 6 with seconds first) and the zone's IANA name; the error names which is wrong.
    pub fn parse(cron: &str, timezone: &str) -> Result<Self, (&'static str, String)> {
        let zone = parse_zone(timezone).map_err(|e| ("timezone", e))?;
        let parsed = croner::Cron::from_str(cron.trim())
            .map_err(|e| ("cron", format!("`{cron}` is not a cron expression: {e}")))?;
        Ok(ZonedCron { cron: parsed, zone })
    }

    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The first fire time strictly after `after`, or none (a pattern that never matches again).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Tz>> {
        let mut cursor = after.with_timezone(&self.zone);
        for _ in 0..MAX_SKIPS {
            let next = self.cron.find_next_occurrence(&cursor, false).ok()?;
            // croner moves a fixed time that falls in a gap to the first instant after it; that instant's wall
            // clock is not the pattern's, so it is skipped.
            if self.cron.is_time_matching(&next).unwrap_or(false) {
                return Some(next);
            }
            cursor = next;
        }
        None
    }

    /// The first fire time at or after `from`.
    pub fn first_from(&self, from: DateTime<Utc>) -> Option<DateTime<Tz>> {
        self.next_after(from - chrono::TimeDelta::nanoseconds(1))
    }

    /// Up to `count` fire times strictly after `after`, in order.
    pub fn after(&self, after: DateTime<Utc>, count: usize) -> Vec<DateTime<Tz>> {
        let mut out = Vec::with_capacity(count.min(128));
        let mut cursor = after;
        while out.len() < count {
            let Some(next) = self.next_after(cursor) else { break };
            cursor = next.with_timezone(&Utc);
            out.push(next);
        }
        out
    }
}

/// An IANA zone name (`Europe/Paris`, `UTC`).
pub fn parse_zone(name: &str) -> Result<Tz, String> {
    if name.is_empty() || name.len() > 64 {
        return Err("the time zone must be an IANA name such as `Europe/Paris` or `UTC`".to_owned());
    }
    Tz::from_str(name).map_err(|_| format!("`{name}` is not an IANA time zone name such as `Europe/Paris` or `UTC`"))
}

/// RFC 3339 with the zone's offset at that instant (`2026-03-29T03:30:00+02:00`; `Z` is never used).
pub fn rfc3339<T: TimeZone>(time: &DateTime<T>) -> String
where
    T::Offset: std::fmt::Display,
{
    time.to_rfc3339_opts(SecondsFormat::Secs, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).expect("time").with_timezone(&Utc)
    }

    fn fire_times(cron: &str, zone: &str, from: &str, count: usize) -> Vec<String> {
        let zoned = ZonedCron::parse(cron, zone).expect("valid");
        zoned.after(utc(from), count).iter().map(rfc3339).collect()
    }

    #[test]
    fn paris_spring_forward_skips_the_missing_local_time() {
        // 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 does not exist that day.
        let times = fire_times("30 2 * * *", "Europe/Paris", "2026-03-27T12:00:00Z", 3);
        assert_eq!(times, ["2026-03-28T02:30:00+01:00", "2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"]);
        // An hourly pattern keeps firing at every real hour: 01:00 CET then 03:00 CEST.
        let hourly = fire_times("0 * * * *", "Europe/Paris", "2026-03-29T00:30:00+01:00", 3);
        assert_eq!(hourly, ["2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"]);
        // Every 30 minutes: no time between 02:00 and 03:00 local.
        let half = fire_times("*/30 * * * *", "Europe/Paris", "2026-03-29T01:00:00+01:00", 3);
        assert_eq!(half, ["2026-03-29T01:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00"]);
    }

    #[test]
    fn paris_fall_back_fires_a_repeated_time_once() {
        // 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens twice. It fires at the first.
        let times = fire_times("30 2 * * *", "Europe/Paris", "2026-10-24T12:00:00Z", 3);
        assert_eq!(times, ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00", "2026-10-27T02:30:00+01:00"]);
        // Starting between the two 02:30s finds the next day's.
        let from_between = fire_times("30 2 * * *", "Europe/Paris", "2026-10-25T02:45:00+02:00", 1);
        assert_eq!(from_between, ["2026-10-26T02:30:00+01:00"]);
        // An hourly pattern fires at both real 02:00s: the hour is an hour of elapsed time either way.
        let hourly = fire_times("0 * * * *", "Europe/Paris", "2026-10-25T01:30:00+02:00", 3);
        assert_eq!(hourly, ["2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"]);
    }

    #[test]
    fn new_york_spring_forward() {
        // 2026-03-08: 02:00 EST becomes 03:00 EDT.
        let times = fire_times("30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", 2);
        assert_eq!(times, ["2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"]);
        let morning = fire_times("0 9 * * *", "America/New_York", "2026-03-07T15:00:00Z", 2);
        assert_eq!(morning, ["2026-03-08T09:00:00-04:00", "2026-03-09T09:00:00-04:00"]);
        assert_eq!(utc("2026-03-08T09:00:00-04:00").to_rfc3339(), "2026-03-08T13:00:00+00:00");
    }

    #[test]
    fn utc_and_seconds_and_bad_input() {
        assert_eq!(
            fire_times("*/20 * * * * *", "UTC", "2026-11-22T10:20:05Z", 2),
            ["2026-11-22T10:20:20+00:00", "2026-11-22T10:20:40+00:00"]
        );
        assert_eq!(ZonedCron::parse("30 2 * * *", "Mars/Olympus").expect_err("no such zone").0, "timezone");
        assert_eq!(ZonedCron::parse("every day", "UTC").expect_err("not cron").0, "cron");
        assert_eq!(ZonedCron::parse("61 * * * *", "UTC").expect_err("minute 61").0, "cron");
        // February 30th never comes.
        assert!(fire_times("0 0 30 2 *", "UTC", "2026-01-01T00:00:00Z", 1).is_empty());
    }

    #[test]
    fn first_from_includes_the_instant() {
        let zoned = ZonedCron::parse("0 * * * *", "UTC").expect("valid");
        let at = utc("2026-11-22T10:00:00Z");
        assert_eq!(zoned.first_from(at).map(|t| t.with_timezone(&Utc)), Some(at));
    }
}
