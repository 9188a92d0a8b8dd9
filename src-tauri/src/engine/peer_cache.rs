//! Peer records (with their parsed cards) and webhook subscriptions, kept in
//! memory between the writes that change them.
//!
//! Every webhook push reads its subscription, its peer's record and the
//! peer's card; re-reading and re-parsing them took about a tenth of a push.
//! The database stays the only source of truth: every write to the peers or
//! subscriptions tables empties the cache as it commits (see
//! [`Engine::write_peers`](super::Engine)), and a value read from the database
//! is kept only if no such write committed since the read began.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::a2a::client::PeerCard;
use crate::store::peers::{PeerRecord, Subscription};

/// A peer's record and its card, parsed.
pub type KnownPeer = Arc<(PeerRecord, PeerCard)>;

#[derive(Default)]
pub(super) struct PeerCache {
    inner: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    /// Bumped by every committed write to peers or subscriptions.
    generation: u64,
    peers: HashMap<String, KnownPeer>,
    subscriptions: HashMap<String, Subscription>,
}

/// Taken before a database read: the value read may be kept only while the
/// generation it saw is still current.
#[derive(Clone, Copy)]
pub(super) struct Ticket(u64);

impl PeerCache {
    fn entries(&self) -> std::sync::MutexGuard<'_, Entries> {
        // The maps are consistent after any panic (plain inserts and clears).
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn ticket(&self) -> Ticket {
        Ticket(self.entries().generation)
    }

    pub(super) fn peer(&self, id: &str) -> Option<KnownPeer> {
        self.entries().peers.get(id).cloned()
    }

    pub(super) fn keep_peer(&self, ticket: Ticket, peer: &KnownPeer) {
        let mut e = self.entries();
        if e.generation == ticket.0 {
            e.peers.insert(peer.0.id.clone(), peer.clone());
        }
    }

    pub(super) fn subscription(&self, id: &str) -> Option<Subscription> {
        self.entries().subscriptions.get(id).cloned()
    }

    pub(super) fn keep_subscription(&self, ticket: Ticket, sub: &Subscription) {
        let mut e = self.entries();
        if e.generation == ticket.0 {
            e.subscriptions.insert(sub.id.clone(), sub.clone());
        }
    }

    /// Called as a write to peers or subscriptions commits.
    pub(super) fn invalidate(&self) {
        let mut e = self.entries();
        e.generation += 1;
        e.peers.clear();
        e.subscriptions.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(id: &str, token: &str) -> Subscription {
        Subscription {
            id: id.into(),
            peer_id: "p".into(),
            token: token.into(),
            created_ms: 0,
        }
    }

    #[test]
    fn a_value_read_before_a_write_committed_is_not_kept() {
        let cache = PeerCache::default();
        let before = cache.ticket();
        cache.invalidate();
        cache.keep_subscription(before, &sub("s", "old"));
        assert!(cache.subscription("s").is_none());

        let after = cache.ticket();
        cache.keep_subscription(after, &sub("s", "new"));
        assert_eq!(cache.subscription("s").map(|s| s.token), Some("new".into()));
        cache.invalidate();
        assert!(cache.subscription("s").is_none());
    }
}
