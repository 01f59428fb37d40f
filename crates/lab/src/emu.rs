//! The link emulator: a thread that moves packets between the two TUN devices of every
//! emulated link, through one [`mpbond_sim::link::Link`] per direction (rate from a constant
//! or a mahimahi trace, changes at given times, drop-tail queue, random loss), then a
//! propagation delay. It is mahimahi's design in one thread for all links, and it shares the
//! queue and trace code with the simulator, so both replay a trace the same way.
//!
//! Time 0 of every rate profile is the moment [`Emulator::start`] returns. Every packet is
//! logged with its time, size and direction ([`PacketRecord`]).

#![allow(unsafe_code)]

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpbond_core::Time;
use mpbond_sim::link::{idle_capacity, Capacity, Link, LinkConfig, Offer};
use mpbond_sim::rate::RateProfile;
use mpbond_sim::rng::Rng;
use serde::Serialize;

use crate::tun::Tun;

/// Largest packet read from a TUN device (the devices have a 1500-byte MTU).
const MAX_PACKET: usize = 65_535;
/// Packet records kept per direction; a 60 s run at 20 Mbit/s needs about 100 000.
const MAX_RECORDS: usize = 4_000_000;

/// One emulated link between side `a` and side `b`.
pub struct LinkSpec {
    /// Its name (`ps`, `hs1`, `pipe1`, ...).
    pub name: String,
    /// The TUN device on side `a` (e.g. the primary for the PS-Path).
    pub a: Tun,
    /// The TUN device on side `b`.
    pub b: Tun,
    /// Direction a → b.
    pub ab: LinkConfig,
    /// Direction b → a.
    pub ba: LinkConfig,
}

/// What happened to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum PacketEvent {
    /// It entered the link (left the sending device).
    Sent,
    /// It reached the far end (arrived at the receiving device).
    Delivered,
    /// The queue was full.
    QueueDrop,
    /// Random loss.
    Lost,
}

/// One packet event: microseconds since the emulator started, IP packet size, TCP payload,
/// what happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PacketRecord {
    /// Time, µs.
    pub t_us: u64,
    /// IP packet bytes.
    pub size: u32,
    /// The TCP payload it carries ([`tcp_payload`]): the IP packet less its IP and TCP
    /// headers, so a count of data is not a count of headers (experiment 13 compares
    /// cellular data with a file's size).
    pub payload: u32,
    /// Event.
    pub event: PacketEvent,
}

/// The TCP payload of an IP packet: its length less the IPv4 (with options) or IPv6 header
/// and the TCP header (with options); 0 for anything else or anything cut short. The
/// emulator carries the devices' IP packets from the TUN devices as they are, so this reads
/// the lengths the headers state (IPv4's total length, IPv6's payload length) and not the
/// buffer's. IPv6 extension headers are not followed: the lab's links carry none.
pub fn tcp_payload(pkt: &[u8]) -> u32 {
    const TCP: u8 = 6;
    let (ip_header, ip_total) = match pkt.first().map(|b| b >> 4) {
        Some(4) if pkt.len() >= 20 && pkt[9] == TCP => (
            usize::from(pkt[0] & 0x0f) * 4,
            usize::from(u16::from_be_bytes([pkt[2], pkt[3]])),
        ),
        Some(6) if pkt.len() >= 40 && pkt[6] == TCP => {
            (40, 40 + usize::from(u16::from_be_bytes([pkt[4], pkt[5]])))
        }
        _ => return 0,
    };
    let Some(&offset) = pkt.get(ip_header + 12) else {
        return 0;
    };
    let headers = ip_header + usize::from(offset >> 4) * 4;
    u32::try_from(ip_total.min(pkt.len()).saturating_sub(headers)).unwrap_or(0)
}

/// The log and counters of one direction.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DirReport {
    /// Packets and bytes that reached the far end.
    pub delivered_packets: u64,
    /// Bytes that reached the far end.
    pub delivered_bytes: u64,
    /// Drop-tail drops.
    pub queue_drops: u64,
    /// Random losses.
    pub losses: u64,
    /// Every event (up to a cap; `truncated` says if it was hit).
    #[serde(skip)]
    pub records: Vec<PacketRecord>,
    /// True if records were dropped for memory.
    pub truncated: bool,
    /// When the link stood idle, nothing queued or in service (`Link::take_idle_log`), for
    /// [`DirReport::capacity`]; `None` when that log was cut for memory.
    #[serde(skip)]
    pub idle: Option<Vec<(Time, Time)>>,
    /// Its capacity over time, to price those stretches.
    #[serde(skip)]
    pub rate: Option<RateProfile>,
}

