//! The SSRF guard of `web_fetch`: which URLs may be fetched, and which addresses their hosts
//! may resolve to.
//!
//! Models write URLs, and fetched pages carry prompt injections that ask for internal
//! addresses (`http://169.254.169.254/latest/meta-data/`, `http://localhost:8080/admin`). The
//! boundary is drawn here, in code, not in the prompt:
//!
//! - only `http` and `https`, and no credentials in the URL;
//! - the host is parsed by the `url` crate's WHATWG host parser, which already turns the odd
//!   IPv4 spellings (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`, percent-encoded or
//!   full-width digits) into the address they mean, so they are judged as that address;
//! - a domain name is resolved exactly once, through a [`Resolver`], and *every* address it
//!   resolves to must be public; the caller connects only to those checked addresses
//!   ([`Target::addrs`]), so a second, different DNS answer (DNS rebinding) is never used;
//! - IPv6 forms that carry an IPv4 address (IPv4-mapped, IPv4-compatible, NAT64, 6to4) are
//!   judged by the address they carry.
//!
//! An explicit allowlist ([`Guard::new`]) exempts addresses from the public-address rule; it
//! exists so tests can fetch from loopback servers, and is empty unless configured.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::LazyLock;

use futures_util::future::BoxFuture;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use url::{Host, Url};

/// Looks up the addresses of a domain name. Behind a trait so that tests can answer with
/// addresses of their choosing (and count the lookups).
pub trait Resolver: Send + Sync {
    /// The addresses of `host`, a domain name (never an IP literal: those are not looked up).
    fn lookup(&self, host: &str, port: u16) -> BoxFuture<'static, std::io::Result<Vec<IpAddr>>>;
}

/// The operating system's resolver (`getaddrinfo` through tokio).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn lookup(&self, host: &str, port: u16) -> BoxFuture<'static, std::io::Result<Vec<IpAddr>>> {
        let host = host.to_owned();
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), port)).await?;
            Ok(addrs.map(|addr| addr.ip()).collect())
        })
    }
}

/// What kind of non-public address a host resolved to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressKind {
    Loopback,
    /// RFC 1918 (10/8, 172.16/12, 192.168/16), and IPv6 site-local (fec0::/10, deprecated).
    Private,
    /// 169.254/16 (where cloud metadata services live) and fe80::/10.
    LinkLocal,
    /// 100.64/10, carrier-grade NAT (RFC 6598).
    SharedCgnat,
    /// fc00::/7 (RFC 4193).
    UniqueLocal,
    Multicast,
    /// 0.0.0.0/8 and `::`: on Linux, connecting to them reaches the local machine.
    Unspecified,
    Broadcast,
    /// 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20.
    Documentation,
    /// 198.18/15 and 2001:2::/48.
    Benchmarking,
    /// Everything else that is not global unicast: 240/4, 192.0.0/24, protocol assignments,
    /// discard prefixes, IPv6 outside 2000::/3, deprecated IPv4-compatible addresses.
    Reserved,
}

impl AddressKind {
    /// A stable name, recorded in the tool's meta (`refused`) and asserted by tests.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressKind::Loopback => "loopback",
            AddressKind::Private => "private",
            AddressKind::LinkLocal => "link_local",
            AddressKind::SharedCgnat => "shared_cgnat",
            AddressKind::UniqueLocal => "unique_local",
            AddressKind::Multicast => "multicast",
            AddressKind::Unspecified => "unspecified",
            AddressKind::Broadcast => "broadcast",
            AddressKind::Documentation => "documentation",
            AddressKind::Benchmarking => "benchmarking",
            AddressKind::Reserved => "reserved",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            AddressKind::Loopback => "a loopback address",
            AddressKind::Private => "a private-network address",
            AddressKind::LinkLocal => "a link-local address (where cloud metadata services live)",
            AddressKind::SharedCgnat => "a carrier-grade NAT address (100.64.0.0/10)",
            AddressKind::UniqueLocal => "a unique-local IPv6 address (fc00::/7)",
            AddressKind::Multicast => "a multicast address",
            AddressKind::Unspecified => "an unspecified address (it reaches this machine)",
            AddressKind::Broadcast => "the broadcast address",
            AddressKind::Documentation => "a documentation address",
            AddressKind::Benchmarking => "a benchmarking address",
            AddressKind::Reserved => "a reserved or special-purpose address",
        }
    }
}

