//! The server sender's room: the claimed deliveries it holds (sending, or waiting their turn) in all and per
//! organization, the permits of attempts in flight (in all, and per organization so a tenant whose receivers hold
//! every attempt to its timeout never takes more than its share), and the claim loop's wake-up when room worth a
//! claim comes free for what the last claim had to leave behind (not at every attempt's end). Rows are held up to
//! twice what may be in flight: the next claim's rows are at hand when attempts end, so sending never waits for a
//! claim's round trip.

use hookflow_shared::OrgId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Attempts in flight at once on one replica.
pub const IN_FLIGHT: usize = 128;
/// Attempts of one organization in flight at once on one replica.
pub const ORG_IN_FLIGHT: usize = 32;
/// Claimed rows one replica holds at most (sending or waiting), in all and per organization.
const HELD: usize = 2 * IN_FLIGHT;
const ORG_HELD: usize = 2 * ORG_IN_FLIGHT;
/// Room (in held rows) a claim waits for: one claim's statement serves at least this many attempts.
const CLAIM_AT_FREE: usize = IN_FLIGHT / 4;

/// What the next claim may take.
#[derive(Debug)]
pub struct NextClaim {
    /// Rows in all.
    pub rows: i64,
    /// Rows of one organization (less what it holds).
    pub per_org: i64,
    /// Organizations not to claim for: they hold more than [`ORG_IN_FLIGHT`] rows.
    pub busy: Vec<OrgId>,
    /// Rows each organization holds.
    pub held: Vec<(OrgId, i64)>,
}

#[derive(Debug, Default)]
struct OrgRoom {
    held: usize,
    /// Its last claim took all its room: more may be due.
    wants_more: bool,
    sending: Option<Arc<Semaphore>>,
}

#[derive(Debug)]
pub struct Room {
    sending: Arc<Semaphore>,
    held: Mutex<(usize, HashMap<OrgId, OrgRoom>)>,
    /// The last claim took all it asked: more may be due.
    wants_rows: AtomicBool,
    pub freed: Notify,
}

impl Default for Room {
    fn default() -> Self {
        Self {
            sending: Arc::new(Semaphore::new(IN_FLIGHT)),
            held: Mutex::default(),
            wants_rows: AtomicBool::new(false),
            freed: Notify::new(),
        }
    }
}

/// A held row's turn: its permits, given back (with the row) by [`Room::release`].
#[derive(Debug)]
pub struct Turn {
    _permits: (OwnedSemaphorePermit, OwnedSemaphorePermit),
}

impl Room {
    /// What the next claim may take; `None` while less than a claim's worth of room is free.
    pub fn next_claim(&self, max_rows: i64) -> Option<NextClaim> {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let free = HELD.saturating_sub(held.0);
        if free < CLAIM_AT_FREE {
            return None;
        }
        let busy = held.1.iter().filter(|(_, r)| r.held > ORG_IN_FLIGHT).map(|(org, _)| *org).collect();
        Some(NextClaim {
            rows: (free as i64).min(max_rows),
            per_org: ORG_HELD as i64,
            busy,
            held: held.1.iter().map(|(org, r)| (*org, r.held as i64)).collect(),
        })
    }

    /// Holds a claim's rows (their organizations, in order): notes the organizations whose room it took whole (more
    /// may be due: the claim loop is woken when they fall to [`ORG_IN_FLIGHT`], or at once if attempts that ended
    /// during the claim took them there already) and whether it took all it asked.
    pub fn hold(&self, orgs: &[OrgId], asked: &NextClaim) {
        self.wants_rows.store(orgs.len() as i64 == asked.rows, Ordering::Relaxed);
        let mut taken: HashMap<OrgId, i64> = HashMap::new();
        for org in orgs {
            *taken.entry(*org).or_default() += 1;
        }
        let mut wake = false;
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.0 += orgs.len();
        for (org, n) in taken {
            let before = asked.held.iter().find(|(o, _)| *o == org).map_or(0, |(_, h)| *h);
            let room = held.1.entry(org).or_default();
            room.held += n as usize;
            if n + before >= asked.per_org {
                if room.held <= ORG_IN_FLIGHT {
                    wake = true;
                } else {
                    room.wants_more = true;
                }
            }
        }
        drop(held);
        if wake {
            self.freed.notify_one();
        }
    }

    /// Waits for a held row's turn to be sent (its organization's share, then the replica's).
    pub async fn turn(self: &Arc<Self>, org: OrgId) -> Option<Turn> {
        let org_sending = {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            let room = held.1.entry(org).or_default();
            room.sending.get_or_insert_with(|| Arc::new(Semaphore::new(ORG_IN_FLIGHT))).clone()
        };
        let for_org = org_sending.acquire_owned().await.ok()?;
        let for_replica = self.sending.clone().acquire_owned().await.ok()?;
        Some(Turn { _permits: (for_org, for_replica) })
    }

    /// Gives back a row's room after its attempt (or when it was never sent: `org`), waking the claim loop when
    /// room worth a claim came free for what the last claims left.
    pub fn release(&self, org: OrgId, turn: Option<Turn>) {
        drop(turn);
        let wake = {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            held.0 = held.0.saturating_sub(1);
            let replica_free = HELD - held.0 >= CLAIM_AT_FREE && self.wants_rows.swap(false, Ordering::Relaxed);
            let mut org_free = false;
            if let Some(room) = held.1.get_mut(&org) {
                room.held = room.held.saturating_sub(1);
                if room.wants_more && room.held <= ORG_IN_FLIGHT {
                    room.wants_more = false;
                    org_free = true;
                }
                if room.held == 0 {
                    held.1.remove(&org);
                }
            }
            replica_free || org_free
        };
        if wake {
            self.freed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_filled_organization_waits_for_half_its_room_then_wakes_the_claims() {
        let room = Arc::new(Room::default());
        let org = OrgId::from(uuid::Uuid::new_v4());
        let asked = room.next_claim(64).expect("empty room claims");
        assert_eq!((asked.rows, asked.per_org), (64, ORG_HELD as i64));
        room.hold(&vec![org; ORG_HELD], &asked);
        let next = room.next_claim(64).expect("the replica has room");
        assert_eq!(next.busy, vec![org]);
        assert_eq!(next.held, vec![(org, ORG_HELD as i64)]);
        // The claim loop goes on after a full claim; the organization being busy, it takes nothing.
        room.hold(&[], &next);
        // Only ORG_IN_FLIGHT of its rows get a turn at once.
        let mut turns = Vec::new();
        for _ in 0..ORG_IN_FLIGHT {
            turns.push(room.turn(org).await.expect("a turn"));
        }
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), room.turn(org)).await;
        assert!(waiting.is_err(), "the organization's share is taken");
        for (n, turn) in turns.drain(..).enumerate() {
            room.release(org, Some(turn));
            let woken = tokio::time::timeout(std::time::Duration::from_millis(5), room.freed.notified()).await;
            // Woken once, when what it holds falls to ORG_IN_FLIGHT (the 32nd release), not before or after.
            assert_eq!(woken.is_ok(), n + 1 == ORG_HELD - ORG_IN_FLIGHT, "release {n}");
        }
        assert!(room.next_claim(64).expect("room").busy.is_empty());
    }
}
