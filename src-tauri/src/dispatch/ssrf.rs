//! The policy every outbound URL a caller or a chain rule supplies must pass.
//!
//! A webhook URL is chosen by whoever registers it, so without a check a
//! caller could make Countersign POST to its own loopback services, the LAN
//! or a cloud metadata endpoint. Non-public addresses are refused unless the
//! person allow-listed them under `[outbound]`.
//!
//! The check runs inside the HTTP client's DNS resolver, so the client only
//! ever connects to an address that was checked (a name cannot resolve to a
//! public address for the check and a private one for the connection). IP
//! literals never reach the resolver, so they are checked before the request
//! with [`OutboundPolicy::check_literal`]. The client follows no redirects
//! and uses no proxy, either of which would sidestep the check.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;
use url::{Host, Url};

/// How long a name may take to resolve before it counts as unresolvable.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest connect timeout, so a black-holed address fails well before a
/// long total timeout.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Names of cloud metadata services, refused before resolving: some resolve
/// only inside the cloud, and a search domain can complete a bare name.
const METADATA_NAMES: &[&str] = &[
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data",
    "instance-data.ec2.internal",
];

/// `[outbound]` in the config file.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OutboundConfig {
    /// Hosts and networks outbound calls may reach even though they are
    /// private, loopback, …: host names ("hooks.internal", "*.corp.example"),
    /// IP addresses ("127.0.0.1", "::1") and CIDRs ("10.0.0.0/8").
    #[serde(default)]
    pub allow: Vec<String>,
}

/// The parsed `[outbound]` allow-list, checked against every outbound
/// address.
#[derive(Debug, Clone)]
pub struct OutboundPolicy {
    /// Everything passes; for peers the person configured and for tests.
    allow_all: bool,
    /// Lowercase host names without a trailing dot.
    hosts: Vec<String>,
    /// Lowercase suffixes of `*.suffix` entries, with the leading dot.
    suffixes: Vec<String>,
    /// Networks from IP and CIDR entries.
    nets: Vec<IpNet>,
}

/// The class of a non-public address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressClass {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// RFC 1918 and IPv6 unique-local (fc00::/7) or site-local.
    Private,
    /// 169.254.0.0/16, fe80::/10.
    LinkLocal,
    /// 100.64.0.0/10, carrier-grade NAT.
    SharedCgnat,
    /// 224.0.0.0/4, ff00::/8.
    Multicast,
    /// 0.0.0.0/8, ::.
    Unspecified,
    /// 255.255.255.255.
    Broadcast,
    /// Reserved, documentation and benchmarking ranges; IPv6 outside
    /// global unicast.
    Reserved,
    /// A cloud provider's instance metadata service, which hands out
    /// credentials.
    CloudMetadata,
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::LinkLocal => "link-local",
            AddressClass::SharedCgnat => "CGNAT (shared)",
            AddressClass::Multicast => "multicast",
            AddressClass::Unspecified => "unspecified",
            AddressClass::Broadcast => "broadcast",
            AddressClass::Reserved => "reserved",
            AddressClass::CloudMetadata => "cloud metadata",
        })
    }
}

/// What a refusal is about: the URL when one is known (config time), else
/// the host the resolver was asked for (delivery time).
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// The URL as the caller or rule gave it.
    Url(String),
    /// The host name or IP literal.
    Host(String),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Url(url) => write!(f, "url `{url}`"),
            Target::Host(host) => write!(f, "host `{host}`"),
        }
    }
}

/// Why an outbound URL or address is refused; Display is a sentence the
/// caller can act on.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum Refused {
    #[error("url `{url}` is not a valid URL: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("url `{url}` has scheme `{scheme}`; only http and https URLs may be called")]
    Scheme { url: String, scheme: String },
    #[error("url `{0}` has no host")]
    NoHost(String),
    #[error("host `{host}` does not resolve: {reason}")]
    Unresolvable { host: String, reason: String },
    #[error(
        "{target} resolves to {ip}, a {class} address; add it to [outbound] allow in the config to permit it"
    )]
    Address {
        target: Target,
        ip: IpAddr,
        class: AddressClass,
    },
    #[error("{target} names a {class} host; add it to [outbound] allow in the config to permit it")]
    Host { target: Target, class: AddressClass },
    #[error(
        "url `{url}` answered {status} with a redirect to `{location}`; outbound calls do not follow redirects"
    )]
    Redirect {
        url: String,
        status: u16,
        location: String,
    },
}

