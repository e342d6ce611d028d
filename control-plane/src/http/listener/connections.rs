//! The connections a server holds. Those that have proven nothing yet: at most `max` in all and `per_address` from
//! one address. When that cap is reached, a newcomer from an address under its share takes the place of the
//! longest-idle such connection of the address holding the most (a connection is idle while no request of it is in
//! flight); when nothing is idle, the newcomer is refused. A connection whose request passed authentication, the
//! rate limit and the organization check (a key, a person's token, a job token) is proven: it leaves those counts,
//! so a fleet of runners behind one NAT or proxy address holds as many connections as it needs, and counts instead
//! against `max_proven` (fitted under the file limit with the pool, the listeners and the unproven cap). When that
//! is full, a newly proven connection closes the idlest connection of the credential holding the most, so one key
//! (or a stranger who signed up) cannot take every file the process may open. Connections idle longer than
//! `idle_timeout` are closed, proven or not.

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
    /// Proven connections held at once (`--max-proven-connections`).
    pub max_proven: usize,
    pub idle_timeout: Duration,
}

/// Who proved a connection: a key's, a person's, a runner key's or a job's id. The credential holding the most
/// proven connections gives one up when the proven cap is full.
pub type Credential = uuid::Uuid;

/// One held connection.
#[derive(Debug)]
pub struct Connection {
    id: u64,
    pub address: IpAddr,
    in_flight: AtomicUsize,
    /// Milliseconds since the table's epoch when something last happened.
    last_active: AtomicU64,
    epoch: Instant,
    /// Set once a request of it carried valid credentials (under the table's lock).
    proven: AtomicBool,
    /// The credential that proved it (under the table's lock).
    credential: Mutex<Option<Credential>>,
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
    /// Connections that carried valid credentials: closed when idle, counted against `max_proven` only.
    proven: HashMap<u64, Arc<Connection>>,
    /// The proven connections of each credential.
    by_credential: HashMap<Credential, HashMap<u64, Arc<Connection>>>,
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
            credential: Mutex::new(None),
            close: CancellationToken::new(),
        });
        connection.touch();
        held.by_address.entry(address).or_default().insert(connection.id, connection.clone());
        held.total += 1;
        Some(connection)
    }

    /// A request of `connection` passed with `credential`: it leaves the unproven caps' counts (once) for the
    /// proven cap's. When that is full, the idlest proven connection of the credential holding the most is
    /// closed to make room; when none of the heaviest credentials has an idle one, the connection stays unproven.
    pub fn prove(&self, connection: &Arc<Connection>, credential: Credential) {
        if connection.proven.load(Ordering::Acquire) {
            return;
        }
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if connection.proven.load(Ordering::Acquire) || connection.close.is_cancelled() {
            return;
        }
        let Some(of_address) = held.by_address.get(&connection.address) else { return };
        if !of_address.contains_key(&connection.id) {
            return;
        }
        if held.proven.len() >= self.limits.max_proven && !evict_idlest_proven(&mut held) {
            return;
        }
        if let Some(of_address) = held.by_address.get_mut(&connection.address) {
            of_address.remove(&connection.id);
            if of_address.is_empty() {
                held.by_address.remove(&connection.address);
            }
        }
        held.total -= 1;
        connection.proven.store(true, Ordering::Release);
        *connection.credential.lock().unwrap_or_else(|e| e.into_inner()) = Some(credential);
        held.proven.insert(connection.id, connection.clone());
        held.by_credential.entry(credential).or_default().insert(connection.id, connection.clone());
    }

    /// Forgets a closed connection.
    pub fn release(&self, connection: &Connection) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.proven.remove(&connection.id).is_some() {
            let credential = *connection.credential.lock().unwrap_or_else(|e| e.into_inner());
            forget_proven(&mut held, credential, connection.id);
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

    /// How many proven connections are held.
    pub fn proven(&self) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).proven.len()
    }
}

/// How many of the heaviest credentials are searched for an idle connection before a newcomer is left unproven.
const HEAVIEST_SEARCHED: usize = 4;

/// Closes the idlest proven connection of the credential holding the most (or of the next heaviest, when all of
/// its connections are busy); false when none of them has an idle one.
fn evict_idlest_proven(held: &mut Held) -> bool {
    let mut heaviest: Vec<(usize, Credential)> = held.by_credential.iter().map(|(c, of)| (of.len(), *c)).collect();
    let searched = heaviest.len().min(HEAVIEST_SEARCHED);
    if searched == 0 {
        return false;
    }
    heaviest.select_nth_unstable_by(searched - 1, |a, b| b.0.cmp(&a.0));
    heaviest.truncate(searched);
    heaviest.sort_unstable_by(|a, b| b.0.cmp(&a.0));
    for (_, credential) in heaviest {
        let idlest = held.by_credential.get(&credential).and_then(|of| {
            of.values()
                .filter(|c| !c.close.is_cancelled())
                .filter_map(|c| c.idle_for().map(|idle| (idle, c.id)))
                .max_by_key(|(idle, _)| *idle)
        });
        if let Some((_, id)) = idlest {
            if let Some(connection) = held.proven.remove(&id) {
                connection.close.cancel();
            }
            forget_proven(held, Some(credential), id);
            return true;
        }
    }
    false
}

/// Removes a proven connection from its credential's set.
fn forget_proven(held: &mut Held, credential: Option<Credential>, id: u64) {
    let Some(credential) = credential else { return };
    if let Some(of) = held.by_credential.get_mut(&credential) {
        of.remove(&id);
        if of.is_empty() {
            held.by_credential.remove(&credential);
        }
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
        ConnectionLimits { max, per_address, max_proven: 1_000, idle_timeout: Duration::from_secs(60) }
    }

    fn key(n: u128) -> Credential {
        Credential::from_u128(n)
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
                table.prove(&connection, key(1));
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

    #[test]
    fn a_full_proven_cap_closes_the_idlest_of_the_heaviest_credential() {
        let table = Connections::new(ConnectionLimits { max_proven: 4, ..limits(100, 100) });
        let ip: IpAddr = "127.0.0.2".parse().expect("ip");
        let proven_by = |credential| {
            let connection = table.admit(ip).expect("admitted");
            table.prove(&connection, credential);
            connection
        };
        let heavy: Vec<_> = (0..3).map(|_| proven_by(key(1))).collect();
        let light = proven_by(key(2));
        assert_eq!(table.proven(), 4);
        let _busy = InFlight::start(&heavy[2]);
        std::thread::sleep(Duration::from_millis(5));
        heavy[1].touch();
        // A fifth: the heaviest key's idlest connection (heavy[0]) makes room; the light key keeps its one.
        let newcomer = proven_by(key(3));
        assert!(heavy[0].close.is_cancelled(), "the idlest of the heaviest credential was closed");
        assert!(!heavy[1].close.is_cancelled() && !heavy[2].close.is_cancelled() && !light.close.is_cancelled());
        assert!(newcomer.proven.load(Ordering::Acquire));
        assert_eq!(table.proven(), 4, "the cap holds");
        table.release(&heavy[0]);
        assert_eq!(table.proven(), 4, "a closed connection was already forgotten");

        // All busy: the newcomer stays unproven (counted by the unproven caps), nobody is closed.
        let _all: Vec<_> = [&heavy[1], &light, &newcomer].into_iter().map(InFlight::start).collect();
        let stays = proven_by(key(4));
        assert!(!stays.proven.load(Ordering::Acquire));
        assert_eq!((table.proven(), table.held()), (4, 5));
    }
}
