//! A DASH player emulator for MPBond §6.5: it fetches constant-bitrate segments over one
//! keep-alive HTTP connection, picks each segment's bitrate with a throughput rule modelled
//! on ExoPlayer's defaults, and plays from a buffer, counting stalls.
//!
//! The ABR follows ExoPlayer 2's `AdaptiveTrackSelection` with `DefaultBandwidthMeter` and
//! `DefaultLoadControl`:
//! - bandwidth estimate: the weighted median of per-segment throughput samples, each weighted
//!   by the square root of its bytes, over a sliding window of total weight 2000; 1 Mbit/s
//!   before the first sample; a sample runs from the response head to the last byte, so
//!   the request's round trip is not in it;
//! - the highest bitrate at most 0.7 × the estimate; a switch up waits until 10 s are
//!   buffered, a switch down is skipped while 25 s are buffered;
//! - loading pauses at 50 s of buffer; playback starts at 2.5 s buffered and resumes after a
//!   stall at 5 s.
//!
//! Rendering is not modelled: the player only needs the bytes in time.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;

use crate::http::{self, Fetch};

/// Bits per second of every rung.
pub fn ladder(name: &str) -> anyhow::Result<Vec<f64>> {
    let kbps: Vec<f64> = match name {
        // Big Buck Bunny, the DASH dataset's 20 representations (46 kbit/s - 4.2 Mbit/s).
        "bbb" => vec![
            46.0, 89.0, 131.0, 178.0, 221.0, 263.0, 334.0, 396.0, 522.0, 595.0, 791.0, 1033.0,
            1245.0, 1547.0, 2134.0, 2484.0, 3079.0, 3527.0, 3840.0, 4220.0,
        ],
        // Tears of Steel, 9 representations (253 kbit/s - 10 Mbit/s).
        "tos" => vec![
            253.0, 505.0, 781.0, 1010.0, 1512.0, 2491.0, 3996.0, 6000.0, 10000.0,
        ],
        other => match other.strip_prefix("fixed:") {
            // One rung: the 360° video of §6.5 at a fixed bitrate.
            Some(rate) => vec![mpbond_core::units::parse_rate_bps(rate)? / 1e3],
            None => anyhow::bail!("unknown ladder {other:?}: bbb, tos or fixed:<rate>"),
        },
    };
    Ok(kbps.into_iter().map(|k| k * 1e3).collect())
}

/// What the player saw.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct VideoStats {
    /// Mean bitrate of the segments fetched, Mbit/s.
    pub mean_bitrate_mbps: f64,
    /// Seconds stalled after playback started.
    pub stall_s: f64,
    /// Stall time over the video's length (MPBond §6.5's 360° metric).
    pub stall_ratio: f64,
    /// Seconds from the first request to the start of playback.
    pub startup_s: f64,
    /// Bitrate switches.
    pub switches: usize,
    /// Segments fetched.
    pub segments: usize,
    /// The least stall ratio any scheme could have on this run's links with playback from
    /// this run's startup, for a one-rung ladder ([`stall_bound`]); `None` for an adaptive
    /// ladder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_ratio_bound: Option<f64>,
    /// The same with the window-limited bound (`run::WINDOW_BOUND` per hop, acknowledgements
    /// on the uplinks): the least a window-based transport could have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_ratio_window_bound: Option<f64>,
    /// When the player asked for each segment, seconds from the first request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asked_s: Vec<f64>,
    /// Each segment's bandwidth sample as the player's meter took it, Mbit/s: its bytes over
    /// the time from the response head to its last byte.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples_mbps: Vec<f64>,
    /// The earliest end the links allowed each segment from the moment the player asked for
    /// it, seconds (`crate::run::segment_bounds`); the run's own end of the segment beyond
    /// it is time the scheme lost there. Empty where not computed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segment_bound_s: Vec<f64>,
}

