//! The process's allowance of open files: raised to its hard limit at start, with the connection cap fitted
//! under it (every held connection is a file; running out would fail accepts and database connections alike).

use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit, setrlimit};

/// Files the server keeps besides client connections: database connections, the cluster's pipes, logs, the
/// listener, runner processes.
const RESERVED: u64 = 512;

/// The soft limit asked for when the hard limit is unlimited (Linux refuses an infinite soft limit).
const UNLIMITED_TARGET: u64 = 1 << 20;

/// Raises the soft limit of open files to the hard limit and answers the connection cap that fits under it:
/// `wanted`, or less (with a warning) when the limit leaves no room for that many.
pub fn fit_connections(wanted: usize) -> usize {
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return wanted };
    let target = if hard == RLIM_INFINITY { UNLIMITED_TARGET } else { hard };
    let limit = if target > soft && setrlimit(Resource::RLIMIT_NOFILE, target, hard).is_ok() { target } else { soft };
    let room = usize::try_from(limit.saturating_sub(RESERVED).max(1)).unwrap_or(usize::MAX);
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
