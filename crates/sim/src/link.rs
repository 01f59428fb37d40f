//! One direction of an emulated link: a drop-tail queue in front of a rate-limited server,
//! followed by a fixed propagation delay, with optional random loss.

use std::collections::VecDeque;
use std::time::Duration;

use mpbond_core::Time;

use crate::rate::{RateProfile, Server};
use crate::rng::Rng;

/// A packet of a simulated TCP connection. It carries stream offsets, not bytes: the payload
/// is attached to frames kept by the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Packet {
    /// Sender-assigned id, increasing with every transmission (retransmissions get a new id).
    pub id: u64,
    /// First stream offset carried.
    pub start: u64,
    /// One past the last.
    pub end: u64,
}

impl Packet {
    /// Bytes on the link.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// True for an empty packet (never sent).
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// Anything a link can carry: it only needs its size on the wire. The simulator sends
/// [`Packet`]s; the lab's emulator (`mpbond-lab`) sends real IP packets through the same queue.
pub trait WireLen {
    /// Bytes on the link.
    fn wire_len(&self) -> u64;
}

impl WireLen for Packet {
    fn wire_len(&self) -> u64 {
        self.len()
    }
}

impl WireLen for Vec<u8> {
    fn wire_len(&self) -> u64 {
        self.len() as u64
    }
}

/// Settings of one link direction.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// Capacity over time.
    pub rate: RateProfile,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Drop-tail limit in bytes queued (including the packet in service).
    pub queue_bytes: u64,
    /// Probability that a packet is lost on the link, 0..1.
    pub loss: f64,
}

/// Counters of a link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Bytes that left the queue.
    pub delivered_bytes: u64,
    /// Packets dropped because the queue was full.
    pub queue_drops: u64,
    /// Packets lost at random.
    pub random_losses: u64,
}

/// Most idle stretches a link remembers ([`Link::idle_stretches`]); a longer log is cut
/// and [`Link::capacity`] says so with `None`.
pub const MAX_IDLE_STRETCHES: usize = 4_000_000;

/// What a link direction offered over a window ([`Link::capacity`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Capacity {
    /// Bytes the link could have carried had it been busy throughout.
    pub offered: f64,
    /// Of those, the bytes it offered while it stood idle: no sender had a packet in its
    /// queue. For a bottleneck this is the capacity a scheme left on the table (a sender
    /// limited by its window, its pacing, an ACK clock stopped by an uplink outage, or a
    /// scheduler with nothing for it); the rest passed while the link was serving packets,
    /// retransmissions and copies among them.
    pub unused: f64,
}

/// The state of one link direction.
#[derive(Debug)]
pub struct Link<P = Packet> {
    cfg: LinkConfig,
    server: Server,
    queue: VecDeque<P>,
    queued: u64,
    /// When the packet in service finishes, if one is in service.
    busy_until: Option<Time>,
    stats: LinkStats,
    /// Since when the link has stood idle, if it does.
    idle_since: Option<Time>,
    /// Closed idle stretches, oldest first.
    idle: Vec<(Time, Time)>,
    /// True once `idle` was cut at [`MAX_IDLE_STRETCHES`].
    idle_truncated: bool,
    /// When the link came into being ([`Link::open_at`]): it offered nothing before.
    opened: Time,
}

/// What happened to a packet offered to the link.
#[derive(Debug, PartialEq, Eq)]
pub enum Offer {
    /// Dropped (full queue or random loss).
    Dropped,
    /// Queued; if `Some`, the link was idle and the caller must schedule a departure then.
    Queued(Option<Time>),
}

impl<P: WireLen> Link<P> {
    /// A new idle link, idle since time 0.
    pub fn new(cfg: LinkConfig) -> Self {
        Link {
            cfg,
            server: Server::default(),
            queue: VecDeque::new(),
            queued: 0,
            busy_until: None,
            stats: LinkStats::default(),
            idle_since: Some(Time::ZERO),
            idle: Vec::new(),
            idle_truncated: false,
            opened: Time::ZERO,
        }
    }

    /// Marks a new link as opened at `now` (a connection the simulator opens later): it
    /// offered capacity, and stood idle, only since then. A link that has carried something
    /// keeps its log.
    pub fn open_at(&mut self, now: Time) {
        if self.idle.is_empty() && self.busy_until.is_none() {
            self.idle_since = Some(now);
            self.opened = now;
        }
    }

