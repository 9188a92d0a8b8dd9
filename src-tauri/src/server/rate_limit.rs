//! Rate limits: one GCRA limiter (`governor`) per class of route, keyed by
//! the caller: the credential's owner when a valid one is presented, else
//! the client's IP address. A caller over its quota gets 429 with
//! `Retry-After`, in the error shape of the route it called.
//!
//! Each address may also hold only so many connections open at once
//! (`connections`): every request on one more is answered 429, in the
//! same shapes, and the connection closed (see `conn.rs`).
//!
//! Loopback callers (and in-process requests from the desktop window, which
//! have no address) are exempt unless `limit_loopback` is set.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde_json::Value;

use super::AppState;
use crate::a2a::Error;
use crate::config::{RateLimitsConfig, RateQuota};

/// The classes of route, limited separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// JSON-RPC at `/a2a/{agent}`: errors in a JSON-RPC body.
    JsonRpc,
    /// HTTP+JSON (1.0 and 0.3) under `/a2a/{agent}/…`.
    Rest,
    /// The push receiver.
    Webhooks,
    /// The UI API.
    Ui,
    /// Cards and anything else public.
    Cards,
}

/// Who a bucket belongs to: a credential's owner (within its tenant, as
/// owner names repeat across tenants), else the client's address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Owner(Option<String>, String),
    Ip(IpAddr),
}

/// The limiters of a running server.
pub struct RateLimits {
    enabled: bool,
    limit_loopback: bool,
    a2a: DefaultKeyedRateLimiter<Key>,
    webhooks: DefaultKeyedRateLimiter<Key>,
    ui: DefaultKeyedRateLimiter<Key>,
    cards: DefaultKeyedRateLimiter<Key>,
    clock: DefaultClock,
    connections: Arc<ConnectionCounts>,
}

/// The connections each address holds open.
struct ConnectionCounts {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// A connection counted against its address until it is dropped.
pub struct Counted {
    counts: Arc<ConnectionCounts>,
    ip: IpAddr,
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut open = self
            .counts
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

fn quota(q: RateQuota) -> Quota {
    // The config check refuses zeros; 1 is only a fallback.
    let rate = NonZeroU32::new(q.per_second).unwrap_or(NonZeroU32::MIN);
    let burst = NonZeroU32::new(q.burst).unwrap_or(NonZeroU32::MIN);
    Quota::per_second(rate).allow_burst(burst)
}

impl RateLimits {
    pub fn new(cfg: &RateLimitsConfig) -> RateLimits {
        RateLimits {
            enabled: cfg.enabled,
            limit_loopback: cfg.limit_loopback,
            a2a: RateLimiter::keyed(quota(cfg.a2a)),
            webhooks: RateLimiter::keyed(quota(cfg.webhooks)),
            ui: RateLimiter::keyed(quota(cfg.ui)),
            cards: RateLimiter::keyed(quota(cfg.cards)),
            clock: DefaultClock::default(),
            connections: Arc::new(ConnectionCounts {
                max: cfg.connections,
                open: Mutex::new(HashMap::new()),
            }),
        }
    }

    fn exempt(&self, peer: IpAddr) -> bool {
        !self.enabled || (is_loopback(peer) && !self.limit_loopback)
    }

    /// Counts a connection from `peer` as it is accepted: what holds its
    /// count while it lives (`None` for an exempt caller), or `Err(max)`
    /// when the address already holds the most it may.
    pub fn open_connection(&self, peer: IpAddr) -> Result<Option<Counted>, usize> {
        if self.exempt(peer) {
            return Ok(None);
        }
        let counts = &self.connections;
        let mut open = counts.open.lock().unwrap_or_else(PoisonError::into_inner);
        let n = open.entry(peer).or_insert(0);
        if *n >= counts.max {
            return Err(counts.max);
        }
        *n += 1;
        Ok(Some(Counted {
            counts: counts.clone(),
            ip: peer,
        }))
    }

    /// Addresses holding a counted connection.
    pub fn connected(&self) -> usize {
        self.connections
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn limiter(&self, class: Class) -> &DefaultKeyedRateLimiter<Key> {
        match class {
            Class::JsonRpc | Class::Rest => &self.a2a,
            Class::Webhooks => &self.webhooks,
            Class::Ui => &self.ui,
            Class::Cards => &self.cards,
        }
    }

    /// Counts one request; `Err(seconds)` to wait (rounded up, at least 1)
    /// when the caller is over its quota.
    fn check(&self, class: Class, key: &Key) -> Result<(), u64> {
        match self.limiter(class).check_key(key) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.clock.now());
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                Err(secs.max(1))
            }
        }
    }