/// A lower bound on the stall, in seconds, of a player whose playback starts at `start_s`
/// when segment `i` can arrive at `arrivals[i]` seconds at the earliest (for a one-rung
/// ladder, the links' fluid bound on segments asked for one at a time,
/// `mpbond_sim::fluid::sequential_arrival_times`).
///
/// The bound plays greedily: from `start_s` on it plays whatever has arrived and waits only
/// for the next segment, so segment `i` ends at `F_i = max(F_(i-1), arrivals[i]) +
/// segment_s` and the stall is `F_n - start_s - n × segment_s`. [`Player::play`] can only
/// stall more: its segments arrive no earlier, and after a stall it waits for 5 s of buffer
/// where the greedy player resumes at once. The start matters, because startup is not
/// stall: a player that starts later can stall less, so a run is held against the bound
/// from its own startup time. `None` starts as early as [`Player::play`] could, when
/// 2.5 s of video have arrived (the least stall of a player that starts as soon as it may;
/// a reference, not a bound on every run). Infinite when a segment never arrives.
pub fn stall_bound(arrivals: &[f64], segment_s: f64, start_s: Option<f64>) -> f64 {
    let start = match start_s {
        Some(s) => s,
        None => {
            let k = ((START_S / segment_s).ceil() as usize).clamp(1, arrivals.len().max(1));
            arrivals.get(k - 1).copied().unwrap_or(0.0)
        }
    };
    let mut end = start;
    for &t in arrivals {
        if !t.is_finite() {
            return f64::INFINITY;
        }
        end = end.max(t) + segment_s;
    }
    (end - start - arrivals.len() as f64 * segment_s).max(0.0)
}

/// Player parameters (see the module text for where the defaults come from).
#[derive(Clone, Debug)]
pub struct Player {
    /// Bitrates, ascending.
    pub ladder: Vec<f64>,
    /// Seconds of video per segment.
    pub segment_s: f64,
    /// Seconds of video.
    pub video_s: f64,
}

const BANDWIDTH_FRACTION: f64 = 0.7;
const INITIAL_ESTIMATE_BPS: f64 = 1e6;
const MAX_WEIGHT: f64 = 2000.0;
const MIN_FOR_UP_S: f64 = 10.0;
const MAX_FOR_DOWN_S: f64 = 25.0;
const MAX_BUFFER_S: f64 = 50.0;
const START_S: f64 = 2.5;
const RESTART_S: f64 = 5.0;

/// ExoPlayer's sliding weighted median.
#[derive(Default)]
struct Meter {
    samples: VecDeque<(f64, f64)>,
    weight: f64,
}

impl Meter {
    /// Adds a sample of `bytes` over `seconds` and returns its rate (bits per second); a
    /// sample that took no time is left out.
    fn add(&mut self, bytes: u64, seconds: f64) -> Option<f64> {
        if seconds <= 0.0 {
            return None;
        }
        let w = (bytes as f64).sqrt();
        let bps = bytes as f64 * 8.0 / seconds;
        self.samples.push_back((w, bps));
        self.weight += w;
        while self.weight > MAX_WEIGHT && self.samples.len() > 1 {
            if let Some((w0, _)) = self.samples.pop_front() {
                self.weight -= w0;
            }
        }
        Some(bps)
    }

    fn estimate(&self) -> f64 {
        if self.samples.is_empty() {
            return INITIAL_ESTIMATE_BPS;
        }
        let mut v: Vec<(f64, f64)> = self.samples.iter().copied().collect();
        v.sort_by(|a, b| a.1.total_cmp(&b.1));
        let half = self.weight / 2.0;
        let mut acc = 0.0;
        for (w, r) in &v {
            acc += w;
            if acc >= half {
                return *r;
            }
        }
        v.last().map_or(INITIAL_ESTIMATE_BPS, |x| x.1)
    }
}

/// The playback clock: buffer level, stalls and startup, advanced in real time.
#[derive(Debug, Default)]
struct Playback {
    buffer_s: f64,
    playing: bool,
    started: bool,
    stall_s: f64,
    startup_s: f64,
}

impl Playback {
    fn advance(&mut self, dt: f64) {
        if self.playing {
            if self.buffer_s >= dt {
                self.buffer_s -= dt;
            } else {
                self.stall_s += dt - self.buffer_s;
                self.buffer_s = 0.0;
                self.playing = false;
            }
        } else if self.started {
            self.stall_s += dt;
        } else {
            self.startup_s += dt;
        }
    }

