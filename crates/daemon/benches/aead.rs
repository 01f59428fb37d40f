//! Which AEAD the record layer should use: ring's AES-256-GCM against ChaCha20-Poly1305, each
//! sealing and opening 16 KiB records in place on one core.
//!
//! `cargo bench -p mpbond-daemon --bench aead`. Each cipher runs `REPS` rounds of `ROUND`
//! bytes, alternating, and the table gives the median rate per round (seal plus open, so one
//! byte counted once crosses both ends of a link).

use std::time::Instant;

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, CHACHA20_POLY1305};

const RECORD: usize = 16 << 10;
const ROUND: usize = 256 << 20;
const REPS: usize = 7;

fn round(key: &LessSafeKey, buf: &mut Vec<u8>) -> f64 {
    let t = Instant::now();
    for i in 0..(ROUND / RECORD) as u64 {
        buf.truncate(RECORD);
        let mut n = [0u8; 12];
        n[4..].copy_from_slice(&i.to_be_bytes());
        key.seal_in_place_append_tag(Nonce::assume_unique_for_key(n), Aad::empty(), buf)
            .expect("seal");
        let opened = key
            .open_in_place(Nonce::assume_unique_for_key(n), Aad::empty(), buf)
            .expect("open")
            .len();
        assert_eq!(opened, RECORD);
    }
    ROUND as f64 * 8.0 / t.elapsed().as_secs_f64() / 1e9
}

fn main() {
    let aes = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &[7; 32]).expect("key"));
    let chacha = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &[7; 32]).expect("key"));
    let mut buf = vec![0x5a; RECORD];
    let (mut a, mut c) = (Vec::new(), Vec::new());
    for _ in 0..REPS {
        a.push(round(&aes, &mut buf));
        c.push(round(&chacha, &mut buf));
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!("| AEAD (seal + open, 16 KiB records, one core) | Gbit/s, median of {REPS} |");
    println!("| --- | --- |");
    println!("| AES-256-GCM | {:.1} |", med(&mut a));
    println!("| ChaCha20-Poly1305 | {:.1} |", med(&mut c));
}