    /// The stretches in which the link stood idle, nothing queued or in service, closed
    /// up to `now` (the one still open ends there).
    pub fn idle_stretches(&self, now: Time) -> impl Iterator<Item = (Time, Time)> + '_ {
        self.idle
            .iter()
            .copied()
            .chain(self.idle_since.map(|a| (a, now.max(a))))
            .filter(|(a, b)| a < b)
    }

    /// The capacity the link offered in `[from, to)` (from its opening on) and how much of
    /// it passed while it stood idle: what its rate profile would have carried then, had
    /// any sender had a packet for it. `None` for an empty window, or once the idle log was
    /// cut for memory.
    pub fn capacity(&self, from: Time, to: Time) -> Option<Capacity> {
        let from = from.max(self.opened);
        idle_capacity(&self.cfg.rate, self.idle_stretches(to), from, to)
            .filter(|_| !self.idle_truncated)
    }

    /// Hands over every idle stretch up to `now`, to price later ([`idle_capacity`]), or
    /// `None` once the log was cut for memory. The link keeps none: this is for its owner's
    /// last look (the lab's emulator when it stops), which needs no copy of a log that can
    /// run to millions of stretches.
    pub fn take_idle_log(&mut self, now: Time) -> Option<Vec<(Time, Time)>> {
        self.end_idle(now);
        let log = std::mem::take(&mut self.idle);
        (!self.idle_truncated).then_some(log)
    }

    fn end_idle(&mut self, now: Time) {
        if let Some(a) = self.idle_since.take() {
            if a < now {
                if self.idle.len() < MAX_IDLE_STRETCHES {
                    self.idle.push((a, now));
                } else {
                    self.idle_truncated = true;
                }
            }
        }
    }

    /// Its settings.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// Bytes waiting or in service.
    pub fn queued_bytes(&self) -> u64 {
        self.queued
    }

    /// Offers a packet at `now`.
    pub fn offer(&mut self, now: Time, p: P, rng: &mut Rng) -> Offer {
        if self.cfg.loss > 0.0 && rng.chance(self.cfg.loss) {
            self.stats.random_losses += 1;
            return Offer::Dropped;
        }
        let len = p.wire_len();
        if self.queued + len > self.cfg.queue_bytes.max(len) {
            self.stats.queue_drops += 1;
            return Offer::Dropped;
        }
        self.queued += len;
        self.queue.push_back(p);
        if self.busy_until.is_none() {
            self.busy_until = self.start_service(now);
            if self.busy_until.is_some() {
                self.end_idle(now);
            }
            return Offer::Queued(self.busy_until);
        }
        Offer::Queued(None)
    }

    fn start_service(&mut self, now: Time) -> Option<Time> {
        let head = self.queue.front()?;
        self.server.finish(&self.cfg.rate, now, head.wire_len())
    }

    /// The head packet finished service at `now`: it leaves, and arrives at the far end after
    /// the propagation delay. Returns the packet, its arrival time, and the next departure to
    /// schedule, if any.
    pub fn depart(&mut self, now: Time) -> Option<(P, Time, Option<Time>)> {
        let p = self.queue.pop_front()?;
        self.queued -= p.wire_len();
        self.stats.delivered_bytes += p.wire_len();
        self.busy_until = self.start_service(now);
        if self.busy_until.is_none() {
            // The queue ran dry (or the link went down for good, offering nothing more).
            self.idle_since = Some(now);
        }
        Some((p, now + self.cfg.delay, self.busy_until))
    }
}

