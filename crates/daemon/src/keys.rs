//! Device identities: X25519 static key pairs, stored as base64 text.
//!
//! Every device (proxy, primary, helper) has one key pair; its public key is its identity. The
//! Noise handshakes (crate::link) prove possession of the private key, and the join tickets
//! (crate::ticket) use the same keys.

use std::fmt;
use std::path::Path;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use x25519_dalek::{PublicKey as XPublic, StaticSecret};

/// Errors loading or parsing keys.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file could not be read or written.
    #[error("key file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not a base64 key of 32 bytes.
    #[error("{what} is not a base64-encoded 32-byte key")]
    Format {
        /// What was being parsed.
        what: String,
    },
}

/// A device's public key, its identity.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PublicKey(pub [u8; 32]);

impl PublicKey {
    /// Parses base64 text.
    pub fn parse(s: &str) -> Result<PublicKey, KeyError> {
        decode32(s.trim(), "public key").map(PublicKey)
    }

    /// A short fingerprint for humans to compare during pairing: the first 8 bytes of its
    /// SHA-256, as four groups of hex.
    pub fn fingerprint(&self) -> String {
        use sha2::Digest;
        let h = sha2::Sha256::digest(self.0);
        h[..8]
            .chunks(2)
            .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
            .collect::<Vec<_>>()
            .join("-")
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&B64.encode(self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({})", self.fingerprint())
    }
}

impl serde::Serialize for PublicKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for PublicKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        PublicKey::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A device's key pair.
#[derive(Clone)]
pub struct KeyPair {
    secret: [u8; 32],
    /// Its public half.
    pub public: PublicKey,
}

impl fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyPair({:?})", self.public)
    }
}

fn decode32(s: &str, what: &str) -> Result<[u8; 32], KeyError> {
    let v = B64.decode(s).map_err(|_| KeyError::Format {
        what: what.to_string(),
    })?;
    v.try_into().map_err(|_| KeyError::Format {
        what: what.to_string(),
    })
}

impl KeyPair {
    /// A fresh random key pair.
    pub fn generate() -> KeyPair {
        let mut secret = [0u8; 32];
        // The OS random source failing is not something a daemon can recover from.
        #[allow(clippy::expect_used)]
        getrandom::fill(&mut secret).expect("the OS random number generator failed");
        KeyPair::from_secret(secret)
    }

    /// The key pair of a private key.
    pub fn from_secret(secret: [u8; 32]) -> KeyPair {
        let public = XPublic::from(&StaticSecret::from(secret));
        KeyPair {
            secret,
            public: PublicKey(public.to_bytes()),
        }
    }

    /// The private key, for the Noise handshake.
    pub fn secret(&self) -> &[u8; 32] {
        &self.secret
    }

    /// X25519 with a peer's public key: the secret shared by this device and that one,
    /// without any exchange (used to key join tickets between a primary and its proxy).
    pub fn shared_secret(&self, peer: &PublicKey) -> [u8; 32] {
        StaticSecret::from(self.secret)
            .diffie_hellman(&XPublic::from(peer.0))
            .to_bytes()
    }

    /// Parses the text of a key file: the base64 private key on one line (comments with `#`).
    pub fn parse(text: &str) -> Result<KeyPair, KeyError> {
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .unwrap_or("");
        decode32(line, "private key file").map(KeyPair::from_secret)
    }

    /// Reads a key file.
    pub fn load(path: &Path) -> Result<KeyPair, KeyError> {
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Io {
            path: path.display().to_string(),
            source,
        })?;
        KeyPair::parse(&text).map_err(|e| match e {
            KeyError::Format { .. } => KeyError::Format {
                what: format!("key file {}", path.display()),
            },
            other => other,
        })
    }

    /// Writes a key file readable only by its owner. Refuses to overwrite an existing file.
    pub fn save(&self, path: &Path) -> Result<(), KeyError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let io = |source| KeyError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(io)?;
        writeln!(
            f,
            "# mpbond private key; public key {}\n{}",
            self.public,
            B64.encode(self.secret)
        )
        .map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dh_agrees_and_files_round_trip() {
        let a = KeyPair::generate();
        let b = KeyPair::generate();
        assert_eq!(a.shared_secret(&b.public), b.shared_secret(&a.public));
        assert_ne!(a.public, b.public);
        let dir = std::env::temp_dir().join(format!("mpbond-key-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        a.save(&dir).unwrap();
        assert!(a.save(&dir).is_err(), "never overwrites a key");
        let back = KeyPair::load(&dir).unwrap();
        assert_eq!(back.public, a.public);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o600
        );
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn bad_keys_are_clear_errors() {
        assert!(PublicKey::parse("not base64!").is_err());
        assert!(PublicKey::parse("AAAA").is_err());
        let e = KeyPair::parse("# only a comment\n").unwrap_err();
        assert!(e.to_string().contains("32-byte"), "{e}");
        let k = KeyPair::generate();
        assert_eq!(PublicKey::parse(&k.public.to_string()).unwrap(), k.public);
        assert_eq!(k.public.fingerprint().len(), 19);
    }
}