/// How an IPv6 address carries the IPv4 address it was judged by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Embedding {
    /// `::ffff:a.b.c.d`
    Mapped,
    /// `::a.b.c.d` (deprecated)
    Compatible,
    /// `64:ff9b::a.b.c.d` (RFC 6052)
    Nat64,
    /// `2002:AABB:CCDD::/48` (RFC 3056)
    SixToFour,
}

impl fmt::Display for Embedding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Embedding::Mapped => "IPv4-mapped",
            Embedding::Compatible => "IPv4-compatible",
            Embedding::Nat64 => "NAT64",
            Embedding::SixToFour => "6to4",
        })
    }
}

/// Why an address may not be connected to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub kind: AddressKind,
    /// Set when an IPv6 address was judged by the IPv4 address inside it.
    pub embedded: Option<(Embedding, Ipv4Addr)>,
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.describe())?;
        if let Some((embedding, v4)) = self.embedded {
            write!(f, " ({embedding} form of {v4})")?;
        }
        Ok(())
    }
}

/// Why a URL was refused before any connection was made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("`{url}` is not a valid absolute URL ({reason})")]
    InvalidUrl { url: String, reason: String },
    #[error("only http and https URLs can be fetched, not `{scheme}:`")]
    Scheme { scheme: String },
    #[error("the URL carries credentials (user name or password); such URLs are not fetched")]
    Credentials,
    #[error("the URL has no host")]
    NoHost,
    #[error("`{host}` could not be resolved: {reason}")]
    Resolve { host: String, reason: String },
    #[error("`{host}` resolved to no address")]
    NoAddress { host: String },
    #[error("`{host}` is {address}, {blocked}; only public internet addresses can be fetched")]
    Address {
        host: String,
        address: IpAddr,
        blocked: Blocked,
    },
}

impl Refusal {
    /// A stable category, recorded in the tool's meta (`refused`) and asserted by tests: the
    /// address kind for refused addresses, else the rule that refused the URL.
    pub fn category(&self) -> &'static str {
        match self {
            Refusal::InvalidUrl { .. } => "invalid_url",
            Refusal::Scheme { .. } => "scheme",
            Refusal::Credentials => "credentials",
            Refusal::NoHost => "no_host",
            Refusal::Resolve { .. } => "resolve",
            Refusal::NoAddress { .. } => "no_address",
            Refusal::Address { blocked, .. } => blocked.kind.as_str(),
        }
    }
}

/// A URL that passed the guard, and the only addresses the connection may use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub url: Url,
    /// The host as the URL spells it: the name the pinned addresses answer for.
    pub host: String,
    /// Whether the host is a domain name (its addresses came from one lookup) rather than an
    /// IP literal.
    pub is_domain: bool,
    /// Every address checked, with the URL's port.
    pub addrs: Vec<SocketAddr>,
}

/// The checks, with the configured allowlist.
#[derive(Clone, Debug, Default)]
pub struct Guard {
    allow: Vec<IpNet>,
}

impl Guard {
    /// A guard exempting the `allow` networks (an address is a /32 or /128) from the
    /// public-address rule; scheme and credential rules still apply to them.
    pub fn new(allow: Vec<IpNet>) -> Guard {
        Guard { allow }
    }

    /// Whether `address` may be connected to.
    pub fn check_address(&self, address: IpAddr) -> Result<(), Blocked> {
        if self.allow.iter().any(|net| net.contains(&address)) {
            return Ok(());
        }
        match classify(address) {
            Some(blocked) => Err(blocked),
            None => Ok(()),
        }
    }

