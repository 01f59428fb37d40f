//! Codec tests: golden layouts from docs/protocol.md, round trips, and robustness on arbitrary
//! input.

use super::*;
use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};

fn enc(f: &Frame) -> Vec<u8> {
    let mut b = BytesMut::new();
    encode(f, &mut b).expect("encodable");
    b.to_vec()
}

#[test]
fn stream_data_layout_matches_spec() {
    let f = Frame::StreamData {
        stream: StreamId(0x0102_0304),
        dsn: 0x1122_3344_5566_7788,
        payload: Bytes::from_static(b"hi"),
    };
    assert_eq!(
        enc(&f),
        [
            0x12, 0x00, 0x00, 0x0e, // type, flags, body length 14
            0x01, 0x02, 0x03, 0x04, // stream id
            0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // dsn
            b'h', b'i',
        ]
    );
    let hdr = encode_data_header(StreamId(0x0102_0304), 0x1122_3344_5566_7788, 2).unwrap();
    assert_eq!(&enc(&f)[..DATA_OVERHEAD], &hdr);
}

#[test]
fn data_ack_layout_matches_spec() {
    let mut sacks = Sacks::new();
    assert!(sacks.push(20, 30));
    let f = Frame::DataAck(DataAck {
        stream: StreamId(7),
        cum_ack: 10,
        window_end: 1000,
        sacks,
        fin_received: true,
    });
    let mut want = vec![0x13, 0x01, 0, 4 + 8 + 8 + 1 + 16]; // flags: FIN received
    want.extend_from_slice(&7u32.to_be_bytes());
    want.extend_from_slice(&10u64.to_be_bytes());
    want.extend_from_slice(&1000u64.to_be_bytes());
    want.push(1);
    want.extend_from_slice(&20u64.to_be_bytes());
    want.extend_from_slice(&30u64.to_be_bytes());
    assert_eq!(enc(&f), want);
}

#[test]
fn stream_open_with_host_name_layout() {
    let f = Frame::StreamOpen {
        stream: StreamId(1),
        dest: Destination {
            host: Host::Name("example.org".into()),
            port: 443,
        },
    };
    let mut want = vec![
        0x10,
        0,
        0,
        4 + 2 + 1 + 1 + 11,
        0,
        0,
        0,
        1,
        0x01,
        0xbb,
        3,
        11,
    ];
    want.extend_from_slice(b"example.org");
    assert_eq!(enc(&f), want);
}

#[test]
fn pipe_feedback_layout() {
    let f = Frame::PipeFeedback(PipeFeedback {
        subflow: SubflowId(2),
        throughput_bps: 5_000_000,
        rtt_us: 4000,
        buffered: 123_456,
        timestamp_us: 99,
        uplink: false,
    });
    let b = enc(&f);
    assert_eq!(b.len(), 4 + 1 + 8 + 4 + 8 + 8);
    assert_eq!(&b[..5], &[0x20, 0, 0, 29, 2]);
    assert_eq!(&b[5..13], &5_000_000u64.to_be_bytes());
}

/// `PIPE_MIN_RTT` (0x81): subflow, minimum RTT, timestamp, the uplink flag as in
/// `PIPE_FEEDBACK`; a body of another length is malformed, not skipped, since this version
/// knows the type.
#[test]
fn pipe_min_rtt_layout() {
    let f = Frame::PipeMinRtt(PipeMinRtt {
        subflow: SubflowId(3),
        min_rtt_us: 4_100,
        timestamp_us: 7,
        uplink: true,
    });
    let b = enc(&f);
    assert_eq!(b.len(), 4 + 1 + 4 + 8);
    assert_eq!(&b[..5], &[0x81, 0x01, 0, 13, 3]);
    assert_eq!(&b[5..9], &4_100u32.to_be_bytes());
    assert_eq!(&b[9..17], &7u64.to_be_bytes());
    let mut wire = BytesMut::from(&b[..]);
    assert_eq!(decode(&mut wire), Ok(Some(f)));
    let mut short = BytesMut::from(&[0x81_u8, 0, 0, 5, 3, 0, 0, 16, 4][..]);
    assert!(matches!(
        decode(&mut short),
        Err(DecodeError::Malformed {
            frame: "PIPE_MIN_RTT",
            ..
        })
    ));
}

