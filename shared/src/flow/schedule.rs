//! Flow schedules: standard 5-field cron expressions (optionally with seconds), parsed at the edge with croner.

use std::str::FromStr as _;

/// A validated cron expression.
#[derive(Debug, Clone)]
pub struct Schedule(croner::Cron);

impl Schedule {
    pub fn parse(text: &str) -> Result<Self, String> {
        croner::Cron::from_str(text.trim()).map(Schedule).map_err(|e| format!("`{text}` is not a cron expression: {e}"))
    }

    /// The first firing strictly after `after`.
    pub fn next_after(&self, after: chrono::DateTime<chrono::Utc>) -> Option<chrono::DateTime<chrono::Utc>> {
        self.0.find_next_occurrence(&after, false).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_standard_expressions_and_refuses_nonsense() {
        let hourly = Schedule::parse("0 * * * *").expect("valid");
        let at =
            chrono::DateTime::parse_from_rfc3339("2026-11-22T10:20:00Z").expect("time").with_timezone(&chrono::Utc);
        assert_eq!(hourly.next_after(at).map(|t| t.to_rfc3339()), Some("2026-11-22T11:00:00+00:00".into()));
        assert!(Schedule::parse("*/5 9-17 * * MON-FRI").is_ok());
        for bad in ["", "every hour", "61 * * * *", "* * * *"] {
            assert!(Schedule::parse(bad).is_err(), "{bad}");
        }
    }
}
