//! The Noise transport cipher, in place.
//!
//! After the handshake, Noise encrypts each transport message with the cipher's key and a
//! 64-bit counter nonce (`Noise_*_AESGCM_*`: AES-256-GCM, nonce = 32 zero bits followed by the
//! big-endian counter, empty associated data; Noise spec §5.1 and §12.4). snow provides this
//! only between separate input and output buffers, which costs a copy and a zero-fill per
//! record; ring can do it in the buffer the bytes already sit in. The keys come from snow's
//! handshake (`dangerously_get_raw_split`), and a test checks that records made here and by
//! snow's transport state are interchangeable.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};

/// Bytes of the authentication tag.
pub const TAG_LEN: usize = 16;

/// One direction's key and its nonce counter.
pub struct RecordKey {
    key: LessSafeKey,
    nonce: u64,
}

impl std::fmt::Debug for RecordKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RecordKey(nonce {})", self.nonce)
    }
}

/// A record failed authentication, or the nonce space is exhausted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("record failed authentication")]
pub struct CryptoError;

fn nonce(n: u64) -> Nonce {
    let mut b = [0u8; 12];
    b[4..].copy_from_slice(&n.to_be_bytes());
    Nonce::assume_unique_for_key(b)
}

impl RecordKey {
    /// A key from the handshake's split, starting at nonce 0.
    pub fn new(k: &[u8; 32]) -> RecordKey {
        // A 32-byte key always fits AES-256-GCM.
        #[allow(clippy::expect_used)]
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, k).expect("32-byte AES key"));
        RecordKey { key, nonce: 0 }
    }

    /// Encrypts `buf` in place and returns the tag to append.
    pub fn seal(&mut self, buf: &mut [u8]) -> Result<[u8; TAG_LEN], CryptoError> {
        // Noise forbids the last nonce (2^64 - 1); a link never gets near it.
        if self.nonce == u64::MAX {
            return Err(CryptoError);
        }
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce(self.nonce), Aad::empty(), buf)
            .map_err(|_| CryptoError)?;
        self.nonce += 1;
        let mut t = [0u8; TAG_LEN];
        t.copy_from_slice(tag.as_ref());
        Ok(t)
    }

    /// Decrypts a ciphertext-and-tag in place; returns the plaintext length.
    pub fn open(&mut self, buf: &mut [u8]) -> Result<usize, CryptoError> {
        if self.nonce == u64::MAX {
            return Err(CryptoError);
        }
        let n = self
            .key
            .open_in_place(nonce(self.nonce), Aad::empty(), buf)
            .map_err(|_| CryptoError)?
            .len();
        self.nonce += 1;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records made with ring in place and with snow's transport state are the same.
    #[test]
    fn interoperates_with_snow_transport() {
        let params: snow::params::NoiseParams = crate::link::NOISE_PATTERN.parse().unwrap();
        let ik = snow::Builder::new(params.clone())
            .generate_keypair()
            .unwrap();
        let rk = snow::Builder::new(params.clone())
            .generate_keypair()
            .unwrap();
        let mut i = snow::Builder::new(params.clone())
            .local_private_key(&ik.private)
            .unwrap()
            .remote_public_key(&rk.public)
            .unwrap()
            .build_initiator()
            .unwrap();
        let mut r = snow::Builder::new(params)
            .local_private_key(&rk.private)
            .unwrap()
            .build_responder()
            .unwrap();
        let (mut buf, mut out) = (vec![0u8; 1024], vec![0u8; 1024]);
        let n = i.write_message(&[], &mut buf).unwrap();
        r.read_message(&buf[..n], &mut out).unwrap();
        let n = r.write_message(&[], &mut buf).unwrap();
        i.read_message(&buf[..n], &mut out).unwrap();
        let (i_send, i_recv) = i.dangerously_get_raw_split();
        let snow_r = r.into_stateless_transport_mode().unwrap();

        let mut mine = RecordKey::new(&i_send);
        for k in 0..3u64 {
            let msg = format!("record {k}").into_bytes();
            let mut b = msg.clone();
            let tag = mine.seal(&mut b).unwrap();
            b.extend_from_slice(&tag);
            let mut plain = vec![0u8; 64];
            let m = snow_r.read_message(k, &b, &mut plain).unwrap();
            assert_eq!(&plain[..m], &msg[..]);
        }
        let mut theirs = RecordKey::new(&i_recv);
        for k in 0..3u64 {
            let mut wire = vec![0u8; 64];
            let m = snow_r.write_message(k, b"from snow", &mut wire).unwrap();
            let n = theirs.open(&mut wire[..m]).unwrap();
            assert_eq!(&wire[..n], b"from snow");
        }
        // Tampering fails.
        let mut b = b"abc".to_vec();
        let tag = mine.seal(&mut b).unwrap();
        b.extend_from_slice(&tag);
        b[0] ^= 1;
        let mut other = RecordKey::new(&i_send);
        other.nonce = 3;
        assert_eq!(other.open(&mut b), Err(CryptoError));
    }
}
