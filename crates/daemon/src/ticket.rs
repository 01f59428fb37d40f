//! Join tickets: a primary's signed permission for one helper to join (or open) its session.
//!
//! A primary sends a ticket to a helper in `INIT_MP_JOIN`; the helper presents it to the proxy
//! in `MP_JOIN`. The proxy accepts the join only if the ticket is authentic, names the helper
//! that is actually connected (its Noise-authenticated static key), is not expired and was not
//! used before. A forged, altered, borrowed or replayed ticket is refused.
//!
//! The ticket is authenticated with HMAC-SHA256 under a key only the primary and the proxy can
//! compute: `SHA-256("mpbond ticket v1" || X25519(primary, proxy))`, the static-static
//! Diffie-Hellman secret of their two key pairs. No extra round trip to the proxy is needed, so a
//! helper can join even while the primary's own WAN path is down.
//!
//! Layout (all in network byte order):
//!
//! | field | size |
//! | --- | --- |
//! | version = 1 | 1 |
//! | proxy public key | 32 |
//! | proxy address length `n` | 1 |
//! | proxy address (`host:port`, UTF-8) | `n` ≤ 200 |
//! | primary public key | 32 |
//! | helper public key | 32 |
//! | session id (0 for `INIT_MP`) | 8 |
//! | nonce | 16 |
//! | expiry, Unix milliseconds | 8 |
//! | HMAC-SHA256 of all the above | 32 |

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::keys::{KeyPair, PublicKey};

/// Tickets are valid this long after they are made.
pub const TICKET_LIFETIME: Duration = Duration::from_secs(120);
const VERSION: u8 = 1;
const MAX_ADDR: usize = 200;

/// Why a ticket was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TicketError {
    /// The bytes do not form a ticket.
    #[error("malformed ticket: {0}")]
    Malformed(&'static str),
    /// The ticket is for another proxy.
    #[error("ticket is for a different proxy")]
    WrongProxy,
    /// The MAC does not verify: forged or altered.
    #[error("ticket signature does not verify (forged or altered)")]
    BadSignature,
    /// The connected device is not the helper the ticket names.
    #[error("ticket was issued to a different helper")]
    WrongHelper,
    /// Past its expiry (or implausibly far in the future).
    #[error("ticket expired")]
    Expired,
    /// Seen before.
    #[error("ticket was already used (replay)")]
    Replayed,
    /// The primary is not allowed to use this proxy.
    #[error("primary is not on the proxy's allowlist")]
    UnknownPrimary,
    /// The session does not exist or belongs to another primary.
    #[error("no such session for this primary")]
    NoSuchSession,
}

/// A decoded ticket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ticket {
    /// The proxy it is for.
    pub proxy_key: PublicKey,
    /// Where that proxy listens.
    pub proxy_addr: String,
    /// The primary that issued it.
    pub primary_key: PublicKey,
    /// The helper it is for.
    pub helper_key: PublicKey,
    /// The session to join (0: open one, `INIT_MP`).
    pub session: u64,
    /// Random, unique per ticket.
    pub nonce: [u8; 16],
    /// Unix milliseconds.
    pub expires_ms: u64,
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn mac_key(shared: &[u8; 32]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"mpbond ticket v1");
    h.update(shared);
    h.finalize().into()
}

type HmacSha256 = Hmac<Sha256>;

fn hmac(key: &[u8; 32]) -> HmacSha256 {
    // HMAC accepts keys of any length, so this cannot fail.
    #[allow(clippy::expect_used)]
    HmacSha256::new_from_slice(key).expect("HMAC takes any key length")
}

impl Ticket {
    /// Makes a ticket as `primary` for `helper` to join `session` at the proxy.
    pub fn issue(
        primary: &KeyPair,
        proxy_key: PublicKey,
        proxy_addr: &str,
        helper_key: PublicKey,
        session: u64,
        now: SystemTime,
    ) -> Result<Vec<u8>, TicketError> {
        if proxy_addr.len() > MAX_ADDR {
            return Err(TicketError::Malformed(
                "proxy address longer than 200 bytes",
            ));
        }
        let mut nonce = [0u8; 16];
        #[allow(clippy::expect_used)]
        getrandom::fill(&mut nonce).expect("the OS random number generator failed");
        let t = Ticket {
            proxy_key,
            proxy_addr: proxy_addr.to_string(),
            primary_key: primary.public,
            helper_key,
            session,
            nonce,
            expires_ms: unix_ms(now + TICKET_LIFETIME),
        };
        let mut b = t.body();
        let mut m = hmac(&mac_key(&primary.shared_secret(&proxy_key)));
        m.update(&b);
        b.extend_from_slice(&m.finalize().into_bytes());
        Ok(b)
    }