    /// Check `url` (scheme, credentials, host) without resolving anything: what can be said
    /// from the URL alone. IP literals are checked here too.
    pub fn check_url(&self, url: &str) -> Result<Url, Refusal> {
        let parsed = Url::parse(url.trim()).map_err(|error| Refusal::InvalidUrl {
            url: url.to_owned(),
            reason: error.to_string(),
        })?;
        self.check_parsed(&parsed)?;
        Ok(parsed)
    }

    fn check_parsed(&self, url: &Url) -> Result<(), Refusal> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refusal::Scheme {
                scheme: url.scheme().to_owned(),
            });
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refusal::Credentials);
        }
        let address = match url.host() {
            None => return Err(Refusal::NoHost),
            Some(Host::Domain("")) => return Err(Refusal::NoHost),
            Some(Host::Domain(_)) => return Ok(()),
            Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
        };
        self.check_address(address)
            .map_err(|blocked| Refusal::Address {
                host: url.host_str().unwrap_or_default().to_owned(),
                address,
                blocked,
            })
    }

    /// Check `url` fully: the URL rules, then the host's addresses, resolved exactly once
    /// through `resolver`. The returned [`Target`] holds the addresses to pin the connection
    /// to; nothing else may be connected to.
    pub async fn check(&self, url: Url, resolver: &dyn Resolver) -> Result<Target, Refusal> {
        self.check_parsed(&url)?;
        let host = url.host_str().unwrap_or_default().to_owned();
        let port = url.port_or_known_default().unwrap_or(80);
        let (ips, is_domain) = match url.host() {
            Some(Host::Ipv4(v4)) => (vec![IpAddr::V4(v4)], false),
            Some(Host::Ipv6(v6)) => (vec![IpAddr::V6(v6)], false),
            _ => {
                let ips = resolver
                    .lookup(&host, port)
                    .await
                    .map_err(|error| Refusal::Resolve {
                        host: host.clone(),
                        reason: error.to_string(),
                    })?;
                (ips, true)
            }
        };
        if ips.is_empty() {
            return Err(Refusal::NoAddress { host });
        }
        for &address in &ips {
            self.check_address(address)
                .map_err(|blocked| Refusal::Address {
                    host: host.clone(),
                    address,
                    blocked,
                })?;
        }
        let mut addrs: Vec<SocketAddr> = Vec::with_capacity(ips.len());
        for ip in ips {
            let addr = SocketAddr::new(ip, port);
            if !addrs.contains(&addr) {
                addrs.push(addr);
            }
        }
        Ok(Target {
            url,
            host,
            is_domain,
            addrs,
        })
    }
}

/// The special-purpose IPv4 ranges std has no stable predicate for.
static SPECIAL_V4: LazyLock<Vec<(Ipv4Net, AddressKind)>> = LazyLock::new(|| {
    [
        ("100.64.0.0/10", AddressKind::SharedCgnat),
        ("198.18.0.0/15", AddressKind::Benchmarking),
        ("192.0.0.0/24", AddressKind::Reserved),
        ("192.88.99.0/24", AddressKind::Reserved),
        ("240.0.0.0/4", AddressKind::Reserved),
    ]
    .into_iter()
    .map(|(net, kind)| (net.parse().expect("IPv4 range"), kind))
    .collect()
});

/// The special-purpose IPv6 ranges std has no stable predicate for, checked inside 2000::/3
/// (everything outside it is reserved anyway) and for NAT64's local-use prefix.
static SPECIAL_V6: LazyLock<Vec<(Ipv6Net, AddressKind)>> = LazyLock::new(|| {
    [
        ("64:ff9b:1::/48", AddressKind::Private),
        ("2001:db8::/32", AddressKind::Documentation),
        ("3fff::/20", AddressKind::Documentation),
        ("2001:2::/48", AddressKind::Benchmarking),
        // IETF protocol assignments, including Teredo (2001::/32), whose client address is
        // obfuscated and cannot be judged.
        ("2001::/23", AddressKind::Reserved),
        ("fec0::/10", AddressKind::Private),
    ]
    .into_iter()
    .map(|(net, kind)| (net.parse().expect("IPv6 range"), kind))
    .collect()
});