impl Refused {
    /// The same refusal told about the whole URL rather than its host.
    fn for_url(self, url: &str) -> Refused {
        let target = Target::Url(url.to_owned());
        match self {
            Refused::Address { ip, class, .. } => Refused::Address { target, ip, class },
            Refused::Host { class, .. } => Refused::Host { target, class },
            other => other,
        }
    }
}

/// The class of an address that is not a public unicast one, or None for
/// public addresses.
pub fn classify(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    let [a, b, c, d] = ip.octets();
    let class = if matches!(
        [a, b, c, d],
        [169, 254, 169, 254] | [169, 254, 170, 2] | [100, 100, 100, 200] | [192, 0, 0, 192]
    ) {
        AddressClass::CloudMetadata
    } else if ip.is_broadcast() {
        AddressClass::Broadcast
    } else if a == 0 {
        AddressClass::Unspecified
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_private() {
        AddressClass::Private
    } else if ip.is_link_local() {
        AddressClass::LinkLocal
    } else if a == 100 && (b & 0xc0) == 64 {
        AddressClass::SharedCgnat
    } else if ip.is_multicast() {
        AddressClass::Multicast
    } else if a >= 240
        || ip.is_documentation()
        // Benchmarking, 198.18.0.0/15.
        || (a == 198 && (b & 0xfe) == 18)
        // IETF protocol assignments, 192.0.0.0/24, but for the two anycast
        // services that are globally reachable.
        || ([a, b, c] == [192, 0, 0] && d != 9 && d != 10)
    {
        AddressClass::Reserved
    } else {
        return None;
    };
    Some(class)
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    if ip.is_unspecified() {
        return Some(AddressClass::Unspecified);
    }
    if ip.is_loopback() {
        return Some(AddressClass::Loopback);
    }
    if let Some(v4) = embedded_v4(ip) {
        return classify_v4(v4);
    }
    let s = ip.segments();
    let class = if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        AddressClass::CloudMetadata
    } else if ip.is_multicast() {
        AddressClass::Multicast
    } else if ip.is_unique_local() || (s[0] & 0xffc0) == 0xfec0 {
        // fec0::/10 is the deprecated site-local range.
        AddressClass::Private
    } else if ip.is_unicast_link_local() {
        AddressClass::LinkLocal
    } else if (s[0] & 0xe000) != 0x2000
        // Documentation, 2001:db8::/32 and 3fff::/20.
        || (s[0] == 0x2001 && s[1] == 0xdb8)
        || (s[0] & 0xfff0) == 0x3ff0
        // IETF protocol assignments, 2001::/23, but for the few that are
        // globally reachable.
        || (s[0] == 0x2001 && s[1] < 0x200 && !v6_assignment_is_global(s))
    {
        AddressClass::Reserved
    } else {
        return None;
    };
    Some(class)
}

/// The globally reachable exceptions inside 2001::/23: the PCP, TURN and
/// DNS-SD anycast addresses, AMT, AS112 and ORCHIDv2.
fn v6_assignment_is_global(s: [u16; 8]) -> bool {
    matches!(s, [0x2001, 1, 0, 0, 0, 0, 0, 1..=3])
        || s[1] == 3
        || (s[1] == 4 && s[2] == 0x112)
        || (0x20..=0x2f).contains(&s[1])
}

/// The IPv4 address an IPv6 one stands for: IPv4-mapped (::ffff:a.b.c.d),
/// IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16).
/// Such addresses reach, or are translated to, the embedded IPv4 one, so
/// they are judged by it.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    match s {
        [0, 0, 0, 0, 0, 0xffff, hi, lo] | [0, 0, 0, 0, 0, 0, hi, lo] => Some(v4(hi, lo)),
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some(v4(hi, lo)),
        [0x2002, hi, lo, ..] => Some(v4(hi, lo)),
        _ => None,
    }
}

