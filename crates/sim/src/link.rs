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
    /// A new idle link.
    pub fn new(cfg: LinkConfig) -> Self {
        Link {
            cfg,
            server: Server::default(),
            queue: VecDeque::new(),
            queued: 0,
            busy_until: None,
            stats: LinkStats::default(),
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
        Some((p, now + self.cfg.delay, self.busy_until))
    }
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