#[test]
fn oversized_length_rejected_from_header_alone() {
    // Only the 4-byte header: the decoder must refuse before any body arrives.
    let mut b = BytesMut::from(&[0x12u8, 0, 0xff, 0xff][..]);
    assert_eq!(decode(&mut b), Err(DecodeError::TooLarge { len: 0xffff }));
    assert_eq!(
        DecodeError::TooLarge { len: 0xffff }.reason(),
        Reason::FRAME_TOO_LARGE
    );
}

#[test]
fn unknown_mandatory_type_is_error_and_extension_is_skipped() {
    let mut b = BytesMut::from(&[0x7f_u8, 0, 0, 0][..]);
    assert_eq!(decode(&mut b), Err(DecodeError::UnknownType(0x7f)));

    let mut b = BytesMut::new();
    b.put_slice(&[0x99, 0, 0, 3, 1, 2, 3]); // unknown extension, skipped
    b.put_slice(&enc(&Frame::Ping { nonce: 5 }));
    assert_eq!(decode(&mut b), Ok(Some(Frame::Ping { nonce: 5 })));
    assert!(b.is_empty());
}

/// `RADIOS` (0x80) round-trips; a radio code from a later version reads as unknown instead of
/// closing the connection, and the frame's layout is still exact.
#[test]
fn radios_round_trip_and_unknown_codes_read_as_unknown() {
    for f in [
        Frame::Radios {
            wan: Some(Radio::Lte),
            pipe: Some(Radio::Wifi),
        },
        Frame::Radios {
            wan: Some(Radio::Ethernet),
            pipe: None,
        },
    ] {
        let raw = enc(&f);
        assert_eq!(raw[0], kind::RADIOS);
        let mut b = BytesMut::from(&raw[..]);
        assert_eq!(decode(&mut b), Ok(Some(f)));
    }
    let mut b = BytesMut::from(&[0x80_u8, 0, 0, 2, 9, 3][..]);
    assert_eq!(
        decode(&mut b),
        Ok(Some(Frame::Radios {
            wan: None,
            pipe: Some(Radio::Bluetooth)
        }))
    );
    let mut b = BytesMut::from(&[0x80_u8, 0, 0, 1, 1][..]);
    assert!(matches!(
        decode(&mut b),
        Err(DecodeError::Malformed {
            frame: "RADIOS",
            ..
        })
    ));
    for r in [Radio::Lte, Radio::Wifi, Radio::Bluetooth, Radio::Ethernet] {
        assert_eq!(Radio::parse(r.name()), Ok(r));
        assert_eq!(Radio::from_code(r.code()), Some(r));
    }
    assert!(Radio::parse("5g")
        .unwrap_err()
        .to_string()
        .contains("lte, wifi"));
}

#[test]
fn trailing_bytes_are_malformed() {
    let mut raw = enc(&Frame::Ping { nonce: 1 });
    raw[3] += 1;
    raw.push(0);
    let mut b = BytesMut::from(&raw[..]);
    assert!(matches!(
        decode(&mut b),
        Err(DecodeError::Malformed { frame: "PING", .. })
    ));
}

#[test]
fn bad_values_are_refused_on_both_sides() {
    // window end below the cumulative ACK
    let bad = Frame::DataAck(DataAck {
        stream: StreamId(1),
        cum_ack: 10,
        window_end: 5,
        sacks: Sacks::new(),
        fin_received: false,
    });
    let mut out = BytesMut::new();
    assert!(encode(&bad, &mut out).is_err());
    assert!(out.is_empty(), "a failed encode writes nothing");
    let mut raw = vec![0x13, 0, 0, 21];
    raw.extend_from_slice(&1u32.to_be_bytes());
    raw.extend_from_slice(&10u64.to_be_bytes());
    raw.extend_from_slice(&5u64.to_be_bytes());
    raw.push(0);
    assert!(decode(&mut BytesMut::from(&raw[..])).is_err());

    // oversized payload, ticket, host name
    let big = Frame::StreamData {
        stream: StreamId(1),
        dsn: 0,
        payload: Bytes::from(vec![0u8; MAX_PAYLOAD + 1]),
    };
    assert!(matches!(
        encode(&big, &mut out),
        Err(EncodeError::TooLong { .. })
    ));
    let t = Frame::InitMp {
        ticket: Bytes::from(vec![0u8; MAX_TICKET + 1]),
    };
    assert!(encode(&t, &mut out).is_err());
    let h = Frame::StreamOpen {
        stream: StreamId(1),
        dest: Destination {
            host: Host::Name("a b".into()),
            port: 1,
        },
    };
    assert!(encode(&h, &mut out).is_err());
    // DSN overflow
    let o = Frame::StreamData {
        stream: StreamId(1),
        dsn: u64::MAX,
        payload: Bytes::from_static(b"x"),
    };
    assert!(encode(&o, &mut out).is_err());
    assert!(out.is_empty());
}

