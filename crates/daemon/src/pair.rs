//! Pairing: how devices learn each other's public keys.
//!
//! Each device prints a one-line **pairing card** with `mpbond pair card`; the other device
//! adds it to its configuration with `mpbond pair add`. A card is
//!
//! ```text
//! mpbond-pair:1:<role>:<name>:<base64 public key>:<address or ->:<check>
//! ```
//!
//! where `check` is the first 8 hex digits of SHA-256 over everything before it, so a
//! mistyped or truncated card is refused. Both sides also show the key's fingerprint
//! (`xxxx-xxxx-xxxx-xxxx`), which the user compares on the two screens: that comparison is what
//! rules out a swapped card. What adding a card does depends on its role:
//!
//! | card from | added to |
//! | --- | --- |
//! | a primary | `[proxy] allow` and `[helper] allow`, whichever exist |
//! | a helper | a new `[[primary.helper]]` with one pipe to the card's address |
//! | a proxy | `[primary] proxy` and `proxy_key` |

use sha2::{Digest, Sha256};
use toml_edit::{value, Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table};

use crate::keys::PublicKey;

/// The role a card advertises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CardRole {
    /// A primary.
    Primary,
    /// A helper.
    Helper,
    /// A proxy.
    Proxy,
}

impl CardRole {
    fn as_str(self) -> &'static str {
        match self {
            CardRole::Primary => "primary",
            CardRole::Helper => "helper",
            CardRole::Proxy => "proxy",
        }
    }

    /// Parses `primary`, `helper` or `proxy`.
    pub fn parse(s: &str) -> Result<CardRole, String> {
        match s {
            "primary" => Ok(CardRole::Primary),
            "helper" => Ok(CardRole::Helper),
            "proxy" => Ok(CardRole::Proxy),
            other => Err(format!("unknown role {other:?}: primary, helper or proxy")),
        }
    }
}

/// A decoded pairing card.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Card {
    /// What the device is.
    pub role: CardRole,
    /// Its name.
    pub name: String,
    /// Its key.
    pub key: PublicKey,
    /// Where to reach it (a helper's pipe listener, a proxy's listener).
    pub addr: Option<String>,
}

fn check(body: &str) -> String {
    let h = Sha256::digest(body.as_bytes());
    h[..4].iter().map(|b| format!("{b:02x}")).collect()
}

impl Card {
    /// The card's text.
    pub fn encode(&self) -> String {
        let body = format!(
            "mpbond-pair:1:{}:{}:{}:{}",
            self.role.as_str(),
            self.name,
            self.key,
            self.addr.as_deref().unwrap_or("-")
        );
        let c = check(&body);
        format!("{body}:{c}")
    }

    /// Parses a card, checking its checksum.
    pub fn decode(text: &str) -> Result<Card, String> {
        let t = text.trim();
        let (body, c) = t
            .rsplit_once(':')
            .ok_or("not a pairing card (expected mpbond-pair:1:...)")?;
        if check(body) != c {
            return Err("pairing card checksum does not match: mistyped or truncated".into());
        }
        // The address may contain ':' (host:port, IPv6), so split the fixed fields first.
        let mut parts = body.splitn(6, ':');
        let (magic, ver) = (parts.next(), parts.next());
        if magic != Some("mpbond-pair") || ver != Some("1") {
            return Err("not a version 1 pairing card".into());
        }
        let role = CardRole::parse(parts.next().unwrap_or_default())?;
        let name = parts.next().unwrap_or_default().to_string();
        if name.is_empty() || name.contains(':') {
            return Err("pairing card has no valid name".into());
        }
        let key = PublicKey::parse(parts.next().unwrap_or_default()).map_err(|e| e.to_string())?;
        let addr = match parts.next() {
            Some("-") | None => None,
            Some(a) => Some(a.to_string()),
        };
        Ok(Card {
            role,
            name,
            key,
            addr,
        })
    }
}