impl DirReport {
    /// The capacity this direction offered between `from_us` and `to_us` (emulator time)
    /// and how much of it passed while the link stood idle (`mpbond_sim::link::Capacity`,
    /// the simulator's measure). `None` without the idle log or for an empty window.
    pub fn capacity(&self, from_us: u64, to_us: u64) -> Option<Capacity> {
        let at = |us: u64| Time(us.saturating_mul(1000));
        idle_capacity(
            self.rate.as_ref()?,
            self.idle.as_ref()?.iter().copied(),
            at(from_us),
            at(to_us),
        )
    }

    fn log(&mut self, t: Time, size: usize, payload: u32, event: PacketEvent) {
        if self.records.len() < MAX_RECORDS {
            self.records.push(PacketRecord {
                t_us: t.as_micros(),
                size: size as u32,
                payload,
                event,
            });
        } else {
            self.truncated = true;
        }
    }
}

/// Both directions of one link after the run.
#[derive(Clone, Debug, Serialize)]
pub struct LinkReport {
    /// The link's name.
    pub name: String,
    /// a → b.
    pub ab: DirReport,
    /// b → a.
    pub ba: DirReport,
}

struct Dir {
    link: Link<Vec<u8>>,
    next_depart: Option<Time>,
    in_flight: VecDeque<(Time, Vec<u8>)>,
    report: DirReport,
}

impl Dir {
    fn new(cfg: LinkConfig) -> Dir {
        Dir {
            link: Link::new(cfg),
            next_depart: None,
            in_flight: VecDeque::new(),
            report: DirReport::default(),
        }
    }

    /// The emulator stops at `now`: the report takes the link's idle stretches up to then
    /// and its rate profile, to price them.
    fn finish(&mut self, now: Time) {
        self.report.idle = self.link.take_idle_log(now);
        self.report.rate = Some(self.link.config().rate.clone());
    }

    fn offer(&mut self, now: Time, pkt: Vec<u8>, rng: &mut Rng) {
        let (size, payload) = (pkt.len(), tcp_payload(&pkt));
        self.report.log(now, size, payload, PacketEvent::Sent);
        let loss_before = self.link.stats().random_losses;
        match self.link.offer(now, pkt, rng) {
            Offer::Dropped => {
                let event = if self.link.stats().random_losses > loss_before {
                    self.report.losses += 1;
                    PacketEvent::Lost
                } else {
                    self.report.queue_drops += 1;
                    PacketEvent::QueueDrop
                };
                self.report.log(now, size, payload, event);
            }
            Offer::Queued(Some(t)) => self.next_depart = Some(t),
            Offer::Queued(None) => {}
        }
    }

    /// Moves due packets along; hands arrivals to `deliver`.
    fn advance(&mut self, now: Time, mut deliver: impl FnMut(&[u8])) {
        while let Some(t) = self.next_depart.filter(|t| *t <= now) {
            match self.link.depart(t) {
                Some((pkt, arrive, next)) => {
                    self.in_flight.push_back((arrive, pkt));
                    self.next_depart = next;
                }
                None => self.next_depart = None,
            }
        }
        while self.in_flight.front().is_some_and(|(t, _)| *t <= now) {
            let Some((_, pkt)) = self.in_flight.pop_front() else {
                break;
            };
            deliver(&pkt);
            self.report.delivered_packets += 1;
            self.report.delivered_bytes += pkt.len() as u64;
            self.report
                .log(now, pkt.len(), tcp_payload(&pkt), PacketEvent::Delivered);
        }
    }

    fn next_event(&self) -> Option<Time> {
        let a = self.next_depart;
        let b = self.in_flight.front().map(|(t, _)| *t);
        match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }
}

/// A running emulator.
pub struct Emulator {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<(Vec<LinkReport>, Vec<Tun>)>>,
    epoch: Instant,
}