    fn body(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(160 + self.proxy_addr.len());
        b.push(VERSION);
        b.extend_from_slice(&self.proxy_key.0);
        b.push(self.proxy_addr.len() as u8);
        b.extend_from_slice(self.proxy_addr.as_bytes());
        b.extend_from_slice(&self.primary_key.0);
        b.extend_from_slice(&self.helper_key.0);
        b.extend_from_slice(&self.session.to_be_bytes());
        b.extend_from_slice(&self.nonce);
        b.extend_from_slice(&self.expires_ms.to_be_bytes());
        b
    }

    /// Decodes a ticket without checking its signature (a helper reads where to connect; only
    /// the proxy can verify).
    pub fn decode(bytes: &[u8]) -> Result<Ticket, TicketError> {
        let mut r = bytes;
        fn take<'a>(r: &mut &'a [u8], n: usize) -> Result<&'a [u8], TicketError> {
            if r.len() < n {
                return Err(TicketError::Malformed("too short"));
            }
            let (a, b) = r.split_at(n);
            *r = b;
            Ok(a)
        }
        let key = |r: &mut &[u8]| -> Result<PublicKey, TicketError> {
            let mut k = [0u8; 32];
            k.copy_from_slice(take(r, 32)?);
            Ok(PublicKey(k))
        };
        if take(&mut r, 1)?[0] != VERSION {
            return Err(TicketError::Malformed("unknown version"));
        }
        let proxy_key = key(&mut r)?;
        let n = take(&mut r, 1)?[0] as usize;
        if n > MAX_ADDR {
            return Err(TicketError::Malformed("proxy address too long"));
        }
        let proxy_addr = std::str::from_utf8(take(&mut r, n)?)
            .map_err(|_| TicketError::Malformed("proxy address is not UTF-8"))?
            .to_string();
        let primary_key = key(&mut r)?;
        let helper_key = key(&mut r)?;
        let mut u = [0u8; 8];
        u.copy_from_slice(take(&mut r, 8)?);
        let session = u64::from_be_bytes(u);
        let mut nonce = [0u8; 16];
        nonce.copy_from_slice(take(&mut r, 16)?);
        u.copy_from_slice(take(&mut r, 8)?);
        let expires_ms = u64::from_be_bytes(u);
        take(&mut r, 32)?;
        if !r.is_empty() {
            return Err(TicketError::Malformed("trailing bytes"));
        }
        Ok(Ticket {
            proxy_key,
            proxy_addr,
            primary_key,
            helper_key,
            session,
            nonce,
            expires_ms,
        })
    }
}

/// The proxy's side: verifies tickets and remembers used nonces until they expire.
#[derive(Debug)]
pub struct TicketVerifier {
    proxy: KeyPair,
    seen: HashMap<[u8; 16], u64>,
}

impl TicketVerifier {
    /// A verifier for the proxy with key pair `proxy`.
    pub fn new(proxy: KeyPair) -> Self {
        TicketVerifier {
            proxy,
            seen: HashMap::new(),
        }
    }