/// The capacity `rate` offered in `[from, to)` and the part of it inside `idle` stretches
/// (as [`Link::idle_stretches`] gives them, in any order, not overlapping). `None` for an
/// empty window.
pub fn idle_capacity(
    rate: &RateProfile,
    idle: impl IntoIterator<Item = (Time, Time)>,
    from: Time,
    to: Time,
) -> Option<Capacity> {
    if to <= from {
        return None;
    }
    let at = |t: Time| rate.cumulative_bytes(t);
    let unused = idle
        .into_iter()
        .map(|(a, b)| (a.max(from), b.min(to)))
        .filter(|(a, b)| a < b)
        .map(|(a, b)| at(b) - at(a))
        .sum();
    Some(Capacity {
        offered: at(to) - at(from),
        unused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(bps: f64, queue: u64) -> Link {
        Link::new(LinkConfig {
            rate: RateProfile::constant(bps),
            delay: Duration::from_millis(10),
            queue_bytes: queue,
            loss: 0.0,
        })
    }

    fn pkt(id: u64, len: u64) -> Packet {
        Packet {
            id,
            start: id * len,
            end: (id + 1) * len,
        }
    }

    /// The capacity a link offered while it stood idle is what its rate would have carried
    /// between the moment its queue ran dry and the next packet: at 1 MB/s, two 1000-byte
    /// packets in 40 ms leave 38 of the 40 ms (38 000 bytes) unused; a window counts only its
    /// part of each idle stretch, and a link opened later has idled only since then.
    #[test]
    fn idle_capacity_is_what_the_link_offered_with_nothing_queued() {
        let ms = Time::from_millis;
        let mut rng = Rng::new(1);
        let mut l = link(8e6, 100_000);
        l.offer(ms(10), pkt(0, 1000), &mut rng);
        let (_, _, next) = l.depart(ms(11)).unwrap();
        assert_eq!(next, None);
        l.offer(ms(30), pkt(1, 1000), &mut rng);
        l.depart(ms(31)).unwrap();
        assert_eq!(
            l.idle_stretches(ms(41)).collect::<Vec<_>>(),
            vec![(ms(0), ms(10)), (ms(11), ms(30)), (ms(31), ms(41))]
        );
        let whole = l.capacity(ms(0), ms(40)).unwrap();
        assert!((whole.offered - 40_000.0).abs() < 1e-6, "{whole:?}");
        assert!((whole.unused - 38_000.0).abs() < 1e-6, "{whole:?}");
        let part = l.capacity(ms(5), ms(35)).unwrap();
        assert!((part.offered - 30_000.0).abs() < 1e-6, "{part:?}");
        assert!((part.unused - 28_000.0).abs() < 1e-6, "{part:?}");
        assert_eq!(l.capacity(ms(5), ms(5)), None);
        // Back to back, the queue never runs dry while it serves.
        let mut busy = link(8e6, 100_000);
        for i in 0..5 {
            busy.offer(Time::ZERO, pkt(i, 1000), &mut rng);
        }
        for i in 1..=5 {
            busy.depart(ms(i)).unwrap();
        }
        assert_eq!(busy.capacity(ms(0), ms(5)).unwrap().unused, 0.0);
        let mut later = link(8e6, 100_000);
        later.open_at(ms(30));
        let c = later.capacity(ms(0), ms(40)).unwrap();
        assert!((c.unused - 10_000.0).abs() < 1e-6, "{c:?}");
        assert!((c.offered - 10_000.0).abs() < 1e-6, "{c:?}");
        assert_eq!(later.take_idle_log(ms(40)), Some(vec![(ms(30), ms(40))]));
    }

    #[test]
    fn fifo_service_and_delay() {
        let mut l = link(8e6, 10_000);
        let mut rng = Rng::new(1);
        let t0 = Time::ZERO;
        assert_eq!(
            l.offer(t0, pkt(0, 1000), &mut rng),
            Offer::Queued(Some(Time::from_millis(1)))
        );
        assert_eq!(l.offer(t0, pkt(1, 1000), &mut rng), Offer::Queued(None));
        let (p, arrive, next) = l.depart(Time::from_millis(1)).unwrap();
        assert_eq!(
            (p.id, arrive, next),
            (0, Time::from_millis(11), Some(Time::from_millis(2)))
        );
        let (p, _, next) = l.depart(Time::from_millis(2)).unwrap();
        assert_eq!((p.id, next), (1, None));
        assert_eq!(l.stats().delivered_bytes, 2000);
    }

    #[test]
    fn drop_tail_and_random_loss() {
        let mut l = link(8e6, 2500);
        let mut rng = Rng::new(1);
        for i in 0..3 {
            let _ = l.offer(Time::ZERO, pkt(i, 1000), &mut rng);
        }
        assert_eq!(l.stats().queue_drops, 1);
        let mut lossy = Link::new(LinkConfig {
            loss: 0.5,
            ..l.config().clone()
        });
        let mut dropped = 0;
        for i in 0..1000 {
            if lossy.offer(Time::ZERO, pkt(i, 1), &mut rng) == Offer::Dropped {
                dropped += 1;
            }
            lossy.depart(Time::ZERO);
        }
        assert!((400..600).contains(&dropped), "{dropped}");
    }
}