/// A host name as compared: lowercase, without the trailing root dot.
fn normalize_host(host: &str) -> String {
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// Whether `name` (normalized) is `localhost` or under it, which always
/// means this machine (RFC 6761) whatever DNS says.
fn is_localhost(name: &str) -> bool {
    name == "localhost" || name.ends_with(".localhost")
}

/// Whether `name` is a plausible DNS host name: dot-separated labels of
/// letters, digits, `-` and `_`, and not all-numeric at the end (which a URL
/// would read as an IPv4 address).
fn is_host_name(name: &str) -> bool {
    if name.is_empty() || name.len() > 253 {
        return false;
    }
    let labels_ok = name.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    let last_numeric = name
        .rsplit('.')
        .next()
        .is_some_and(|last| last.bytes().all(|b| b.is_ascii_digit()));
    labels_ok && !last_numeric
}

/// Resolves a host name to addresses; `localhost` names never reach DNS.
async fn resolve(host: &str) -> Result<Vec<IpAddr>, Refused> {
    let name = normalize_host(host);
    if is_localhost(&name) {
        return Ok(vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ]);
    }
    let unresolvable = |reason: String| Refused::Unresolvable {
        host: host.to_owned(),
        reason,
    };
    let addrs = tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host, 0)))
        .await
        .map_err(|_| {
            unresolvable(format!(
                "no answer within {} seconds",
                RESOLVE_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|e| unresolvable(e.to_string()))?;
    let mut ips: Vec<IpAddr> = Vec::new();
    for addr in addrs {
        if !ips.contains(&addr.ip()) {
            ips.push(addr.ip());
        }
    }
    if ips.is_empty() {
        return Err(unresolvable("it has no addresses".to_owned()));
    }
    Ok(ips)
}

impl OutboundPolicy {
    /// Parses the allow-list; an entry that is neither a host name, an IP
    /// nor a CIDR is an error naming it, so a typo cannot silently allow
    /// nothing.
    pub fn new(cfg: &OutboundConfig) -> Result<OutboundPolicy, String> {
        let mut policy = OutboundPolicy {
            allow_all: false,
            hosts: Vec::new(),
            suffixes: Vec::new(),
            nets: Vec::new(),
        };
        for entry in &cfg.allow {
            let trimmed = entry.trim();
            let unbracketed = trimmed
                .strip_prefix('[')
                .and_then(|rest| rest.strip_suffix(']'))
                .unwrap_or(trimmed);
            if let Ok(net) = trimmed.parse::<IpNet>() {
                policy.nets.push(net.trunc());
            } else if let Ok(ip) = unbracketed.parse::<IpAddr>() {
                policy.nets.push(IpNet::from(ip));
            } else {
                let name = normalize_host(trimmed);
                match name.strip_prefix("*.") {
                    Some(suffix) if is_host_name(suffix) => {
                        policy.suffixes.push(format!(".{suffix}"));
                    }
                    None if is_host_name(&name) => policy.hosts.push(name),
                    _ => {
                        return Err(format!(
                            "[outbound] allow: `{entry}` is neither a host name (\"hooks.internal\", \"*.corp.example\"), an IP address nor a CIDR (\"10.0.0.0/8\")"
                        ));
                    }
                }
            }
        }
        Ok(policy)
    }

    /// A policy that allows everything (for tests and for peers the person
    /// configured, who chose those URLs themselves).
    pub fn allow_all() -> OutboundPolicy {
        OutboundPolicy {
            allow_all: true,
            hosts: Vec::new(),
            suffixes: Vec::new(),
            nets: Vec::new(),
        }
    }

    /// Whether `host` is allow-listed by name.
    fn host_allowed(&self, host: &str) -> bool {
        let name = normalize_host(host);
        self.hosts.contains(&name) || self.suffixes.iter().any(|s| name.ends_with(s))
    }

    /// Whether `ip` lies in an allow-listed network; an address standing for
    /// an IPv4 one also counts when that IPv4 address does.
    fn ip_allowed(&self, ip: IpAddr) -> bool {
        let embedded = match ip {
            IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        self.nets
            .iter()
            .any(|net| net.contains(&ip) || embedded.is_some_and(|v4| net.contains(&v4)))
    }

    /// Refuses a host by its name alone (cloud metadata names), before it is
    /// resolved.
    fn check_name(&self, host: &str) -> Result<(), Refused> {
        if self.allow_all || self.host_allowed(host) {
            return Ok(());
        }
        if METADATA_NAMES.contains(&normalize_host(host).as_str()) {
            return Err(Refused::Host {
                target: Target::Host(host.to_owned()),
                class: AddressClass::CloudMetadata,
            });
        }
        Ok(())
    }

    /// Whether this address may be reached when named by `host` (host
    /// allow-list entries allow every address of that host; CIDR/IP entries
    /// allow addresses in them).
    pub fn check_ip(&self, host: &str, ip: IpAddr) -> Result<(), Refused> {
        if self.allow_all || self.host_allowed(host) || self.ip_allowed(ip) {
            return Ok(());
        }
        match classify(ip) {
            None => Ok(()),
            Some(class) => Err(Refused::Address {
                target: Target::Host(host.to_owned()),
                ip,
                class,
            }),
        }
    }

    /// Parses `url` (http/https with a host only), resolves its host and
    /// checks every address; refuses when any resolved address is refused
    /// (a name that mixes public and private addresses is refused). Used at
    /// config time so a caller hears at once.
    pub async fn check_url(&self, url: &str) -> Result<Url, Refused> {
        let parsed = Url::parse(url).map_err(|e| match e {
            url::ParseError::EmptyHost => Refused::NoHost(url.to_owned()),
            other => Refused::InvalidUrl {
                url: url.to_owned(),
                reason: other.to_string(),
            },
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(Refused::Scheme {
                url: url.to_owned(),
                scheme: parsed.scheme().to_owned(),
            });
        }
        match parsed.host() {
            None => return Err(Refused::NoHost(url.to_owned())),
            Some(Host::Ipv4(_) | Host::Ipv6(_)) => self.check_literal(&parsed)?,
            Some(Host::Domain(host)) => {
                self.check_name(host).map_err(|r| r.for_url(url))?;
                for ip in resolve(host).await? {
                    self.check_ip(host, ip).map_err(|r| r.for_url(url))?;
                }
            }
        }
        Ok(parsed)
    }

    /// An HTTP client for outbound deliveries: no redirects, no proxy, and a
    /// resolver that drops refused addresses, so it only ever connects to
    /// checked ones. IP-literal URLs bypass the resolver: pass them through
    /// [`OutboundPolicy::check_literal`] first.
    pub fn client(&self, timeout: Duration) -> Result<reqwest::Client, String> {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(CheckingResolver {
                policy: Arc::new(self.clone()),
            }))
            .timeout(timeout)
            .connect_timeout(timeout.min(MAX_CONNECT_TIMEOUT))
            .user_agent(concat!("countersign/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the outbound HTTP client: {e}"))
    }

    /// Checks an IP-literal URL host before a request (the resolver is not
    /// consulted for literals); names pass (the resolver checks them).
    pub fn check_literal(&self, url: &Url) -> Result<(), Refused> {
        let ip = match url.host() {
            None => return Err(Refused::NoHost(url.to_string())),
            Some(Host::Domain(_)) => return Ok(()),
            Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
        };
        let host = url.host_str().unwrap_or_default();
        self.check_ip(host, ip).map_err(|r| r.for_url(url.as_str()))
    }
}

/// The outbound client's DNS resolver: resolves with tokio and hands the
/// client only the addresses the policy allows.
struct CheckingResolver {
    policy: Arc<OutboundPolicy>,
}

impl reqwest::dns::Resolve for CheckingResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = Arc::clone(&self.policy);
        let host = name.as_str().to_owned();
        Box::pin(async move {
            policy.check_name(&host)?;
            let mut allowed: Vec<SocketAddr> = Vec::new();
            let mut first_refusal = None;
            for ip in resolve(&host).await? {
                match policy.check_ip(&host, ip) {
                    Ok(()) => allowed.push(SocketAddr::new(ip, 0)),
                    Err(refused) => {
                        tracing::debug!(%host, %ip, "outbound address dropped: {refused}");
                        first_refusal.get_or_insert(refused);
                    }
                }
            }
            match first_refusal {
                Some(refused) if allowed.is_empty() => Err(refused.into()),
                _ => Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn policy(allow: &[&str]) -> OutboundPolicy {
        OutboundPolicy::new(&OutboundConfig {
            allow: allow.iter().map(|s| s.to_string()).collect(),
        })
        .expect("valid allow-list")
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an IP address")
    }

    #[test]
    fn classify_table() {
        use AddressClass::*;
        let table: &[(&str, Option<AddressClass>)] = &[
            ("127.0.0.1", Some(Loopback)),
            ("127.255.0.9", Some(Loopback)),
            ("::1", Some(Loopback)),
            ("::ffff:127.0.0.1", Some(Loopback)),
            ("10.1.2.3", Some(Private)),
            ("172.16.0.1", Some(Private)),
            ("172.31.255.254", Some(Private)),
            ("192.168.1.1", Some(Private)),
            ("::ffff:10.1.2.3", Some(Private)),
            ("::10.1.2.3", Some(Private)),
            ("fc00::1", Some(Private)),
            ("fd12:3456::1", Some(Private)),
            ("fec0::1", Some(Private)),
            ("169.254.1.1", Some(LinkLocal)),
            ("fe80::1", Some(LinkLocal)),
            ("febf::1", Some(LinkLocal)),
            ("100.64.0.1", Some(SharedCgnat)),
            ("100.127.255.254", Some(SharedCgnat)),
            ("224.0.0.1", Some(Multicast)),
            ("239.255.255.250", Some(Multicast)),
            ("ff02::1", Some(Multicast)),
            ("ff0e::1", Some(Multicast)),
            ("0.0.0.0", Some(Unspecified)),
            ("0.1.2.3", Some(Unspecified)),
            ("::", Some(Unspecified)),
            ("255.255.255.255", Some(Broadcast)),
            ("240.0.0.1", Some(Reserved)),
            ("250.1.2.3", Some(Reserved)),
            ("192.0.2.1", Some(Reserved)),
            ("198.18.0.1", Some(Reserved)),
            ("192.0.0.8", Some(Reserved)),
            ("2001:db8::1", Some(Reserved)),
            ("100::1", Some(Reserved)),
            ("4000::1", Some(Reserved)),
            ("2001::1", Some(Reserved)),
            ("169.254.169.254", Some(CloudMetadata)),
            ("100.100.100.200", Some(CloudMetadata)),
            ("fd00:ec2::254", Some(CloudMetadata)),
            ("64:ff9b::a9fe:a9fe", Some(CloudMetadata)),
            ("::ffff:169.254.169.254", Some(CloudMetadata)),
            ("64:ff9b::7f00:1", Some(Loopback)),
            ("2002:c0a8:0101::1", Some(Private)),
            ("8.8.8.8", None),
            ("1.1.1.1", None),
            ("100.63.255.255", None),
            ("100.128.0.0", None),
            ("172.32.0.1", None),
            ("192.0.0.9", None),
            ("::ffff:8.8.8.8", None),
            ("64:ff9b::808:808", None),
            ("2001:4860:4860::8888", None),
            ("2606:4700:4700::1111", None),
            ("2001:20::1", None),
        ];
        for (addr, want) in table {
            assert_eq!(classify(ip(addr)), *want, "{addr}");
        }
    }

    #[test]
    fn class_names() {
        assert_eq!(AddressClass::SharedCgnat.to_string(), "CGNAT (shared)");
        assert_eq!(AddressClass::LinkLocal.to_string(), "link-local");
        assert_eq!(AddressClass::CloudMetadata.to_string(), "cloud metadata");
    }

    #[test]
    fn refusal_sentence() {
        let refused = policy(&[])
            .check_literal(&Url::parse("http://10.0.0.5/hook").expect("url"))
            .expect_err("private");
        assert_eq!(
            refused.to_string(),
            "url `http://10.0.0.5/hook` resolves to 10.0.0.5, a private address; add it to [outbound] allow in the config to permit it"
        );
    }

    #[test]
    fn cidr_allows_only_inside_it() {
        let p = policy(&["10.0.0.0/8", "fd00::/16"]);
        assert!(p.check_ip("h", ip("10.200.0.1")).is_ok());
        assert!(p.check_ip("h", ip("::ffff:10.0.0.1")).is_ok());
        assert!(p.check_ip("h", ip("fd00::5")).is_ok());
        assert!(matches!(
            p.check_ip("h", ip("192.168.0.1")),
            Err(Refused::Address {
                class: AddressClass::Private,
                ..
            })
        ));
        assert!(p.check_ip("h", ip("fd01::5")).is_err());
        assert!(p.check_ip("h", ip("127.0.0.1")).is_err());
        assert!(p.check_ip("h", ip("8.8.8.8")).is_ok());
    }

    #[test]
    fn ip_entries() {
        let p = policy(&["127.0.0.1", "::1", "[fe80::1]"]);
        assert!(p.check_ip("h", ip("127.0.0.1")).is_ok());
        assert!(p.check_ip("h", ip("::1")).is_ok());
        assert!(p.check_ip("h", ip("fe80::1")).is_ok());
        assert!(p.check_ip("h", ip("127.0.0.2")).is_err());
        assert!(p.check_ip("h", ip("fe80::2")).is_err());
    }

    #[test]
    fn host_entries_exact_and_wildcard() {
        let p = policy(&["hooks.internal", "*.corp.example"]);
        let private = ip("10.0.0.5");
        assert!(p.check_ip("hooks.internal", private).is_ok());
        assert!(p.check_ip("HOOKS.Internal.", private).is_ok());
        assert!(p.check_ip("a.hooks.internal", private).is_err());
        assert!(p.check_ip("a.corp.example", private).is_ok());
        assert!(p.check_ip("x.y.Corp.Example", private).is_ok());
        assert!(p.check_ip("corp.example", private).is_err());
        assert!(p.check_ip("evilcorp.example", private).is_err());
        assert!(p.check_ip("other.internal", private).is_err());
    }

    #[test]
    fn invalid_entries_are_named() {
        for bad in [
            "http://hooks.internal",
            "10.0.0.0/33",
            "",
            "*.",
            "a..b",
            "300.1.2.3",
            "host name",
            "*",
        ] {
            let err = OutboundPolicy::new(&OutboundConfig {
                allow: vec![bad.to_owned()],
            })
            .expect_err(bad);
            assert!(err.contains(&format!("`{bad}`")), "{err}");
        }
    }

    #[test]
    fn config_parses() {
        let cfg: OutboundConfig = toml::from_str("allow = [\"10.0.0.0/8\"]").expect("toml");
        assert_eq!(cfg.allow, vec!["10.0.0.0/8"]);
        assert!(toml::from_str::<OutboundConfig>("deny = []").is_err());
    }

    #[test]
    fn allow_all_allows_everything() {
        let p = OutboundPolicy::allow_all();
        assert!(p.check_ip("h", ip("127.0.0.1")).is_ok());
        assert!(p.check_ip("h", ip("169.254.169.254")).is_ok());
        assert!(p.check_name("metadata.google.internal").is_ok());
    }

    #[test]
    fn literal_check() {
        let p = policy(&[]);
        let url = |s: &str| Url::parse(s).expect("url");
        assert!(p.check_literal(&url("http://[::1]:8080/")).is_err());
        assert!(p.check_literal(&url("http://0x7f000001/")).is_err());
        assert!(p.check_literal(&url("http://8.8.8.8/")).is_ok());
        assert!(p.check_literal(&url("http://localhost/")).is_ok());
    }

    #[tokio::test]
    async fn check_url_refusals() {
        let p = policy(&[]);
        for url in ["ftp://example.com/x", "file:///etc/passwd"] {
            assert!(
                matches!(p.check_url(url).await, Err(Refused::Scheme { .. })),
                "{url}"
            );
        }
        assert_eq!(
            p.check_url("http://").await,
            Err(Refused::NoHost("http://".to_owned()))
        );
        assert!(matches!(
            p.check_url("not a url").await,
            Err(Refused::InvalidUrl { .. })
        ));
        assert_eq!(
            p.check_url("http://127.0.0.1:9/x").await,
            Err(Refused::Address {
                target: Target::Url("http://127.0.0.1:9/x".to_owned()),
                ip: ip("127.0.0.1"),
                class: AddressClass::Loopback,
            })
        );
        let localhost = p.check_url("http://localhost:9/").await;
        assert!(
            matches!(
                localhost,
                Err(Refused::Address {
                    class: AddressClass::Loopback,
                    ..
                })
            ),
            "{localhost:?}"
        );
        assert!(matches!(
            p.check_url("http://[::1]/").await,
            Err(Refused::Address {
                class: AddressClass::Loopback,
                ..
            })
        ));
        assert!(matches!(
            p.check_url("http://169.254.169.254/latest/meta-data/")
                .await,
            Err(Refused::Address {
                class: AddressClass::CloudMetadata,
                ..
            })
        ));
        let metadata = p
            .check_url("http://metadata.google.internal/computeMetadata/v1/")
            .await
            .expect_err("metadata name");
        assert_eq!(
            metadata.to_string(),
            "url `http://metadata.google.internal/computeMetadata/v1/` names a cloud metadata host; add it to [outbound] allow in the config to permit it"
        );
        let unresolvable = p
            .check_url("https://no-such-host.invalid/hook")
            .await
            .expect_err("unresolvable");
        assert!(
            matches!(&unresolvable, Refused::Unresolvable { host, .. } if host == "no-such-host.invalid"),
            "{unresolvable:?}"
        );
        assert!(
            unresolvable
                .to_string()
                .starts_with("host `no-such-host.invalid` does not resolve: "),
            "{unresolvable}"
        );
    }

    #[tokio::test]
    async fn check_url_allowed() {
        let p = policy(&["127.0.0.1"]);
        let url = p.check_url("http://127.0.0.1:9/x").await.expect("allowed");
        assert_eq!(url.as_str(), "http://127.0.0.1:9/x");
        // localhost also means ::1, which is not allow-listed.
        assert!(p.check_url("http://localhost:9/").await.is_err());
        let p = policy(&["localhost"]);
        assert!(p.check_url("http://localhost:9/").await.is_ok());
    }

    /// Serves `/` with a redirect to `/other` and `/other` with 200, one
    /// request per connection.
    async fn redirecting_server() -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&request);
                    let response = if text.starts_with("GET /other ") {
                        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                            .to_owned()
                    } else {
                        format!(
                            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{port}/other\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        )
                    };
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        port
    }

    #[tokio::test]
    async fn client_does_not_follow_redirects() {
        let port = redirecting_server().await;
        let p = policy(&["127.0.0.1"]);
        let client = p.client(Duration::from_secs(5)).expect("client");
        let url = Url::parse(&format!("http://127.0.0.1:{port}/")).expect("url");
        p.check_literal(&url).expect("allowed literal");
        let response = client.get(url).send().await.expect("response");
        assert_eq!(response.status(), reqwest::StatusCode::FOUND);
        assert_eq!(
            response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok()),
            Some(format!("http://127.0.0.1:{port}/other").as_str())
        );
        let other = client
            .get(format!("http://127.0.0.1:{port}/other"))
            .send()
            .await
            .expect("response");
        assert_eq!(other.status(), reqwest::StatusCode::OK);
    }

    #[tokio::test]
    async fn client_resolver_refuses_private_names() {
        let port = redirecting_server().await;
        let client = policy(&[]).client(Duration::from_secs(5)).expect("client");
        let err = client
            .get(format!("http://localhost:{port}/"))
            .send()
            .await
            .expect_err("refused by the resolver");
        let mut chain = Vec::new();
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&err);
        while let Some(e) = source {
            chain.push(e.to_string());
            source = e.source();
        }
        let sentence = "host `localhost` resolves to 127.0.0.1, a loopback address; add it to [outbound] allow in the config to permit it";
        assert!(chain.iter().any(|m| m == sentence), "{chain:#?}");
    }

    #[tokio::test]
    async fn client_resolver_keeps_allowed_addresses() {
        let port = redirecting_server().await;
        // localhost is 127.0.0.1 and ::1; only the first is allowed, so
        // the client connects there.
        let client = policy(&["127.0.0.1"])
            .client(Duration::from_secs(5))
            .expect("client");
        let response = client
            .get(format!("http://localhost:{port}/other"))
            .send()
            .await
            .expect("response");
        assert_eq!(response.status(), reqwest::StatusCode::OK);
    }
}