    fn add(&mut self, seconds: f64) {
        self.buffer_s += seconds;
        let need = if self.started { RESTART_S } else { START_S };
        if !self.playing && self.buffer_s >= need {
            self.playing = true;
            self.started = true;
        }
    }
}

impl Player {
    /// The rung the rule picks, given the estimate, the current rung and the buffer.
    fn choose(&self, estimate: f64, current: Option<usize>, buffer_s: f64) -> usize {
        let ideal = self
            .ladder
            .iter()
            .rposition(|&b| b <= BANDWIDTH_FRACTION * estimate)
            .unwrap_or(0);
        match current {
            Some(c) if ideal > c && buffer_s < MIN_FOR_UP_S => c,
            Some(c) if ideal < c && buffer_s >= MAX_FOR_DOWN_S => c,
            _ => ideal,
        }
    }

    /// Bytes of one segment at rung `rung`.
    fn segment_bytes(&self, rung: usize) -> u64 {
        ((self.ladder[rung] * self.segment_s / 8.0).round() as u64).max(1)
    }

    /// The SHA-256 of a segment at every rung, for [`Player::play`] to check each segment
    /// without delaying its next request (a real player asks as soon as the segment is in).
    pub fn reference(&self) -> http::Reference {
        http::Reference::of((0..self.ladder.len()).map(|r| (0, self.segment_bytes(r))))
    }

    /// Streams the whole video from `origin` over `s`, checking every segment against
    /// `reference` ([`Player::reference`]). `progress` gets (seconds, bytes).
    pub async fn play(
        &self,
        mut s: TcpStream,
        reference: &http::Reference,
    ) -> io::Result<(Fetch, VideoStats)> {
        let started = Instant::now();
        let n = (self.video_s / self.segment_s).ceil() as usize;
        let mut meter = Meter::default();
        let mut pb = Playback::default();
        let mut last = Instant::now();
        let mut current = None;
        let (mut bits, mut switches, mut bytes, mut intact) = (0.0, 0, 0u64, true);
        let mut progress = vec![(0.0, 0u64)];
        let mut asked_s = Vec::with_capacity(n);
        let mut samples_mbps = Vec::with_capacity(n);
        for _ in 0..n {
            // Load control: wait while the buffer is full.
            loop {
                pb.advance(last.elapsed().as_secs_f64());
                last = Instant::now();
                if pb.buffer_s < MAX_BUFFER_S {
                    break;
                }
                let wait = pb.buffer_s - MAX_BUFFER_S + 0.01;
                tokio::time::sleep(Duration::from_secs_f64(wait)).await;
            }
            let rung = self.choose(meter.estimate(), current, pb.buffer_s);
            if current.is_some_and(|c| c != rung) {
                switches += 1;
            }
            current = Some(rung);
            let size = self.segment_bytes(rung);
            let t0 = Instant::now();
            asked_s.push(started.elapsed().as_secs_f64());
            let f = http::get_checked(&mut s, size, None, t0, reference).await?;
            // ExoPlayer's bandwidth meter starts a sample when the data source opens, once
            // the response head is in (`DefaultHttpDataSource.open` calls `transferStarted`
            // after `getResponseCode`), so the request's round trip is not in it.
            let head_s = f.progress.first().map_or(0.0, |&(t, _)| t);
            if let Some(bps) = meter.add(f.bytes, f.seconds - head_s) {
                samples_mbps.push(bps / 1e6);
            }
            intact &= f.intact;
            bytes += f.bytes;
            bits += self.ladder[rung];
            progress.push((started.elapsed().as_secs_f64(), bytes));
            pb.advance(last.elapsed().as_secs_f64());
            last = Instant::now();
            pb.add(self.segment_s);
        }
        let stats = VideoStats {
            mean_bitrate_mbps: bits / n.max(1) as f64 / 1e6,
            stall_s: pb.stall_s,
            stall_ratio: pb.stall_s / self.video_s,
            startup_s: pb.startup_s,
            switches,
            segments: n,
            stall_ratio_bound: None,
            stall_ratio_window_bound: None,
            asked_s,
            samples_mbps,
            segment_bound_s: Vec::new(),
        };
        let fetch = Fetch {
            bytes,
            seconds: started.elapsed().as_secs_f64(),
            intact,
            sha256: String::new(),
            progress,
        };
        Ok((fetch, stats))
    }
}