#[test]
fn version_negotiation() {
    assert_eq!(negotiate_version(1, 1), Some(1));
    assert_eq!(negotiate_version(1, 9), Some(VERSION));
    assert_eq!(negotiate_version(2, 9), None);
    assert_eq!(negotiate_version(0, 0), None);
}

fn arb_bytes(max: usize) -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..=max).prop_map(Bytes::from)
}

fn arb_host() -> impl Strategy<Value = Host> {
    prop_oneof![
        any::<u32>().prop_map(|v| Host::V4(Ipv4Addr::from(v))),
        any::<u128>().prop_map(|v| Host::V6(Ipv6Addr::from(v))),
        "[a-z0-9.-]{1,255}".prop_map(Host::Name),
    ]
}

fn arb_sacks() -> impl Strategy<Value = (u64, Sacks)> {
    (
        0u64..1 << 40,
        proptest::collection::vec((1u64..1000, 1u64..1000), 0..=4),
    )
        .prop_map(|(cum, blocks)| {
            let mut s = Sacks::new();
            let mut at = cum;
            for (gap, len) in blocks {
                s.push(at + gap, at + gap + len);
                at += gap + len;
            }
            (cum, s)
        })
}

fn arb_frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        (any::<u8>(), any::<u8>(), arb_bytes(MAX_TICKET)).prop_map(|(a, b, t)| Frame::MpCapable {
            ver_min: a,
            ver_max: b,
            ticket: t
        }),
        (any::<u8>(), any::<u8>(), any::<u64>()).prop_map(|(v, s, id)| Frame::MpOk {
            version: v,
            subflow: SubflowId(s),
            session: SessionId(id)
        }),
        (any::<u8>(), any::<u64>(), arb_bytes(MAX_TICKET)).prop_map(|(v, id, t)| Frame::MpJoin {
            ver_min: v,
            ver_max: v,
            session: SessionId(id),
            ticket: t
        }),
        (any::<u8>(), any::<u8>(), any::<u64>()).prop_map(|(v, s, id)| Frame::MpJoinOk {
            version: v,
            subflow: SubflowId(s),
            session: SessionId(id)
        }),
        arb_bytes(MAX_TICKET).prop_map(|t| Frame::InitMp { ticket: t }),
        (any::<u64>(), arb_bytes(MAX_TICKET)).prop_map(|(id, t)| Frame::InitMpJoin {
            session: SessionId(id),
            ticket: t
        }),
        "[a-z]{0,32}".prop_map(|n| Frame::PipeOpen {
            ver_min: 1,
            ver_max: 1,
            name: n
        }),
        any::<u8>().prop_map(|v| Frame::PipeOk { version: v }),
        (any::<u8>(), any::<u16>()).prop_map(|(s, r)| Frame::SubflowClose {
            subflow: SubflowId(s),
            reason: Reason(r)
        }),
        (any::<u8>(), any::<u16>()).prop_map(|(s, r)| Frame::PathReset {
            subflow: SubflowId(s),
            reason: Reason(r)
        }),
        (any::<u16>(), ".{0,100}")
            .prop_filter("fits", |(_, r)| r.len() <= MAX_CLOSE_REASON)
            .prop_map(|(c, r)| Frame::Close {
                code: Reason(c),
                reason: r
            }),
        (any::<u32>(), arb_host(), any::<u16>()).prop_map(|(s, h, p)| Frame::StreamOpen {
            stream: StreamId(s),
            dest: Destination { host: h, port: p }
        }),
        any::<u32>().prop_map(|s| Frame::StreamOpened {
            stream: StreamId(s)
        }),
        (any::<u32>(), 0u64..u64::MAX / 2, arb_bytes(MAX_PAYLOAD)).prop_map(|(s, d, p)| {
            Frame::StreamData {
                stream: StreamId(s),
                dsn: d,
                payload: p,
            }
        }),
        (any::<u32>(), arb_sacks(), 0u64..1 << 40, any::<bool>()).prop_map(
            |(s, (cum, sacks), w, fin)| {
                Frame::DataAck(DataAck {
                    stream: StreamId(s),
                    cum_ack: cum,
                    window_end: cum + w,
                    sacks,
                    fin_received: fin,
                })
            }
        ),
        (any::<u32>(), any::<u64>()).prop_map(|(s, f)| Frame::StreamFin {
            stream: StreamId(s),
            final_size: f
        }),
        (any::<u32>(), any::<u16>()).prop_map(|(s, r)| Frame::StreamRst {
            stream: StreamId(s),
            reason: Reason(r)
        }),
        (any::<u32>(), 0u64..1 << 50, 1u64..1 << 20).prop_map(|(s, a, l)| Frame::DataCancel {
            stream: StreamId(s),
            start: a,
            end: a + l
        }),
        (any::<u32>(), any::<u64>()).prop_map(|(s, e)| Frame::ChunkMark {
            stream: StreamId(s),
            end: e
        }),
        (
            any::<u8>(),
            any::<u64>(),
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            any::<bool>()
        )
            .prop_map(|(s, t, r, b, ts, up)| Frame::PipeFeedback(PipeFeedback {
                subflow: SubflowId(s),
                throughput_bps: t,
                rtt_us: r,
                buffered: b,
                timestamp_us: ts,
                uplink: up,
            })),
        any::<u64>().prop_map(|n| Frame::Ping { nonce: n }),
        any::<u64>().prop_map(|n| Frame::Pong { nonce: n }),
        (any::<u8>(), any::<u32>(), any::<u64>(), any::<bool>()).prop_map(|(s, r, ts, up)| {
            Frame::PipeMinRtt(PipeMinRtt {
                subflow: SubflowId(s),
                min_rtt_us: r,
                timestamp_us: ts,
                uplink: up,
            })
        }),
        (0u8..5, 0u8..5).prop_map(|(w, p)| Frame::Radios {
            wan: Radio::from_code(w),
            pipe: Radio::from_code(p),
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Every valid frame survives encode → decode unchanged, and decode consumes exactly the
    /// bytes that encode produced.
    #[test]
    fn round_trip(frames in proptest::collection::vec(arb_frame(), 1..8)) {
        let mut wire = BytesMut::new();
        for f in &frames {
            encode(f, &mut wire).unwrap();
        }
        prop_assert!(frames.iter().all(|f| enc(f).len() <= MAX_FRAME));
        let mut got = Vec::new();
        while let Some(f) = decode(&mut wire).unwrap() {
            got.push(f);
        }
        prop_assert!(wire.is_empty());
        prop_assert_eq!(got, frames);
    }

    /// Feeding the bytes one at a time gives the same frames: the decoder never consumes a
    /// partial frame.
    #[test]
    fn byte_at_a_time(frames in proptest::collection::vec(arb_frame(), 1..4)) {
        let mut wire = BytesMut::new();
        for f in &frames {
            encode(f, &mut wire).unwrap();
        }
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for &byte in wire.iter() {
            buf.put_u8(byte);
            while let Some(f) = decode(&mut buf).unwrap() {
                got.push(f);
            }
        }
        prop_assert_eq!(got, frames);
    }

    /// Arbitrary input never panics, and whatever the decoder accepts re-encodes to the same
    /// bytes (there is one encoding per frame).
    #[test]
    fn arbitrary_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let mut b = BytesMut::from(&raw[..]);
        let mut consumed = 0usize;
        loop {
            let before = b.len();
            match decode(&mut b) {
                Ok(Some(f)) => {
                    consumed += before - b.len();
                    let re = enc(&f);
                    prop_assert!(re.len() <= before - b.len());
                }
                Ok(None) | Err(_) => break,
            }
        }
        prop_assert!(consumed <= raw.len());
        if let Ok(Some((f, used))) = decode_slice(&raw) {
            prop_assert!(used <= raw.len());
            // A radio code from a later version reads as unknown and is sent back as 0.
            if !matches!(f, Frame::Extension { .. } | Frame::Radios { .. }) {
                // Unknown flag bits are ignored on receipt and sent as zero; every other byte
                // is canonical.
                let re = enc(&f);
                prop_assert_eq!(re[0], raw[0]);
                prop_assert_eq!(re[1] & !raw[1], 0);
                prop_assert_eq!(&re[2..], &raw[2..used]);
            }
        }
    }

    /// Mutating one byte of a valid frame yields a frame, an incomplete input or an error, never
    /// a panic.
    #[test]
    fn mutated_frames_never_panic(f in arb_frame(), pos in any::<usize>(), val in any::<u8>()) {
        let mut raw = enc(&f);
        let i = pos % raw.len();
        raw[i] = val;
        let _ = decode(&mut BytesMut::from(&raw[..]));
        let _ = decode_slice(&raw);
    }
}
