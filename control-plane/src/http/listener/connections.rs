//! The connections a server holds that have proven nothing yet: at most `max` in all and `per_address` from one
//! address. When the cap is reached, a newcomer from an address under its share takes the place of the
//! longest-idle such connection of the address holding the most (a connection is idle while no request of it is in
//! flight); when nothing is idle, the newcomer is refused. A connection that carried a request with valid
//! credentials (a key, a person's token, a job token) leaves these counts: a fleet of runners behind one NAT or
//! proxy address holds as many connections as it needs (the process's file limit is the ceiling). Connections idle
//! longer than `idle_timeout` are closed, proven or not. So one address (or a few) holding thousands of idle,
//! half-open connections cannot keep anyone else out, and cannot keep out a fleet that authenticates.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Caps and timeouts of connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub max: usize,
    pub per_address: usize,
    pub idle_timeout: Duration,
}

/// One held connection.
#[derive(Debug)]
pub struct Connection {
    id: u64,
    pub address: IpAddr,
    in_flight: AtomicUsize,
    /// Milliseconds since the table's epoch when something last happened.
    last_active: AtomicU64,
    epoch: Instant,
    /// Set once a request of it carried valid credentials.
    proven: AtomicBool,
    /// Cancelled to close the connection.
    pub close: CancellationToken,
}

impl Connection {
    fn touch(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_active.store(now, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        Some(Duration::from_millis(now.saturating_sub(self.last_active.load(Ordering::Relaxed))))
    }
}

/// A request in flight on a connection: counted from its start until its response body is done (long polls and
/// streams keep their connection busy, never idle).
#[derive(Debug)]
pub struct InFlight(Arc<Connection>);

impl InFlight {
    pub fn start(connection: &Arc<Connection>) -> Self {
        connection.in_flight.fetch_add(1, Ordering::AcqRel);
        connection.touch();
        Self(connection.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Debug, Default)]
struct Held {
    /// Connections that have proven nothing yet, by address: what the caps count.
    by_address: HashMap<IpAddr, HashMap<u64, Arc<Connection>>>,
    total: usize,
    /// Connections that carried valid credentials: closed when idle, never counted against the caps.
    proven: HashMap<u64, Arc<Connection>>,
    next_id: u64,
}

#[derive(Debug)]
pub struct Connections {
    limits: ConnectionLimits,
    held: Mutex<Held>,
    epoch: Instant,
}

impl Connections {
    pub fn new(limits: ConnectionLimits) -> Arc<Self> {
        Arc::new(Self { limits, held: Mutex::default(), epoch: Instant::now() })
    }

    /// Admits a connection from `address`, making room when needed; `None` refuses it.
    pub fn admit(&self, address: IpAddr) -> Option<Arc<Connection>> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let mine = held.by_address.get(&address).map_or(0, HashMap::len);
        if mine >= self.limits.per_address && !evict_idlest(&mut held, address) {
            return None;
        }
        if held.total >= self.limits.max {
            let heaviest = held.by_address.iter().max_by_key(|(_, c)| c.len()).map(|(a, _)| *a)?;
            if !evict_idlest(&mut held, heaviest) {
                return None;
            }
        }
        held.next_id += 1;
        let connection = Arc::new(Connection {
            id: held.next_id,
            address,
            in_flight: AtomicUsize::new(0),
            last_active: AtomicU64::new(0),
            epoch: self.epoch,
            proven: AtomicBool::new(false),
            close: CancellationToken::new(),
        });
        connection.touch();
        held.by_address.entry(address).or_default().insert(connection.id, connection.clone());
        held.total += 1;
        Some(connection)
    }

    /// A request of `connection` carried valid credentials: it leaves the caps' counts (once).
    pub fn prove(&self, connection: &Arc<Connection>) {
        if connection.proven.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let Some(of_address) = held.by_address.get_mut(&connection.address) else { return };
        if of_address.remove(&connection.id).is_some() {
            if of_address.is_empty() {
                held.by_address.remove(&connection.address);
            }
            held.total -= 1;
            held.proven.insert(connection.id, connection.clone());
        }
    }

