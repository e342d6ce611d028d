//! The process's allowance of open files: raised to its hard limit at start, with the connection caps fitted
//! under it (every held connection is a file; running out would fail accepts and database connections alike):
//! the unproven connections' cap, and the proven connections' cap, which takes what is left after the database
//! pools, the listeners, the unproven cap and a spare 1,024.

use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit, setrlimit};

/// Files the server keeps besides client connections: database connections, the cluster's pipes, logs, the
/// listener, runner processes.
const RESERVED: u64 = 512;

/// The soft limit asked for when the hard limit is unlimited (Linux refuses an infinite soft limit).
const UNLIMITED_TARGET: u64 = 1 << 20;

/// Files kept free beside every cap: log files, runner processes, the cluster's pipes, a burst of accepts (a
/// quarter of the limit when that is less, so a small limit still leaves the caps room).
const SPARE: u64 = 1024;

fn spare(limit: u64) -> u64 {
    SPARE.min(limit / 4)
}

/// Raises the soft limit of open files to the hard limit (once) and answers it.
fn raised_limit() -> Option<u64> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    let target = if hard == RLIM_INFINITY { UNLIMITED_TARGET } else { hard };
    Some(if target > soft && setrlimit(Resource::RLIMIT_NOFILE, target, hard).is_ok() { target } else { soft })
}

/// The connection caps that fit under the open-file limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fitted {
    /// Connections that have proven nothing yet.
    pub unproven: usize,
    /// Connections whose requests passed authentication, the rate limit and the organization check.
    pub proven: usize,
}

/// Raises the soft limit of open files to the hard limit and fits both connection caps under it:
/// `wanted_unproven` (cut, with a warning, when the limit leaves no room for it), and `wanted_proven` or, by
/// default, what is left after `database_connections` (the pools' sizes), `listeners`, the unproven cap and
/// [`SPARE`] (at least 1). So the open files stay under the limit with both caps full.
pub fn fit(wanted_unproven: usize, wanted_proven: Option<usize>, database_connections: u64, listeners: u64) -> Fitted {
    let unproven = fit_connections(wanted_unproven);
    let Some(limit) = raised_limit() else {
        return Fitted { unproven, proven: wanted_proven.unwrap_or(usize::MAX) };
    };
    let taken = database_connections + listeners + u64::try_from(unproven).unwrap_or(u64::MAX) + spare(limit);
    let room = usize::try_from(limit.saturating_sub(taken).max(1)).unwrap_or(usize::MAX);
    let proven = match wanted_proven {
        Some(wanted) if wanted > room => {
            tracing::warn!(
                wanted,
                fitted = room,
                open_files = limit,
                "the open-file limit leaves room for fewer proven connections than --max-proven-connections; \
                 raise it (ulimit -n)"
            );
            room
        }
        Some(wanted) => wanted.max(1),
        None => room,
    };
    Fitted { unproven, proven }
}

/// Raises the soft limit of open files to the hard limit and answers the connection cap that fits under it:
/// `wanted`, or less (with a warning) when the limit leaves no room for that many.
pub fn fit_connections(wanted: usize) -> usize {
    let Some(limit) = raised_limit() else { return wanted };
    // Half the room at most, so the proven connections always have some.
    let room = usize::try_from((limit.saturating_sub(RESERVED + spare(limit)) / 2).max(1)).unwrap_or(usize::MAX);
    if wanted > room {
        tracing::warn!(
            wanted,
            fitted = room,
            open_files = limit,
            "the open-file limit leaves room for fewer connections than --max-connections; raise it (ulimit -n)"
        );
        return room;
    }
    wanted
}