static NAT64: LazyLock<Ipv6Net> = LazyLock::new(|| "64:ff9b::/96".parse().expect("NAT64"));
static SIX_TO_FOUR: LazyLock<Ipv6Net> = LazyLock::new(|| "2002::/16".parse().expect("6to4"));
static COMPATIBLE: LazyLock<Ipv6Net> = LazyLock::new(|| "::/96".parse().expect("compat"));
static GLOBAL_UNICAST: LazyLock<Ipv6Net> =
    LazyLock::new(|| "2000::/3".parse().expect("global unicast"));

/// Why `address` is not a public internet address, or `None` when it is.
pub fn classify(address: IpAddr) -> Option<Blocked> {
    match address {
        IpAddr::V4(v4) => classify_v4(v4).map(|kind| Blocked {
            kind,
            embedded: None,
        }),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressKind> {
    let kind = if ip.octets()[0] == 0 {
        AddressKind::Unspecified
    } else if ip.is_loopback() {
        AddressKind::Loopback
    } else if ip.is_private() {
        AddressKind::Private
    } else if ip.is_link_local() {
        AddressKind::LinkLocal
    } else if ip.is_broadcast() {
        AddressKind::Broadcast
    } else if ip.is_multicast() {
        AddressKind::Multicast
    } else if ip.is_documentation() {
        AddressKind::Documentation
    } else {
        return SPECIAL_V4
            .iter()
            .find(|(net, _)| net.contains(&ip))
            .map(|(_, kind)| *kind);
    };
    Some(kind)
}

fn classify_v6(ip: Ipv6Addr) -> Option<Blocked> {
    let plain = |kind| {
        Some(Blocked {
            kind,
            embedded: None,
        })
    };
    if ip.is_unspecified() {
        return plain(AddressKind::Unspecified);
    }
    if ip.is_loopback() {
        return plain(AddressKind::Loopback);
    }
    // Forms that carry an IPv4 address are judged by it: a connection to them reaches it.
    let embedded = |embedding, v4: Ipv4Addr| {
        classify_v4(v4).map(|kind| Blocked {
            kind,
            embedded: Some((embedding, v4)),
        })
    };
    if let Some(v4) = ip.to_ipv4_mapped() {
        return embedded(Embedding::Mapped, v4);
    }
    let low_v4 = Ipv4Addr::from_bits(ip.to_bits() as u32);
    if NAT64.contains(&ip) {
        return embedded(Embedding::Nat64, low_v4);
    }
    if COMPATIBLE.contains(&ip) {
        // Deprecated and never routed to the public internet: refused even when the address
        // inside is public.
        return embedded(Embedding::Compatible, low_v4).or(plain(AddressKind::Reserved));
    }
    if SIX_TO_FOUR.contains(&ip) {
        let v4 = Ipv4Addr::from_bits((ip.to_bits() >> 80) as u32);
        if let Some(blocked) = embedded(Embedding::SixToFour, v4) {
            return Some(blocked);
        }
    }
    if ip.is_multicast() {
        return plain(AddressKind::Multicast);
    }
    if ip.is_unicast_link_local() {
        return plain(AddressKind::LinkLocal);
    }
    if ip.is_unique_local() {
        return plain(AddressKind::UniqueLocal);
    }
    if let Some((_, kind)) = SPECIAL_V6.iter().find(|(net, _)| net.contains(&ip)) {
        return plain(*kind);
    }
    if !GLOBAL_UNICAST.contains(&ip) {
        return plain(AddressKind::Reserved);
    }
    None
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;

    /// A resolver answering from a fixed table, without network; records every lookup.
    #[derive(Default)]
    struct TableResolver {
        table: HashMap<&'static str, Vec<IpAddr>>,
        lookups: Mutex<Vec<String>>,
    }

    impl TableResolver {
        fn new(entries: &[(&'static str, &[&str])]) -> TableResolver {
            TableResolver {
                table: entries
                    .iter()
                    .map(|(host, ips)| (*host, ips.iter().map(|ip| ip.parse().unwrap()).collect()))
                    .collect(),
                lookups: Mutex::default(),
            }
        }
    }

    impl Resolver for TableResolver {
        fn lookup(
            &self,
            host: &str,
            _port: u16,
        ) -> BoxFuture<'static, std::io::Result<Vec<IpAddr>>> {
            self.lookups.lock().unwrap().push(host.to_owned());
            let answer =
                self.table.get(host).cloned().ok_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::NotFound, "no such host")
                });
            Box::pin(async move { answer })
        }
    }

    fn resolver() -> TableResolver {
        TableResolver::new(&[
            (
                "example.com",
                &["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
            ),
            ("docs.rs", &["18.65.3.37"]),
            ("localhost", &["127.0.0.1", "::1"]),
            ("localhost.", &["127.0.0.1"]),
            ("metadata.google.internal", &["169.254.169.254"]),
            // A public name with one private address among public ones.
            ("mixed.example", &["8.8.8.8", "10.0.0.5"]),
            ("ula.example", &["fd12:3456:789a::1"]),
            ("127.0.0.1.nip.io", &["127.0.0.1"]),
            ("empty.example", &[]),
        ])
    }

    fn decide(url: &str) -> Result<Target, Refusal> {
        let guard = Guard::default();
        let resolver = resolver();
        let url = guard.check_url(url)?;
        futures_util::FutureExt::now_or_never(guard.check(url, &resolver))
            .expect("the table resolver answers at once")
    }

    /// Every hostile URL is refused, for the expected reason (category).
    #[test]
    fn hostile_urls_are_refused_with_their_reason() {
        let corpus: &[(&str, &str)] = &[
            // Schemes.
            ("file:///etc/passwd", "scheme"),
            ("ftp://example.com/file", "scheme"),
            ("gopher://127.0.0.1:6379/_INFO", "scheme"),
            ("dict://127.0.0.1:11211/stats", "scheme"),
            ("ldap://127.0.0.1/", "scheme"),
            ("data:text/html,<script>alert(1)</script>", "scheme"),
            ("javascript:alert(1)", "scheme"),
            ("ws://example.com/socket", "scheme"),
            // Credentials, including the userinfo trick that hides the real host.
            ("http://user:pass@example.com/", "credentials"),
            ("https://token@example.com/", "credentials"),
            ("http://example.com@127.0.0.1/", "credentials"),
            // Not URLs.
            ("example.com/page", "invalid_url"),
            ("http://", "invalid_url"),
            ("http://[::1/", "invalid_url"),
            ("http://exa mple.com/", "invalid_url"),
            // Loopback, in every spelling the WHATWG host parser accepts.
            ("http://127.0.0.1/", "loopback"),
            ("http://127.0.0.1:8080/admin", "loopback"),
            ("http://127.1/", "loopback"),
            ("http://127.0.1/", "loopback"),
            ("http://2130706433/", "loopback"),
            ("http://0x7f000001/", "loopback"),
            ("http://0x7f.1/", "loopback"),
            ("http://0177.0.0.1/", "loopback"),
            ("http://017700000001/", "loopback"),
            ("http://127.000.000.001/", "loopback"),
            ("http://%31%32%37.0.0.1/", "loopback"),
            ("http://\u{ff11}\u{ff12}\u{ff17}.0.0.1/", "loopback"),
            ("http://127.0.0.1\\@example.com/", "loopback"),
            ("http://127.255.255.254/", "loopback"),
            ("http://[::1]/", "loopback"),
            ("http://[0:0:0:0:0:0:0:1]/", "loopback"),
            ("http://localhost/", "loopback"),
            ("http://LOCALHOST:3000/", "loopback"),
            ("http://localhost./", "loopback"),
            ("http://127.0.0.1.nip.io/", "loopback"),
            // IPv6 forms that carry a non-public IPv4 address.
            ("http://[::ffff:127.0.0.1]/", "loopback"),
            ("http://[::ffff:7f00:1]/", "loopback"),
            ("http://[0:0:0:0:0:ffff:169.254.169.254]/", "link_local"),
            ("http://[::ffff:10.0.0.1]/", "private"),
            ("http://[64:ff9b::127.0.0.1]/", "loopback"),
            ("http://[64:ff9b::a9fe:a9fe]/", "link_local"),
            ("http://[2002:7f00:1::]/", "loopback"),
            ("http://[2002:c0a8:101::1]/", "private"),
            ("http://[::127.0.0.1]/", "loopback"),
            ("http://[::8.8.8.8]/", "reserved"),
            // Private networks and cloud metadata.
            ("http://10.0.0.1/", "private"),
            ("http://10.255.255.255/", "private"),
            ("http://172.16.0.1/", "private"),
            ("http://172.31.255.254/", "private"),
            ("http://192.168.1.1/", "private"),
            ("http://3232235777/", "private"),
            ("http://0xc0.0xa8.1.1/", "private"),
            ("http://169.254.169.254/latest/meta-data/", "link_local"),
            ("http://169.254.170.2/v2/credentials", "link_local"),
            ("http://2852039166/", "link_local"),
            (
                "http://metadata.google.internal/computeMetadata/v1/",
                "link_local",
            ),
            ("http://[fe80::1]/", "link_local"),
            ("http://100.64.0.1/", "shared_cgnat"),
            ("http://100.127.255.254/", "shared_cgnat"),
            ("http://[fd00::1]/", "unique_local"),
            ("http://[fc00::1]/", "unique_local"),
            ("http://ula.example/", "unique_local"),
            ("http://[fec0::1]/", "private"),
            ("http://[64:ff9b:1::1]/", "private"),
            // One private address among public ones is enough to refuse.
            ("http://mixed.example/", "private"),
            // Unspecified, broadcast, multicast.
            ("http://0.0.0.0/", "unspecified"),
            ("http://0/", "unspecified"),
            ("http://0.1.2.3/", "unspecified"),
            ("http://[::]/", "unspecified"),
            ("http://255.255.255.255/", "broadcast"),
            ("http://224.0.0.1/", "multicast"),
            ("http://239.255.255.250/", "multicast"),
            ("http://[ff02::1]/", "multicast"),
            // Documentation, benchmarking, reserved.
            ("http://192.0.2.10/", "documentation"),
            ("http://198.51.100.7/", "documentation"),
            ("http://203.0.113.9/", "documentation"),
            ("http://[2001:db8::1]/", "documentation"),
            ("http://198.18.0.1/", "benchmarking"),
            ("http://[2001:2::1]/", "benchmarking"),
            ("http://240.0.0.1/", "reserved"),
            ("http://192.0.0.8/", "reserved"),
            ("http://[2001::1]/", "reserved"),
            ("http://[100::1]/", "reserved"),
            // Names that do not resolve.
            ("http://no-such-host.invalid/", "resolve"),
            ("http://empty.example/", "no_address"),
        ];
        assert!(corpus.len() >= 40);
        let mut wrong = Vec::new();
        for (url, expected) in corpus {
            match decide(url) {
                Ok(target) => wrong.push(format!("{url}: accepted ({:?})", target.addrs)),
                Err(refusal) if refusal.category() != *expected => wrong.push(format!(
                    "{url}: refused as {} ({refusal}), expected {expected}",
                    refusal.category()
                )),
                Err(refusal) => assert!(!refusal.to_string().is_empty()),
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn public_urls_are_accepted_with_their_addresses() {
        let corpus: &[(&str, &[&str])] = &[
            (
                "https://example.com/",
                &[
                    "93.184.215.14:443",
                    "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:443",
                ],
            ),
            (
                "http://example.com:8080/a?b=c#d",
                &[
                    "93.184.215.14:8080",
                    "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:8080",
                ],
            ),
            (
                "https://EXAMPLE.com/",
                &[
                    "93.184.215.14:443",
                    "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:443",
                ],
            ),
            ("https://docs.rs/reqwest", &["18.65.3.37:443"]),
            ("http://8.8.8.8/", &["8.8.8.8:80"]),
            ("http://1.1.1.1/dns-query", &["1.1.1.1:80"]),
            ("http://134744072/", &["8.8.8.8:80"]),
            ("http://100.63.255.255/", &["100.63.255.255:80"]),
            ("http://100.128.0.1/", &["100.128.0.1:80"]),
            ("http://172.32.0.1/", &["172.32.0.1:80"]),
            ("http://198.20.0.1/", &["198.20.0.1:80"]),
            (
                "https://[2606:4700:4700::1111]/",
                &["[2606:4700:4700::1111]:443"],
            ),
            ("http://[::ffff:8.8.8.8]/", &["[::ffff:8.8.8.8]:80"]),
            ("http://[64:ff9b::8.8.8.8]/", &["[64:ff9b::808:808]:80"]),
            ("http://[2002:808:808::1]/", &["[2002:808:808::1]:80"]),
        ];
        for (url, addrs) in corpus {
            let target = decide(url).unwrap_or_else(|refusal| panic!("{url}: {refusal}"));
            let expected: Vec<SocketAddr> = addrs.iter().map(|a| a.parse().unwrap()).collect();
            assert_eq!(target.addrs, expected, "{url}");
        }
    }

    #[test]
    fn a_domain_is_looked_up_once_and_literals_not_at_all() {
        let guard = Guard::default();
        let resolver = resolver();
        let check = |url: &str| {
            let url = guard.check_url(url)?;
            futures_util::FutureExt::now_or_never(guard.check(url, &resolver)).unwrap()
        };
        assert!(check("https://example.com/").unwrap().is_domain);
        assert!(!check("http://8.8.8.8/").unwrap().is_domain);
        assert!(check("http://127.1/").is_err());
        assert_eq!(*resolver.lookups.lock().unwrap(), ["example.com"]);
    }

    #[test]
    fn the_allowlist_exempts_only_its_networks() {
        let guard = Guard::new(vec!["127.0.0.1/32".parse().unwrap()]);
        assert_eq!(guard.check_address("127.0.0.1".parse().unwrap()), Ok(()));
        assert_eq!(
            guard
                .check_address("127.0.0.2".parse().unwrap())
                .unwrap_err()
                .kind,
            AddressKind::Loopback
        );
        assert_eq!(
            guard
                .check_address("::1".parse().unwrap())
                .unwrap_err()
                .kind,
            AddressKind::Loopback
        );
        // The scheme and credential rules still hold for allowed addresses.
        assert_eq!(
            guard
                .check_url("http://a:b@127.0.0.1/")
                .unwrap_err()
                .category(),
            "credentials"
        );
        assert_eq!(
            guard.check_url("ftp://127.0.0.1/").unwrap_err().category(),
            "scheme"
        );
    }

    #[test]
    fn refusals_say_what_the_address_is() {
        let refusal = decide("http://[::ffff:169.254.169.254]/").unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "`[::ffff:a9fe:a9fe]` is ::ffff:169.254.169.254, a link-local address (where cloud metadata services live) (IPv4-mapped form of 169.254.169.254); only public internet addresses can be fetched"
        );
        let refusal = decide("http://0x7f.1/").unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "`127.0.0.1` is 127.0.0.1, a loopback address; only public internet addresses can be fetched"
        );
    }
}