/// The TUN devices of the last stopped emulator, still open. Closing a TUN device
/// unregisters its interface, which waits for the kernel's RCU grace periods: about 20 ms a
/// device, 0.2 s for a three-device testbed's ten, a tenth of a short run's time. Kept here,
/// they are closed by [`close_retired`] while the next run waits for its daemons instead of
/// between runs. At most one testbed's devices wait: [`Emulator::stop`] closes any that no
/// one collected before it retires its own.
static RETIRED: Mutex<Vec<Tun>> = Mutex::new(Vec::new());

/// Closes the devices of the last stopped emulator on a thread of their own and returns it;
/// join it before anything is measured, so that their unregistering does not overlap the
/// measurement. Nothing to do (an empty thread) when none wait.
pub fn close_retired() -> JoinHandle<()> {
    let tuns = take_retired();
    std::thread::spawn(move || drop(tuns))
}

fn take_retired() -> Vec<Tun> {
    match RETIRED.lock() {
        Ok(mut v) => std::mem::take(&mut *v),
        Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
    }
}

impl Emulator {
    /// Starts the emulator thread over `links`; `seed` drives random loss.
    pub fn start(links: Vec<LinkSpec>, seed: u64) -> io::Result<Emulator> {
        let stop = Arc::new(AtomicBool::new(false));
        let epoch = Instant::now();
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("lab-link-emulator".into())
            .spawn(move || run(links, seed, epoch, &s))?;
        Ok(Emulator {
            stop,
            thread: Some(thread),
            epoch,
        })
    }

