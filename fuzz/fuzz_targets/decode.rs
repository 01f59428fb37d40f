//! Fuzz target: the frame decoder must never panic or over-allocate on any input, and every
//! frame it accepts must re-encode to the same bytes (apart from unknown flag bits, and a
//! `RADIOS` radio code from a later version, which reads as unknown and re-encodes as 0).
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Streaming decoder, fed in two pieces to exercise partial input.
    let split = data.first().map(|b| *b as usize % (data.len() + 1)).unwrap_or(0);
    let mut buf = BytesMut::from(&data[..split]);
    let mut rest = &data[split..];
    loop {
        match mpbond_proto::decode(&mut buf) {
            Ok(Some(frame)) => {
                let mut out = BytesMut::new();
                mpbond_proto::encode(&frame, &mut out).expect("decoded frames re-encode");
                assert!(out.len() <= mpbond_proto::MAX_FRAME);
            }
            Ok(None) => {
                if rest.is_empty() {
                    break;
                }
                buf.extend_from_slice(rest);
                rest = &[];
            }
            Err(_) => break,
        }
        assert!(buf.capacity() <= data.len() + mpbond_proto::MAX_FRAME);
    }
    if let Ok(Some((frame, used))) = mpbond_proto::decode_slice(data) {
        let mut out = BytesMut::new();
        mpbond_proto::encode(&frame, &mut out).expect("decoded frames re-encode");
        assert_eq!(out.len(), used);
        assert_eq!(out[0], data[0]);
        assert_eq!(out[1] & !data[1], 0, "only known flag bits survive");
        if !matches!(frame, mpbond_proto::Frame::Radios { .. }) {
            assert_eq!(&out[2..], &data[2..used]);
        }
    }
});