/// Connects as `via` says and plays.
pub async fn stream(
    origin: SocketAddr,
    via: &http::Via,
    p: &Player,
) -> io::Result<(Fetch, VideoStats)> {
    let reference = p.reference();
    let s = http::connect(origin, via).await?;
    p.play(s, &reference).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stall of [`Player::play`]'s playback clock for these arrivals (segments of
    /// `segment_s`), to hold the bound against.
    fn player_stall(arrivals: &[f64], segment_s: f64) -> (f64, f64) {
        let mut pb = Playback::default();
        let mut last = 0.0;
        for &t in arrivals {
            pb.advance(t - last);
            last = t;
            pb.add(segment_s);
        }
        (pb.stall_s, pb.startup_s)
    }

    #[test]
    fn the_stall_bound_plays_the_earliest_arrivals_greedily() {
        // 2 s segments arriving every 2 s from t = 2: playback can start at 4 s (2.5 s
        // buffered) and never runs dry.
        let steady: Vec<f64> = (1..=10).map(|i| 2.0 * i as f64).collect();
        assert_eq!(stall_bound(&steady, 2.0, None), 0.0);
        // Every 3 s: the earliest start is 6 s (two segments); the greedy player waits 1 s
        // before segments 5 and 6 (it reaches their starts at 14 and 17 s).
        let slow: Vec<f64> = (1..=6).map(|i| 3.0 * i as f64).collect();
        assert!((stall_bound(&slow, 2.0, None) - 2.0).abs() < 1e-9);
        // Started at 8 s it never waits; started at 0 it waits for the first segment too.
        assert_eq!(stall_bound(&slow, 2.0, Some(8.0)), 0.0);
        assert!((stall_bound(&slow, 2.0, Some(0.0)) - 8.0).abs() < 1e-9);
        let mut never = steady.clone();
        never.push(f64::INFINITY);
        assert!(stall_bound(&never, 2.0, None).is_infinite());
    }

    /// The bound never exceeds the player's own stall on the same arrivals from the same
    /// start, whatever the arrivals (its restart threshold only adds waiting).
    #[test]
    fn the_stall_bound_is_below_the_players_stall() {
        let mut x: u64 = 7;
        for case in 0..200 {
            let mut t = 0.0;
            let arrivals: Vec<f64> = (0..30)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    t += (x >> 33) as f64 / (1u64 << 31) as f64 * 4.0;
                    t
                })
                .collect();
            let (stall, startup) = player_stall(&arrivals, 2.0);
            let bound = stall_bound(&arrivals, 2.0, Some(startup));
            assert!(
                bound <= stall + 1e-9,
                "case {case}: bound {bound} > stall {stall}"
            );
            assert!(bound >= 0.0);
        }
    }

    #[test]
    fn ladders_match_the_paper() {
        let b = ladder("bbb").unwrap();
        assert_eq!(b.len(), 20);
        assert_eq!((b[0], b[19]), (46e3, 4.22e6));
        let t = ladder("tos").unwrap();
        assert_eq!(t.len(), 9);
        assert_eq!((t[0], t[8]), (253e3, 10e6));
        assert_eq!(ladder("fixed:64Mbps").unwrap(), vec![64e6]);
        assert!(ladder("imax").is_err());
    }

    #[test]
    fn the_rule_holds_rungs_as_exoplayer_does() {
        let p = Player {
            ladder: ladder("tos").unwrap(),
            segment_s: 2.0,
            video_s: 60.0,
        };
        // 5 Mbit/s estimate: 0.7 × 5 = 3.5 → 2491 kbit/s (rung 5).
        assert_eq!(p.choose(5e6, None, 0.0), 5);
        // Up needs 10 s of buffer; down is skipped with 25 s.
        assert_eq!(p.choose(20e6, Some(5), 4.0), 5);
        assert_eq!(p.choose(20e6, Some(5), 12.0), 8);
        assert_eq!(p.choose(1e6, Some(5), 30.0), 5);
        assert_eq!(p.choose(1e6, Some(5), 5.0), 1);
    }

    #[test]
    fn meter_takes_the_weighted_median() {
        let mut m = Meter::default();
        assert_eq!(m.estimate(), INITIAL_ESTIMATE_BPS);
        m.add(1_000_000, 1.0); // 8 Mbit/s, weight 1000
        m.add(10_000, 1.0); // 80 kbit/s, weight 100
        assert_eq!(m.estimate(), 8e6);
        // The window keeps about 2000 of weight: old samples leave.
        for _ in 0..3 {
            m.add(1_000_000, 2.0);
        }
        assert_eq!(m.estimate(), 4e6);
    }

    #[test]
    fn playback_counts_stalls_after_start_only() {
        let mut pb = Playback::default();
        pb.advance(1.0);
        pb.add(2.0);
        assert!(!pb.playing, "2 s < 2.5 s to start");
        pb.advance(0.5);
        pb.add(2.0);
        assert!(pb.playing);
        assert_eq!(pb.startup_s, 1.5);
        pb.advance(5.0); // 4 s of buffer, 1 s stalled
        assert!(!pb.playing);
        pb.add(2.0);
        pb.advance(1.0);
        pb.add(4.0); // 6 s ≥ 5 s: playing again
        assert!(pb.playing);
        assert_eq!(pb.stall_s, 2.0);
    }

    /// The lab's origin on a loopback port.
    async fn loopback_origin() -> SocketAddr {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = l.local_addr().unwrap();
        tokio::spawn(http::serve_origin(l));
        origin
    }

    #[tokio::test]
    async fn a_fast_link_plays_the_top_rung_without_stalls() {
        let origin = loopback_origin().await;
        let p = Player {
            ladder: ladder("bbb").unwrap(),
            segment_s: 2.0,
            video_s: 20.0,
        };
        let (f, v) = stream(origin, &http::Via::Direct, &p).await.unwrap();
        assert!(f.intact);
        assert_eq!(v.segments, 10);
        assert_eq!(v.stall_s, 0.0);
        // Loopback is fast: after the first segment the estimate allows the top rung, but
        // going up waits for 10 s of buffer, which a fast link fills at once.
        assert!(v.mean_bitrate_mbps > 2.0, "{v:?}");
    }

    /// A relay to `origin` that holds each request for `delay` before passing it on, so
    /// that every answer's head comes `delay` late and its body at loopback speed.
    async fn delay_requests(l: tokio::net::TcpListener, origin: SocketAddr, delay: Duration) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((c, _)) = l.accept().await {
            tokio::spawn(async move {
                let Ok(o) = TcpStream::connect(origin).await else {
                    return;
                };
                let (mut cr, mut cw) = c.into_split();
                let (mut or, mut ow) = o.into_split();
                tokio::spawn(async move { tokio::io::copy(&mut or, &mut cw).await });
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = cr.read(&mut buf).await {
                    tokio::time::sleep(delay).await;
                    if ow.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    }

    /// The meter's samples leave out the wait for the response head, as ExoPlayer's do: an
    /// origin whose every answer comes 300 ms late over loopback still reads as fast.
    #[tokio::test]
    async fn bandwidth_samples_start_at_the_response_head() {
        let origin = loopback_origin().await;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let slow = l.local_addr().unwrap();
        tokio::spawn(delay_requests(l, origin, Duration::from_millis(300)));
        let p = Player {
            ladder: ladder("tos").unwrap(),
            segment_s: 2.0,
            video_s: 4.0,
        };
        let (f, v) = stream(slow, &http::Via::Direct, &p).await.unwrap();
        assert!(f.intact);
        assert_eq!(v.samples_mbps.len(), 2, "{v:?}");
        // Timed from the request, a segment would read at most its bits over 300 ms (3.4
        // Mbit/s at the 505 kbit/s rung the 1 Mbit/s initial estimate picks); loopback
        // carries it in a few milliseconds (4 times that rate leaves it 75 ms, for a
        // loaded machine).
        let timed_from_request = v.mean_bitrate_mbps * p.segment_s / 0.3;
        for &m in &v.samples_mbps {
            assert!(
                m > 4.0 * timed_from_request,
                "sample {m} Mbit/s includes the head's wait"
            );
        }
        // Each segment still took the origin's 300 ms.
        assert!(f.seconds >= 0.6, "{f:?}");
    }
}