    /// Emulator time now (the time base of rate profiles and packet records).
    pub fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// The instant of emulator time 0.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Stops the thread and returns what every link did. The TUN devices stay open until
    /// [`close_retired`] (or the next `stop`) closes them: the namespaces can go meanwhile,
    /// and nothing reads the devices any more.
    pub fn stop(mut self) -> Vec<LinkReport> {
        self.stop.store(true, Ordering::Relaxed);
        let (reports, tuns) = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        // Devices no run collected (a caller that never called close_retired) go now.
        drop(take_retired());
        match RETIRED.lock() {
            Ok(mut v) => *v = tuns,
            Err(poisoned) => *poisoned.into_inner() = tuns,
        }
        reports
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    links: Vec<LinkSpec>,
    seed: u64,
    epoch: Instant,
    stop: &AtomicBool,
) -> (Vec<LinkReport>, Vec<Tun>) {
    // Sleep precisely: the default 50 µs timer slack would add up on every delay.
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
    let mut rng = Rng::new(seed);
    let mut names = Vec::new();
    let mut tuns = Vec::new();
    let mut dirs = Vec::new();
    for l in links {
        names.push(l.name);
        // Device 2i is side a, 2i+1 side b; direction 2i is a→b (read a, write b).
        tuns.push(l.a);
        tuns.push(l.b);
        dirs.push(Dir::new(l.ab));
        dirs.push(Dir::new(l.ba));
    }
    let mut fds: Vec<libc::pollfd> = tuns
        .iter()
        .map(|t| libc::pollfd {
            fd: t.fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let now = || Time(epoch.elapsed().as_nanos() as u64);
    let mut buf = vec![0u8; MAX_PACKET];
    while !stop.load(Ordering::Relaxed) {
        let t = now();
        for (i, d) in dirs.iter_mut().enumerate() {
            // A full TUN queue or a device going away loses the packet, as a wire would.
            d.advance(t, |p| {
                let _ = tuns[i ^ 1].send(p);
            });
        }
        let next = dirs.iter().filter_map(Dir::next_event).min();
        let wait = next
            .map(|n| n.saturating_since(now()))
            .unwrap_or(Duration::from_millis(20))
            .min(Duration::from_millis(20));
        let ts = libc::timespec {
            tv_sec: wait.as_secs() as libc::time_t,
            tv_nsec: wait.subsec_nanos() as libc::c_long,
        };
        // SAFETY: fds is a valid array of pollfd of the given length; ts outlives the call.
        let rc = unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        if rc <= 0 {
            continue;
        }
        let t = now();
        for (i, pfd) in fds.iter_mut().enumerate() {
            if pfd.revents & libc::POLLIN == 0 {
                continue;
            }
            pfd.revents = 0;
            // Read what is waiting, up to a bound so one busy device cannot starve the rest.
            for _ in 0..256 {
                match tuns[i].recv(&mut buf) {
                    Ok(n) if n > 0 => dirs[i].offer(t, buf[..n].to_vec(), &mut rng),
                    _ => break,
                }
            }
        }
    }
    let end = now();
    for d in dirs.iter_mut() {
        d.finish(end);
    }
    let mut out = Vec::new();
    let mut it = dirs.into_iter();
    for name in names {
        let (Some(ab), Some(ba)) = (it.next(), it.next()) else {
            break;
        };
        out.push(LinkReport {
            name,
            ab: ab.report,
            ba: ba.report,
        });
    }
    (out, tuns)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 packet with a 24-byte header (one option word), a TCP header with timestamps
    /// (32 bytes) and 1000 bytes of data; `proto` and the header length as given.
    fn ipv4_tcp(proto: u8, data: usize) -> Vec<u8> {
        let total = 24 + 32 + data;
        let mut p = vec![0u8; total];
        p[0] = 0x46;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[9] = proto;
        p[24 + 12] = 8 << 4;
        p
    }

    /// The payload counts data, not headers: IPv4 with options and TCP with options, IPv6,
    /// a bare ACK; anything not TCP, cut short or malformed counts 0 and never panics.
    #[test]
    fn tcp_payload_counts_data_without_headers() {
        assert_eq!(tcp_payload(&ipv4_tcp(6, 1000)), 1000);
        assert_eq!(tcp_payload(&ipv4_tcp(6, 0)), 0);
        assert_eq!(tcp_payload(&ipv4_tcp(17, 1000)), 0, "UDP is not TCP data");
        // Ethernet-style padding after the stated total length is not data.
        let mut padded = ipv4_tcp(6, 2);
        padded.extend_from_slice(&[0; 6]);
        assert_eq!(tcp_payload(&padded), 2);
        let mut v6 = vec![0u8; 40 + 20 + 500];
        v6[0] = 0x60;
        v6[4..6].copy_from_slice(&(520u16).to_be_bytes());
        v6[6] = 6;
        v6[40 + 12] = 5 << 4;
        assert_eq!(tcp_payload(&v6), 500);
        let whole = ipv4_tcp(6, 1000);
        for cut in 0..whole.len() {
            assert!(tcp_payload(&whole[..cut]) <= 1000);
        }
        assert_eq!(tcp_payload(&whole[..30]), 0, "no TCP header");
        let mut bad = ipv4_tcp(6, 10);
        bad[24 + 12] = 0xf0; // a TCP header longer than the packet
        assert_eq!(tcp_payload(&bad), 0);
        assert_eq!(tcp_payload(&[]), 0);
    }

    /// The emulator's report prices the shared link's idle stretches
    /// (`mpbond_sim::link::Link::capacity` has the arithmetic): at 1 MB/s, two 1000-byte
    /// packets in 40 ms leave 38 000 bytes unused, and the report's window is in µs of
    /// emulator time.
    #[test]
    fn the_report_prices_the_links_idle_stretches() {
        let ms = |x: u64| Time::from_millis(x);
        let mut d = Dir::new(LinkConfig {
            rate: RateProfile::constant(8e6),
            delay: Duration::from_millis(10),
            queue_bytes: 100_000,
            loss: 0.0,
        });
        let mut rng = Rng::new(1);
        let mut arrived = Vec::new();
        d.offer(ms(10), vec![0u8; 1000], &mut rng);
        d.advance(ms(20), |p| arrived.push(p.len()));
        d.offer(ms(30), vec![0u8; 1000], &mut rng);
        d.advance(ms(41), |p| arrived.push(p.len()));
        assert_eq!(
            DirReport::default().capacity(0, 40_000),
            None,
            "before finish"
        );
        d.finish(ms(41));
        assert_eq!(arrived, vec![1000, 1000]);
        let whole = d.report.capacity(0, 40_000).unwrap();
        assert!((whole.offered - 40_000.0).abs() < 1e-6, "{whole:?}");
        assert!((whole.unused - 38_000.0).abs() < 1e-6, "{whole:?}");
        let part = d.report.capacity(5_000, 35_000).unwrap();
        assert!((part.unused - 28_000.0).abs() < 1e-6, "{part:?}");
        // A log cut for memory gives no figure rather than a wrong one.
        d.report.idle = None;
        assert_eq!(d.report.capacity(0, 40_000), None);
    }
}
