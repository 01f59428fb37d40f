//! Network helpers: CIDR blocks for the proxy's origin deny-list, and socket setup.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use tokio::net::{TcpSocket, TcpStream};

/// An IP network such as `127.0.0.0/8` or `fe80::/10`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    bits: u8,
}

impl Cidr {
    /// Parses `addr/bits` (a bare address means one host).
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let bad = || format!("bad network {s:?}: use ADDRESS/BITS, e.g. 127.0.0.0/8");
        let (a, b) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let net: IpAddr = a.trim().parse().map_err(|_| bad())?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let bits = match b {
            Some(b) => b.trim().parse::<u8>().map_err(|_| bad())?,
            None => max,
        };
        if bits > max {
            return Err(bad());
        }
        Ok(Cidr { net, bits })
    }

    /// True when `ip` is inside the network (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let m = u32::MAX.checked_shl(32 - self.bits as u32).unwrap_or(0);
                u32::from(n) & m == u32::from(a) & m
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let m = u128::MAX.checked_shl(128 - self.bits as u32).unwrap_or(0);
                u128::from(n) & m == u128::from(a) & m
            }
            _ => false,
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.net, self.bits)
    }
}

impl<'de> serde::Deserialize<'de> for Cidr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Cidr::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for Cidr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// Connects to `to`, from `from` if given (selecting the interface a path leaves by).
pub async fn connect_from(to: SocketAddr, from: Option<IpAddr>) -> std::io::Result<TcpStream> {
    let sock = if to.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(ip) = from {
        sock.bind(SocketAddr::new(ip, 0))?;
    }
    // Marked so that transparent interception skips mpbond's own connections; setting a mark
    // needs CAP_NET_ADMIN, and without it there are no rules to skip either.
    let _ = socket2::SockRef::from(&sock).set_mark(crate::primary::transparent::OWN_MARK);
    let s = sock.connect(to).await?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Resolves `host:port` and connects to the first address that answers.
pub async fn connect_name(addr: &str, from: Option<IpAddr>) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, format!("{addr}: no address"));
    for a in tokio::net::lookup_host(addr).await? {
        match connect_from(a, from).await {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_matching() {
        let c = Cidr::parse("127.0.0.0/8").unwrap();
        assert!(c.contains("127.1.2.3".parse().unwrap()));
        assert!(c.contains("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!c.contains("10.0.0.1".parse().unwrap()));
        let six = Cidr::parse("fe80::/10").unwrap();
        assert!(six.contains("fe80::1".parse().unwrap()));
        assert!(!six.contains("2001:db8::1".parse().unwrap()));
        assert!(Cidr::parse("0.0.0.0/0")
            .unwrap()
            .contains("8.8.8.8".parse().unwrap()));
        assert!(Cidr::parse("10.0.0.1")
            .unwrap()
            .contains("10.0.0.1".parse().unwrap()));
        assert!(Cidr::parse("10.0.0.0/33").is_err());
        assert!(Cidr::parse("nonsense")
            .unwrap_err()
            .contains("ADDRESS/BITS"));
    }
}
