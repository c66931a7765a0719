//! The retriever thread's side of the hub: which session each lane is, who owns it,
//! who subscribes to what, and the delivery of results to clients.
//!
//! Owned by the retriever thread alone (no lock): registrations arrive as messages on
//! the same channel as transcripts, so they are ordered with them. Delivery never
//! waits: `try_send` on each client's bounded queue; speculative results only while
//! fewer than [`SPECULATIVE_ROOM`] wait; a final that does not fit disconnects the
//! client (its handle's overflow hook shuts its socket), so one client that never reads
//! costs the others and the STT pipe nothing. Speculative results are copied per
//! recipient without allocating (inline candidates); a final's copy allocates its boxed
//! outcome, once per recipient per utterance, never per partial.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::{Sender, TrySendError};

use super::{
    ClientInfo, Delivery, HubMsg, MAX_SESSIONS, MAX_SUBSCRIPTIONS, SPECULATIVE_ROOM, STT_SESSION,
    SessionName, Shared,
};
use crate::index::Index;
use crate::output::Outbound;
use crate::scheduler::{LaneOp, Next, STT_LANE};

struct LaneInfo {
    name: SessionName,
    owner: Option<u64>,
}

struct Slot {
    id: u64,
    tx: Sender<Delivery>,
    info: Arc<ClientInfo>,
    /// (session, speculative too); None: every session.
    subs: heapless::Vec<(Option<SessionName>, bool), MAX_SUBSCRIPTIONS>,
    dead: bool,
}

impl Slot {
    /// Whether this client gets lane `lane`'s results: (finals, speculative too).
    fn wants(&self, lane: &LaneInfo) -> (bool, bool) {
        let owner = lane.owner == Some(self.id);
        let mut finals = owner;
        let mut speculative = false;
        for (pattern, spec) in &self.subs {
            if pattern.as_ref().is_none_or(|p| *p == lane.name) {
                finals = true;
                speculative |= *spec;
            }
        }
        (finals, speculative)
    }
}

pub(crate) struct Table {
    lanes: Vec<Option<LaneInfo>>,
    clients: Vec<Slot>,
    shared: Arc<Shared>,
}

impl Table {
    pub(crate) fn new(shared: Arc<Shared>) -> Table {
        let mut lanes: Vec<Option<LaneInfo>> = (0..=MAX_SESSIONS).map(|_| None).collect();
        lanes[STT_LANE] = Some(LaneInfo {
            name: SessionName::try_from(STT_SESSION).expect("short"),
            owner: None,
        });
        Table {
            lanes,
            clients: Vec::with_capacity(16),
            shared,
        }
    }

    /// Takes one message of the hub: a lane operation for the scheduler, or `None` for
    /// a registration (done here).
    pub(crate) fn apply(&mut self, msg: HubMsg) -> Option<Next<Instant>> {
        let now = Instant::now();
        let (lane, op, at) = match msg {
            HubMsg::Open { lane, name, owner } => {
                self.lanes[lane] = Some(LaneInfo { name, owner });
                (lane, LaneOp::Open { endpoint: false }, now)
            }
            HubMsg::Transcript { lane, turn, ev } => {
                let at = ev.received;
                (lane, LaneOp::Transcript { turn, ev }, at)
            }
            HubMsg::EndOfSpeech { lane, turn, at } => (lane, LaneOp::EndOfSpeech { turn }, at),
            HubMsg::Abandon { lane } => (lane, LaneOp::Abandon, now),
            HubMsg::Reset { lane } => (lane, LaneOp::Reset, now),
            HubMsg::Topic { lane, text } => (lane, LaneOp::Topic(text), now),
            HubMsg::Context { lane, on, tokens } => (lane, LaneOp::Context { on, tokens }, now),
            HubMsg::Close { lane } => {
                self.lanes[lane] = None;
                (lane, LaneOp::Close, now)
            }
            HubMsg::Connect { client, tx, info } => {
                self.clients.push(Slot {
                    id: client,
                    tx,
                    info,
                    subs: heapless::Vec::new(),
                    dead: false,
                });
                return None;
            }
            HubMsg::Disconnect { client } => {
                self.clients.retain(|c| c.id != client);
                return None;
            }
            HubMsg::Subscribe {
                client,
                session,
                speculative,
            } => {
                if let Some(c) = self.clients.iter_mut().find(|c| c.id == client) {
                    match c.subs.iter_mut().find(|s| s.0 == session) {
                        Some(s) => s.1 = speculative,
                        // The handle bounds its subscriptions: this fits.
                        None => {
                            let _ = c.subs.push((session, speculative));
                        }
                    }
                }
                return None;
            }
            HubMsg::Unsubscribe { client, session } => {
                if let Some(c) = self.clients.iter_mut().find(|c| c.id == client) {
                    c.subs.retain(|s| s.0 != session);
                }
                return None;
            }
        };
        Some(Next::Lane(lane, op, at))
    }

    /// An index was swapped in (for `stats`).
    pub(crate) fn swapped(&self) {
        self.shared.counters.swaps.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether anyone wants lane `lane`'s speculative results (else they are not made).
    pub(crate) fn wants_speculative(&self, lane: usize) -> bool {
        let Some(Some(info)) = self.lanes.get(lane) else {
            return false;
        };
        self.clients.iter().any(|c| c.wants(info).1)
    }

    /// Hands `msg` (lane `lane`'s, turn `turn`) to every client that wants it.
    pub(crate) fn deliver(&mut self, lane: usize, turn: u64, index: &Arc<Index>, msg: &Outbound) {
        let Some(Some(info)) = self.lanes.get(lane) else {
            return;
        };
        let speculative = matches!(msg, Outbound::Speculative { .. });
        let mut any_dead = false;
        for c in &mut self.clients {
            let (finals, spec) = c.wants(info);
            if !finals || (speculative && !spec) {
                continue;
            }
            if speculative && c.tx.len() >= SPECULATIVE_ROOM {
                c.info.speculative_dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let d = Delivery {
                session: info.name.clone(),
                turn,
                index: index.clone(),
                msg: msg.clone(),
            };
            // Counted before it is sent: the client may read it before this thread goes on.
            c.info.delivered.fetch_add(1, Ordering::Relaxed);
            let sent = c.tx.try_send(d);
            if sent.is_err() {
                c.info.delivered.fetch_sub(1, Ordering::Relaxed);
            }
            match sent {
                Ok(()) => {}
                Err(TrySendError::Full(d)) if !d.is_final() => {
                    c.info.speculative_dropped.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Full(_)) => {
                    c.info.finals_dropped.fetch_add(1, Ordering::Relaxed);
                    self.shared
                        .counters
                        .disconnects_overflow
                        .fetch_add(1, Ordering::Relaxed);
                    log::warn!(
                        "client {} ({:?}) disconnected: {} results waiting for it and the \
                         final of session {:?} turn {turn} does not fit (it is not reading)",
                        c.id,
                        c.info.name,
                        c.tx.len(),
                        info.name.as_str()
                    );
                    c.info.overflow();
                    c.dead = true;
                    any_dead = true;
                }
                Err(TrySendError::Disconnected(_)) => {
                    c.dead = true;
                    any_dead = true;
                }
            }
        }
        if any_dead {
            self.clients.retain(|c| !c.dead);
        }
    }
}