    /// Forgets callers whose buckets are full again, so idle keys do not
    /// hold memory.
    pub fn forget_idle(&self) {
        for l in [&self.a2a, &self.webhooks, &self.ui, &self.cards] {
            l.retain_recent();
            l.shrink_to_fit();
        }
    }

    /// Callers currently tracked, over all classes.
    pub fn tracked(&self) -> usize {
        [&self.a2a, &self.webhooks, &self.ui, &self.cards]
            .iter()
            .map(|l| l.len())
            .sum()
    }
}

/// How often idle callers are forgotten.
pub const FORGET_EVERY: Duration = Duration::from_secs(60);

/// The class of a request, by its path, and the tenant an A2A call is
/// for; `is_tenant` says whether a first segment under `/a2a/` names a
/// configured tenant (`/a2a/{tenant}/{agent}` is then that agent's
/// JSON-RPC endpoint, not an HTTP+JSON route).
pub fn classify(path: &str, is_tenant: impl Fn(&str) -> bool) -> (Class, Option<&str>) {
    if path.starts_with("/api/") || path == "/api" {
        return (Class::Ui, None);
    }
    if path.starts_with("/webhooks/") {
        return (Class::Webhooks, None);
    }
    if let Some(rest) = path.strip_prefix("/a2a/") {
        let rest = rest.trim_end_matches('/');
        let (tenant, rest) = match rest.split_once('/') {
            Some((t, r)) if is_tenant(t) => (Some(t), r),
            _ => (None, rest),
        };
        let class = match rest.split_once('/') {
            // The agent directory is public, like the cards it lists.
            None if rest == "agents" && tenant.is_none() => Class::Cards,
            None => Class::JsonRpc,
            Some((_, tail)) if tail.starts_with(".well-known/") => Class::Cards,
            Some(_) => Class::Rest,
        };
        return (class, tenant);
    }
    (Class::Cards, None)
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Counts a request from `peer` against its caller's bucket: `None` to go
/// on, or the 429 (in the route's error shape) when the bucket is empty or
/// the request came on a connection over the address's limit
/// (`over_limit`).
/// Called by the connection's service before routing, so a caller over its
/// quota costs no more than this check. In-process requests (the desktop
/// window) never pass here.
pub fn admit(
    state: &AppState,
    peer: IpAddr,
    path: &str,
    headers: &axum::http::HeaderMap,
    over_limit: bool,
) -> Option<Response> {
    let limits = &state.rate_limits;
    if over_limit {
        let (class, _) = classify(path, |t| state.config.tenant(t).is_some());
        let e = Error::TooManyConnections(peer, limits.connections.max);
        return Some(refuse(class, e, headers));
    }
    if limits.exempt(peer) {
        return None;
    }
    let (class, tenant) = classify(path, |t| state.config.tenant(t).is_some());
    let key = match class {
        Class::JsonRpc | Class::Rest => {
            match state.access.for_tenant(tenant).authenticate(headers) {
                // A valid credential names its owner; no (or a bad) one, the address.
                Ok(owner) if owner != super::access::LOCAL_OWNER => {
                    Key::Owner(tenant.map(str::to_owned), owner)
                }
                _ => Key::Ip(peer),
            }
        }
        _ => Key::Ip(peer),
    };
    match limits.check(class, &key) {
        Ok(()) => None,
        Err(secs) => {
            tracing::debug!(?class, ?key, secs, "rate limited");
            Some(refuse(class, Error::RateLimited(secs), headers))
        }
    }
}

/// The 429 for a class, rendered by that binding's one error mapping.
fn refuse(class: Class, e: Error, headers: &axum::http::HeaderMap) -> Response {
    match class {
        Class::JsonRpc => super::jsonrpc::error_response(&Value::Null, &e, None),
        Class::Rest | Class::Cards => {
            super::rest::error_response(&e, super::rest::wants_a2a_json(headers))
        }
        Class::Webhooks => super::webhooks::rate_limited(&e),
        Class::Ui => super::ui_api::ApiError::A2a(e).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_fall_in_their_class() {
        let none = |_: &str| false;
        let c = |p| classify(p, none).0;
        assert_eq!(c("/a2a/inbox"), Class::JsonRpc);
        assert_eq!(c("/a2a/inbox/"), Class::JsonRpc);
        assert_eq!(c("/a2a/inbox/message:send"), Class::Rest);
        assert_eq!(c("/a2a/inbox/v1/tasks/x"), Class::Rest);
        assert_eq!(c("/a2a/inbox/.well-known/agent-card.json"), Class::Cards);
        assert_eq!(c("/.well-known/agent-card.json"), Class::Cards);
        assert_eq!(c("/a2a/agents"), Class::Cards);
        assert_eq!(c("/.well-known/jwks.json"), Class::Cards);
        assert_eq!(c("/webhooks/abc"), Class::Webhooks);
        assert_eq!(c("/api/queue"), Class::Ui);
        assert_eq!(c("/"), Class::Cards);
    }

    #[test]
    fn a_tenants_paths_fall_in_the_same_classes() {
        let acme = |t: &str| t == "acme";
        assert_eq!(
            classify("/a2a/acme/inbox", acme),
            (Class::JsonRpc, Some("acme"))
        );
        assert_eq!(
            classify("/a2a/acme/inbox/", acme),
            (Class::JsonRpc, Some("acme"))
        );
        assert_eq!(
            classify("/a2a/acme/inbox/message:send", acme),
            (Class::Rest, Some("acme"))
        );
        assert_eq!(
            classify("/a2a/acme/inbox/.well-known/agent-card.json", acme),
            (Class::Cards, Some("acme"))
        );
        // Not a tenant: the first segment is an agent.
        assert_eq!(classify("/a2a/inbox/tasks", acme), (Class::Rest, None));
    }

    #[test]
    fn a_burst_over_the_quota_is_told_when_to_come_back() {
        let cfg = RateLimitsConfig {
            a2a: RateQuota::new(1, 3),
            ..RateLimitsConfig::default()
        };
        let l = RateLimits::new(&cfg);
        let k = Key::Owner(None, "ci".into());
        for _ in 0..3 {
            assert!(l.check(Class::Rest, &k).is_ok());
        }
        assert_eq!(l.check(Class::JsonRpc, &k), Err(1));
        assert!(
            l.check(Class::Rest, &Key::Owner(None, "other".into()))
                .is_ok()
        );
        assert!(l.check(Class::Webhooks, &k).is_ok());
        assert_eq!(l.tracked(), 3);
        assert!(is_loopback("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_loopback("10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn an_address_holds_at_most_its_connections() {
        let cfg = RateLimitsConfig {
            connections: 2,
            ..RateLimitsConfig::default()
        };
        let l = RateLimits::new(&cfg);
        let a = IpAddr::from([10, 0, 0, 1]);
        let b = IpAddr::from([10, 0, 0, 2]);
        let first = l.open_connection(a).unwrap();
        let second = l.open_connection(a).unwrap();
        assert!(first.is_some() && second.is_some());
        assert_eq!(l.open_connection(a).err(), Some(2));
        let other = l.open_connection(b).unwrap();
        assert_eq!(l.connected(), 2);
        drop(first);
        let third = l.open_connection(a).unwrap();
        assert!(third.is_some());
        drop((second, third, other));
        assert_eq!(l.connected(), 0, "a closed address is forgotten");
        // Loopback is exempt, and never counted, unless limited.
        let lo = IpAddr::from([127, 0, 0, 1]);
        for _ in 0..5 {
            assert!(l.open_connection(lo).unwrap().is_none());
        }
        let limited = RateLimits::new(&RateLimitsConfig {
            limit_loopback: true,
            ..cfg
        });
        let held = limited.open_connection(lo).unwrap();
        assert!(held.is_some());
    }

    #[test]
    fn idle_callers_are_forgotten() {
        let cfg = RateLimitsConfig {
            cards: RateQuota::new(1000, 1),
            ..RateLimitsConfig::default()
        };
        let l = RateLimits::new(&cfg);
        for i in 0..100u8 {
            let _ = l.check(Class::Cards, &Key::Ip(IpAddr::from([10, 0, 0, i])));
        }
        assert_eq!(l.tracked(), 100);
        // At 1000 a second a bucket of one is full again within a millisecond.
        std::thread::sleep(Duration::from_millis(20));
        l.forget_idle();
        assert_eq!(l.tracked(), 0);
    }
}