    /// Forgets a closed connection.
    pub fn release(&self, connection: &Connection) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.proven.remove(&connection.id).is_some() {
            return;
        }
        if let Some(of_address) = held.by_address.get_mut(&connection.address)
            && of_address.remove(&connection.id).is_some()
        {
            if of_address.is_empty() {
                held.by_address.remove(&connection.address);
            }
            held.total -= 1;
        }
    }

    /// Closes connections idle longer than the idle timeout; returns how many.
    pub fn close_idle(&self) -> usize {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let mut closed = 0;
        let unproven = held.by_address.values().flat_map(HashMap::values);
        for connection in unproven.chain(held.proven.values()) {
            if connection.idle_for().is_some_and(|idle| idle >= self.limits.idle_timeout)
                && !connection.close.is_cancelled()
            {
                connection.close.cancel();
                closed += 1;
            }
        }
        closed
    }

    /// How many connections are held (proven or not).
    pub fn held(&self) -> usize {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.total + held.proven.len()
    }
}

/// Closes the longest-idle connection of `address` (it leaves the table at once); false when none is idle.
fn evict_idlest(held: &mut Held, address: IpAddr) -> bool {
    let Some(of_address) = held.by_address.get_mut(&address) else { return false };
    let idlest = of_address
        .values()
        .filter(|c| !c.close.is_cancelled())
        .filter_map(|c| c.idle_for().map(|idle| (idle, c.id)))
        .max_by_key(|(idle, _)| *idle);
    let Some((_, id)) = idlest else { return false };
    if let Some(connection) = of_address.remove(&id) {
        connection.close.cancel();
        held.total -= 1;
    }
    if of_address.is_empty() {
        held.by_address.remove(&address);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize, per_address: usize) -> ConnectionLimits {
        ConnectionLimits { max, per_address, idle_timeout: Duration::from_secs(60) }
    }

    #[test]
    fn a_crowded_address_gives_way_to_a_newcomer() {
        let table = Connections::new(limits(4, 3));
        let crowd: IpAddr = "127.0.0.2".parse().expect("ip");
        let held: Vec<_> = (0..3).map(|_| table.admit(crowd).expect("admitted")).collect();
        let busy = InFlight::start(&held[0]);
        // Over the address's share: its idlest connection gives way.
        let fourth = table.admit(crowd).expect("took an idle one's place");
        assert!(held[1].close.is_cancelled() || held[2].close.is_cancelled());
        assert!(!held[0].close.is_cancelled(), "a connection with a request in flight is never evicted");
        let other = table.admit("127.0.0.1".parse().expect("ip")).expect("a newcomer gets in at the cap");
        assert_eq!(table.held(), 4);
        drop((busy, fourth, other));
    }

    #[test]
    fn proven_connections_leave_the_caps() {
        let table = Connections::new(limits(3, 2));
        let fleet: IpAddr = "127.0.0.2".parse().expect("ip");
        let runners: Vec<_> = (0..10)
            .map(|_| {
                let connection = table.admit(fleet).expect("admitted");
                let _poll = InFlight::start(&connection);
                table.prove(&connection);
                connection
            })
            .collect();
        assert_eq!(table.held(), 10, "ten proven connections from one address, over both caps");
        assert!(runners.iter().all(|c| !c.close.is_cancelled()));
        let strangers: Vec<_> = (0..2).map(|_| table.admit("127.0.0.3".parse().expect("ip")).expect("s")).collect();
        let _busy: Vec<_> = strangers.iter().map(InFlight::start).collect();
        assert!(table.admit("127.0.0.3".parse().expect("ip")).is_none(), "unproven ones are still capped");
        table.release(&runners[0]);
        assert_eq!(table.held(), 11);
    }

    #[test]
    fn nothing_idle_means_the_newcomer_is_refused() {
        let table = Connections::new(limits(2, 2));
        let ip: IpAddr = "127.0.0.2".parse().expect("ip");
        let a = table.admit(ip).expect("a");
        let b = table.admit(ip).expect("b");
        let (_x, _y) = (InFlight::start(&a), InFlight::start(&b));
        assert!(table.admit("127.0.0.1".parse().expect("ip")).is_none());
        table.release(&a);
        assert!(table.admit("127.0.0.1".parse().expect("ip")).is_some());
    }
}