/// Adds a card to a configuration's text, keeping its comments and layout. Returns the new
/// text and a sentence per change made.
pub fn add_to_config(text: &str, card: &Card) -> Result<(String, Vec<String>), String> {
    let mut doc: DocumentMut = text.parse().map_err(|e| format!("configuration: {e}"))?;
    let mut done = Vec::new();
    let peer = || {
        let mut t = InlineTable::new();
        t.insert("name", card.name.clone().into());
        t.insert("key", card.key.to_string().into());
        t
    };
    match card.role {
        CardRole::Primary => {
            for section in ["proxy", "helper"] {
                let Some(tbl) = doc.get_mut(section).and_then(Item::as_table_mut) else {
                    continue;
                };
                let allow = tbl
                    .entry("allow")
                    .or_insert(Item::Value(Array::new().into()))
                    .as_array_mut()
                    .ok_or(format!("[{section}] allow is not an array"))?;
                let present = allow.iter().any(|v| {
                    v.as_inline_table()
                        .and_then(|t| t.get("key"))
                        .and_then(|k| k.as_str())
                        == Some(&card.key.to_string())
                });
                if !present {
                    allow.push(peer());
                    done.push(format!("allowed primary {:?} in [{section}]", card.name));
                }
            }
        }
        CardRole::Helper => {
            let addr = card
                .addr
                .clone()
                .ok_or("a helper's card needs its pipe address (pair card --addr)")?;
            let primary = doc
                .get_mut("primary")
                .and_then(Item::as_table_mut)
                .ok_or("no [primary] section to add a helper to")?;
            let helpers = primary
                .entry("helper")
                .or_insert(Item::ArrayOfTables(ArrayOfTables::new()))
                .as_array_of_tables_mut()
                .ok_or("primary.helper is not an array of tables")?;
            if helpers
                .iter()
                .any(|h| h.get("key").and_then(|k| k.as_str()) == Some(&card.key.to_string()))
            {
                return Err(format!("helper {:?} is already configured", card.name));
            }
            let mut h = Table::new();
            h["name"] = value(card.name.clone());
            h["key"] = value(card.key.to_string());
            let mut pipes = ArrayOfTables::new();
            let mut p = Table::new();
            p["name"] = value("pipe");
            p["addr"] = value(addr.clone());
            pipes.push(p);
            h.insert("pipe", Item::ArrayOfTables(pipes));
            helpers.push(h);
            done.push(format!(
                "added helper {:?} with a pipe to {addr}",
                card.name
            ));
        }
        CardRole::Proxy => {
            let addr = card
                .addr
                .clone()
                .ok_or("a proxy's card needs its address (pair card --addr)")?;
            let primary = doc
                .get_mut("primary")
                .and_then(Item::as_table_mut)
                .ok_or("no [primary] section to set the proxy in")?;
            primary["proxy"] = value(addr.clone());
            primary["proxy_key"] = value(card.key.to_string());
            done.push(format!("proxy set to {:?} at {addr}", card.name));
        }
    }
    if done.is_empty() {
        return Err("nothing to change: already paired, or no section this card belongs in".into());
    }
    Ok((doc.to_string(), done))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::keys::KeyPair;
    use std::path::Path;

    fn card(role: CardRole, addr: Option<&str>) -> Card {
        Card {
            role,
            name: "watch".into(),
            key: KeyPair::generate().public,
            addr: addr.map(String::from),
        }
    }

    #[test]
    fn card_round_trip_and_tamper_detection() {
        let c = card(CardRole::Helper, Some("[fe80::1]:7100"));
        let text = c.encode();
        assert_eq!(Card::decode(&text).unwrap(), c);
        let mut bad = text.clone();
        bad.replace_range(30..31, if &text[30..31] == "A" { "B" } else { "A" });
        assert!(Card::decode(&bad).unwrap_err().contains("checksum"));
        assert!(Card::decode("hello").is_err());
    }

    #[test]
    fn adding_cards_edits_the_right_sections_and_keeps_comments() {
        let proxy_key = KeyPair::generate().public;
        let base = format!(
            "# my phone\nkey = \"phone.key\"\n\n[primary]\nproxy = \"old:1\"\nproxy_key = \"{proxy_key}\"\nsocks = \"127.0.0.1:1080\"\n\n[helper]\nlisten = \"0.0.0.0:7100\"\n"
        );
        let helper = card(CardRole::Helper, Some("192.168.49.2:7100"));
        let (t, msgs) = add_to_config(&base, &helper).unwrap();
        assert!(t.starts_with("# my phone"), "comments kept");
        assert_eq!(msgs.len(), 1);
        let friend = card(CardRole::Primary, None);
        let (t, _) = add_to_config(&t, &friend).unwrap();
        let proxy = card(CardRole::Proxy, Some("203.0.113.7:7000"));
        let (t, _) = add_to_config(&t, &proxy).unwrap();
        let c = Config::parse(&t, Path::new("/tmp/x.toml")).unwrap();
        let p = c.primary.unwrap();
        assert_eq!(p.helper[0].key, helper.key);
        assert_eq!(p.helper[0].pipe[0].addr.to_string(), "192.168.49.2:7100");
        assert_eq!(
            (p.proxy.as_str(), p.proxy_key),
            ("203.0.113.7:7000", proxy.key)
        );
        assert_eq!(c.helper.unwrap().allow[0].key, friend.key);
        assert!(add_to_config(&t, &friend).is_err(), "already paired");
        assert!(add_to_config(&t, &helper).is_err(), "helper already there");
    }
}