    /// Checks a ticket presented by the device authenticated as `presenter`, for a primary on
    /// the allowlist (`allowed`). On success the nonce is spent.
    pub fn verify(
        &mut self,
        bytes: &[u8],
        presenter: &PublicKey,
        allowed: impl Fn(&PublicKey) -> bool,
        now: SystemTime,
    ) -> Result<Ticket, TicketError> {
        let t = Ticket::decode(bytes)?;
        if t.proxy_key != self.proxy.public {
            return Err(TicketError::WrongProxy);
        }
        if !allowed(&t.primary_key) {
            return Err(TicketError::UnknownPrimary);
        }
        let (body, mac) = bytes.split_at(bytes.len() - 32);
        let mut m = hmac(&mac_key(&self.proxy.shared_secret(&t.primary_key)));
        m.update(body);
        m.verify_slice(mac).map_err(|_| TicketError::BadSignature)?;
        if t.helper_key != *presenter {
            return Err(TicketError::WrongHelper);
        }
        let now_ms = unix_ms(now);
        let max_ahead = (TICKET_LIFETIME + Duration::from_secs(60)).as_millis() as u64;
        if t.expires_ms < now_ms || t.expires_ms > now_ms + max_ahead {
            return Err(TicketError::Expired);
        }
        self.seen.retain(|_, exp| *exp >= now_ms);
        if self.seen.insert(t.nonce, t.expires_ms).is_some() {
            return Err(TicketError::Replayed);
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (KeyPair, KeyPair, KeyPair, TicketVerifier) {
        let proxy = KeyPair::generate();
        let primary = KeyPair::generate();
        let helper = KeyPair::generate();
        let v = TicketVerifier::new(proxy.clone());
        (proxy, primary, helper, v)
    }

    #[test]
    fn valid_ticket_verifies_once() {
        let (proxy, primary, helper, mut v) = setup();
        let now = SystemTime::now();
        let t =
            Ticket::issue(&primary, proxy.public, "proxy:7000", helper.public, 42, now).unwrap();
        let ok = v
            .verify(&t, &helper.public, |k| *k == primary.public, now)
            .unwrap();
        assert_eq!((ok.session, ok.proxy_addr.as_str()), (42, "proxy:7000"));
        assert_eq!(
            v.verify(&t, &helper.public, |_| true, now),
            Err(TicketError::Replayed)
        );
    }

    #[test]
    fn forged_altered_borrowed_expired_and_foreign_tickets_are_refused() {
        let (proxy, primary, helper, mut v) = setup();
        let now = SystemTime::now();
        let issue = || Ticket::issue(&primary, proxy.public, "p:1", helper.public, 7, now).unwrap();
        // Altered session id.
        let mut t = issue();
        let at = 1 + 32 + 1 + 3 + 32 + 32 + 7;
        t[at] ^= 1;
        assert_eq!(
            v.verify(&t, &helper.public, |_| true, now),
            Err(TicketError::BadSignature)
        );
        // Forged: made by a device that is not the primary, naming the primary.
        let mallory = KeyPair::generate();
        let mut forged =
            Ticket::issue(&mallory, proxy.public, "p:1", helper.public, 7, now).unwrap();
        forged[1 + 32 + 1 + 3..1 + 32 + 1 + 3 + 32].copy_from_slice(&primary.public.0);
        assert_eq!(
            v.verify(&forged, &helper.public, |_| true, now),
            Err(TicketError::BadSignature)
        );
        // Presented by someone other than the helper it names.
        assert_eq!(
            v.verify(&issue(), &mallory.public, |_| true, now),
            Err(TicketError::WrongHelper)
        );
        // Expired.
        let later = now + TICKET_LIFETIME + Duration::from_secs(1);
        assert_eq!(
            v.verify(&issue(), &helper.public, |_| true, later),
            Err(TicketError::Expired)
        );
        // Primary not on the allowlist.
        assert_eq!(
            v.verify(&issue(), &helper.public, |_| false, now),
            Err(TicketError::UnknownPrimary)
        );
        // For another proxy.
        let other = KeyPair::generate();
        let t = Ticket::issue(&primary, other.public, "p:1", helper.public, 7, now).unwrap();
        assert_eq!(
            v.verify(&t, &helper.public, |_| true, now),
            Err(TicketError::WrongProxy)
        );
        // Truncated.
        assert!(matches!(
            v.verify(&issue()[..50], &helper.public, |_| true, now),
            Err(TicketError::Malformed(_))
        ));
    }

    #[test]
    fn decode_never_panics_on_junk() {
        for n in 0..200 {
            let junk: Vec<u8> = (0..n).map(|i| (i * 7 + n) as u8).collect();
            let _ = Ticket::decode(&junk);
        }
        assert!(Ticket::issue(
            &KeyPair::generate(),
            KeyPair::generate().public,
            &"x".repeat(300),
            KeyPair::generate().public,
            1,
            SystemTime::now()
        )
        .is_err());
    }
}
