//! Link capacity over time: constant rates, changes at given times, and mahimahi traces.
//!
//! A [`RateProfile`] is a list of segments, each starting at a time and following one
//! [`Source`] until the next segment starts. "At 2 s the pipe drops to 1 Mbps" is a new
//! constant segment at 2 s; a rate of 0 is a link that is down. Because the whole profile is
//! known in advance, a packet's departure time is computed exactly, even when its service spans
//! a change.

use std::sync::Arc;
use std::time::Duration;

use mpbond_core::Time;

/// Bytes one mahimahi delivery opportunity carries.
pub const TRACE_PACKET: u64 = 1500;

/// A mahimahi trace: each line is a millisecond timestamp at which one 1500-byte delivery
/// opportunity occurs; the trace repeats, shifted by its last timestamp.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Opportunity times in ms, ascending.
    pub opportunities: Vec<u64>,
    /// Repeat period in ms (the last timestamp).
    pub period_ms: u64,
    /// Where it came from, for reports.
    pub name: String,
}

/// Errors reading a trace.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// I/O error.
    #[error("cannot read trace {path}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// Bad content.
    #[error("trace {name}, line {line}: {what}")]
    Parse {
        /// The trace.
        name: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        what: &'static str,
    },
}

impl Trace {
    /// Parses mahimahi text.
    pub fn parse(name: &str, text: &str) -> Result<Trace, TraceError> {
        let err = |line, what| TraceError::Parse {
            name: name.to_string(),
            line,
            what,
        };
        let mut v = Vec::new();
        for (i, l) in text.lines().enumerate() {
            let l = l.trim();
            if l.is_empty() {
                continue;
            }
            let t: u64 = l
                .parse()
                .map_err(|_| err(i + 1, "not a whole number of ms"))?;
            if v.last().is_some_and(|&p| t < p) {
                return Err(err(i + 1, "timestamps go backwards"));
            }
            v.push(t);
        }
        let period = *v.last().ok_or_else(|| err(0, "empty trace"))?;
        if period == 0 {
            return Err(err(
                v.len(),
                "last timestamp is 0: the trace has no duration",
            ));
        }
        Ok(Trace {
            opportunities: v,
            period_ms: period,
            name: name.to_string(),
        })
    }

    /// Reads a trace file.
    pub fn load(path: &str) -> Result<Trace, TraceError> {
        let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
            path: path.to_string(),
            source,
        })?;
        let name = std::path::Path::new(path)
            .file_name()
            .map_or(path.to_string(), |n| n.to_string_lossy().into_owned());
        Trace::parse(&name, &text)
    }

    /// A trace from a rate sampled every `step_ms` (bits per second per step), so generated
    /// profiles replay through the same code as recorded ones. Opportunities fall where the
    /// accumulated bytes cross each 1500-byte boundary; the period is the profile's length.
    pub fn from_rates(name: &str, step_ms: u64, rates_bps: &[f64]) -> Result<Trace, TraceError> {
        let step_ms = step_ms.max(1);
        let mut v = Vec::new();
        let mut acc = 0.0f64;
        for (i, &r) in rates_bps.iter().enumerate() {
            let per_ms = r.max(0.0) / 8.0 / 1e3;
            for m in 0..step_ms {
                acc += per_ms;
                while acc >= TRACE_PACKET as f64 {
                    acc -= TRACE_PACKET as f64;
                    v.push(i as u64 * step_ms + m + 1);
                }
            }
        }
        let period = rates_bps.len() as u64 * step_ms;
        if v.is_empty() || period == 0 {
            return Err(TraceError::Parse {
                name: name.to_string(),
                line: 0,
                what: "the profile never delivers a packet",
            });
        }
        Ok(Trace {
            opportunities: v,
            period_ms: period,
            name: name.to_string(),
        })
    }

    /// The same trace with every rate multiplied by `factor` (> 0): in each millisecond,
    /// `factor` times as many opportunities, fractions carried over.
    pub fn scaled(&self, factor: f64) -> Trace {
        let mut v = Vec::with_capacity((self.opportunities.len() as f64 * factor) as usize + 1);
        let mut acc = 0.0f64;
        let mut i = 0;
        while i < self.opportunities.len() {
            let t = self.opportunities[i];
            let mut n = 0;
            while i < self.opportunities.len() && self.opportunities[i] == t {
                n += 1;
                i += 1;
            }
            acc += n as f64 * factor;
            while acc >= 1.0 {
                acc -= 1.0;
                v.push(t);
            }
        }
        if v.is_empty() {
            v.push(self.period_ms);
        }
        Trace {
            opportunities: v,
            period_ms: self.period_ms,
            name: format!("{}*{factor}", self.name),
        }
    }

    /// The same trace begun `offset_ms` into it (wrapping at the period): the opportunities
    /// after the offset come first, those up to it follow one period later. The lab starts each
    /// repetition at a different point of a recorded trace (`trace_step`, docs/lab.md), so a
    /// few repetitions see different conditions instead of the same first seconds.
    pub fn starting_at(&self, offset_ms: u64) -> Trace {
        let o = offset_ms % self.period_ms;
        if o == 0 {
            return self.clone();
        }
        let split = self.opportunities.partition_point(|&t| t <= o);
        let mut v = Vec::with_capacity(self.opportunities.len());
        v.extend(self.opportunities[split..].iter().map(|&t| t - o));
        v.extend(
            self.opportunities[..split]
                .iter()
                .map(|&t| t + self.period_ms - o),
        );
        Trace {
            opportunities: v,
            period_ms: self.period_ms,
            name: format!("{}@{o}ms", self.name),
        }
    }

    /// Mean rate in bits per second.
    pub fn mean_bps(&self) -> f64 {
        self.opportunities.len() as f64 * TRACE_PACKET as f64 * 8.0 / (self.period_ms as f64 / 1e3)
    }

    /// The time (relative to the trace start) of opportunity number `k` (0-based, counting
    /// across repetitions).
    fn opportunity(&self, k: u64) -> u64 {
        let n = self.opportunities.len() as u64;
        (k / n) * self.period_ms + self.opportunities[(k % n) as usize]
    }

    /// Index of the first opportunity at or after relative time `t_ms` (fractional).
    fn first_at_or_after(&self, t_ms: f64) -> u64 {
        let n = self.opportunities.len() as u64;
        let t = t_ms.max(0.0);
        let rep = (t / self.period_ms as f64).floor() as u64;
        let within = t - (rep * self.period_ms) as f64;
        let i = self.opportunities.partition_point(|&o| (o as f64) < within) as u64;
        rep * n + i
    }

    /// Opportunities in relative time `[0, t_ms]`.
    fn count_upto(&self, t_ms: f64) -> u64 {
        if t_ms < 0.0 {
            return 0;
        }
        let n = self.opportunities.len() as u64;
        let rep = (t_ms / self.period_ms as f64).floor() as u64;
        let within = t_ms - (rep * self.period_ms) as f64;
        rep * n
            + self
                .opportunities
                .partition_point(|&o| (o as f64) <= within) as u64
    }
}

/// What drives a link during one segment of its profile.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A constant rate in bits per second (0: the link is down).
    Constant(f64),
    /// A trace, replayed from its start at the segment's start.
    Trace(Arc<Trace>),
}

/// A link's capacity over time.
#[derive(Debug, Clone, PartialEq)]
pub struct RateProfile {
    /// (start, source), ascending; the first starts at 0.
    segments: Vec<(Time, Source)>,
}

impl RateProfile {
    /// A constant rate in bits per second.
    pub fn constant(bps: f64) -> Self {
        RateProfile {
            segments: vec![(Time::ZERO, Source::Constant(bps.max(0.0)))],
        }
    }

    /// A trace from time 0.
    pub fn trace(t: Arc<Trace>) -> Self {
        RateProfile {
            segments: vec![(Time::ZERO, Source::Trace(t))],
        }
    }

    /// From `at` on, follow `source` (replacing whatever came after `at`).
    pub fn change_at(&mut self, at: Time, source: Source) {
        self.segments.retain(|(t, _)| *t < at);
        self.segments.push((at, source));
        if self.segments[0].0 != Time::ZERO {
            self.segments.insert(0, (Time::ZERO, Source::Constant(0.0)));
        }
    }

    /// The same profile with every rate multiplied by `factor` (> 0; traces through
    /// [`Trace::scaled`]): what-if bounds such as "with 90% of these links' capacity"
    /// (`mpbond lab bounds --wan-scale`).
    pub fn scaled(&self, factor: f64) -> RateProfile {
        if !(factor.is_finite() && factor > 0.0) || factor == 1.0 {
            return self.clone();
        }
        RateProfile {
            segments: self
                .segments
                .iter()
                .map(|(t, src)| {
                    let src = match src {
                        Source::Constant(b) => Source::Constant(b * factor),
                        Source::Trace(tr) => Source::Trace(Arc::new(tr.scaled(factor))),
                    };
                    (*t, src)
                })
                .collect(),
        }
    }

    /// The segments.
    pub fn segments(&self) -> &[(Time, Source)] {
        &self.segments
    }

    /// The nominal rate at time `t` in bits per second (a trace's mean rate for trace
    /// segments).
    pub fn nominal_bps(&self, t: Time) -> f64 {
        let i = self.segment_at(t);
        match &self.segments[i].1 {
            Source::Constant(b) => *b,
            Source::Trace(tr) => tr.mean_bps(),
        }
    }

    fn segment_at(&self, t: Time) -> usize {
        self.segments
            .partition_point(|(s, _)| *s <= t)
            .saturating_sub(1)
    }

    /// Bytes the link can serve in `[0, t]` if always busy.
    pub fn cumulative_bytes(&self, t: Time) -> f64 {
        let mut total = 0.0;
        for (i, (start, src)) in self.segments.iter().enumerate() {
            if *start > t {
                break;
            }
            let end = self.segments.get(i + 1).map_or(t, |(s, _)| (*s).min(t));
            let dur = (end - *start).as_secs_f64();
            total += match src {
                Source::Constant(bps) => bps / 8.0 * dur,
                Source::Trace(tr) => {
                    // Opportunities in [start, end): those at relative time < dur (ms).
                    let upto = if end == t && i + 1 == self.segments.len() {
                        tr.count_upto(dur * 1e3)
                    } else {
                        tr.first_at_or_after(dur * 1e3)
                    };
                    (upto * TRACE_PACKET) as f64
                }
            };
        }
        total
    }
}

/// The serving state of one link direction: for trace segments, the next unused delivery
/// opportunity and the bytes left of the last one used.
#[derive(Debug, Clone, Default)]
pub struct Server {
    /// (segment index, next unused opportunity, bytes left of opportunity `next - 1`).
    trace_pos: Option<(usize, u64, u64)>,
}

impl Server {
    /// When `bytes` finish if their service starts at `start`, or `None` if the link never
    /// serves them (down for good).
    ///
    /// For traces this follows mahimahi: each opportunity carries 1500 bytes of queued data, a
    /// packet may take bytes from several opportunities, and bytes of an opportunity that no
    /// queued packet uses at that instant are lost.
    pub fn finish(&mut self, profile: &RateProfile, start: Time, bytes: u64) -> Option<Time> {
        let mut remaining = bytes;
        let mut t = start;
        let mut i = profile.segment_at(t);
        loop {
            let (seg_start, src) = &profile.segments[i];
            let seg_end = profile.segments.get(i + 1).map(|(s, _)| *s);
            match src {
                Source::Constant(bps) => {
                    if *bps > 0.0 {
                        let need = remaining as f64 * 8.0 / bps;
                        let done = t + Duration::from_secs_f64(need);
                        match seg_end {
                            Some(e) if done > e => {
                                let served = ((e - t).as_secs_f64() * bps / 8.0) as u64;
                                remaining = remaining.saturating_sub(served).max(1);
                            }
                            _ => return Some(done),
                        }
                    }
                }
                Source::Trace(tr) => {
                    let at_of = |k: u64| *seg_start + Duration::from_millis(tr.opportunity(k));
                    let rel_ms = (t - *seg_start).as_secs_f64() * 1e3;
                    let mut k = tr.first_at_or_after(rel_ms);
                    if let Some((seg, next, left)) = self.trace_pos {
                        if seg == i {
                            // Bytes left of the last opportunity, usable only at its instant.
                            if next > 0 && left > 0 && at_of(next - 1) == t {
                                let used = left.min(remaining);
                                remaining -= used;
                                if remaining == 0 {
                                    self.trace_pos = Some((i, next, left - used));
                                    return Some(t);
                                }
                            }
                            k = k.max(next);
                        }
                    }
                    loop {
                        let at = at_of(k);
                        if seg_end.is_some_and(|e| at >= e) {
                            break;
                        }
                        let used = TRACE_PACKET.min(remaining);
                        remaining -= used;
                        k += 1;
                        if remaining == 0 {
                            self.trace_pos = Some((i, k, TRACE_PACKET - used));
                            return Some(at);
                        }
                    }
                }
            }
            match seg_end {
                Some(e) => {
                    t = e;
                    i += 1;
                }
                None => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_and_scaled_traces_keep_their_mean_rate() {
        // 12 Mbit/s for 1 s, then 0 for 1 s: 1000 packets over a 2 s period = 6 Mbit/s.
        let mut r = vec![12e6; 10];
        r.extend(vec![0.0; 10]);
        let t = Trace::from_rates("gen", 100, &r).unwrap();
        assert_eq!(t.period_ms, 2000);
        assert_eq!(t.opportunities.len(), 1000);
        assert!(
            t.opportunities.iter().all(|&o| o <= 1000),
            "nothing in the silent second"
        );
        assert!((t.mean_bps() - 6e6).abs() < 1e-6);
        let s = t.scaled(2.5);
        assert!(
            (s.mean_bps() - 15e6).abs() / 15e6 < 0.001,
            "{}",
            s.mean_bps()
        );
        assert!(s.opportunities.windows(2).all(|w| w[0] <= w[1]));
        assert!(Trace::from_rates("none", 100, &[0.0; 5]).is_err());
    }

    /// A scaled profile keeps its change times and scales every segment, constant or
    /// trace; a factor that is not a positive number leaves it as it is.
    #[test]
    fn a_scaled_profile_scales_every_segment() {
        let tr = Arc::new(Trace::from_rates("gen", 100, &[12e6; 10]).unwrap());
        let mut p = RateProfile::constant(8e6);
        p.change_at(Time::from_millis(1000), Source::Trace(tr));
        let half = p.scaled(0.5);
        assert_eq!(half.segments()[1].0, Time::from_millis(1000));
        // 1 s at 4 Mbit/s, then 1 s of the trace at 6 Mbit/s.
        let got = half.cumulative_bytes(Time::from_millis(2000));
        assert!((got - 1.25e6).abs() < 3000.0, "{got}");
        assert_eq!(p.scaled(f64::NAN), p);
        assert_eq!(p.scaled(-1.0), p);
    }

    #[test]
    fn a_trace_begun_later_is_the_same_sequence_shifted() {
        let t = Trace::parse("t", "1\n1\n4\n7\n10\n").unwrap();
        let s = t.starting_at(4);
        assert_eq!(s.period_ms, 10);
        assert_eq!(s.opportunities, vec![3, 6, 7, 7, 10]);
        // Opportunity k of the shifted trace is the original's k-th one after 4 ms, across
        // repetitions.
        let after: Vec<u64> = (0..40)
            .map(|k| t.opportunity(k))
            .filter(|&x| x > 4)
            .map(|x| x - 4)
            .take(20)
            .collect();
        let shifted: Vec<u64> = (0..20).map(|k| s.opportunity(k)).collect();
        assert_eq!(after, shifted);
        assert_eq!(t.starting_at(0), t);
        assert_eq!(t.starting_at(20), t, "whole periods change nothing");
        assert_eq!(t.starting_at(14).opportunities, s.opportunities);
        assert!((s.mean_bps() - t.mean_bps()).abs() < 1e-9);
    }

    fn ms(x: u64) -> Time {
        Time::from_millis(x)
    }

    #[test]
    fn constant_rate_service_time() {
        let p = RateProfile::constant(8e6); // 1 MB/s: 1000 bytes per ms
        let mut s = Server::default();
        assert_eq!(s.finish(&p, ms(0), 1000), Some(ms(1)));
        assert_eq!(p.cumulative_bytes(ms(2000)), 2e6);
    }

    #[test]
    fn service_spans_a_change_and_a_down_period() {
        let mut p = RateProfile::constant(8e6);
        p.change_at(ms(10), Source::Constant(0.0));
        p.change_at(ms(20), Source::Constant(4e6));
        let mut s = Server::default();
        // 5000 bytes from t = 7 ms: 3000 by 10 ms, nothing until 20 ms, 2000 at 500 B/ms.
        assert_eq!(s.finish(&p, ms(7), 5000), Some(ms(24)));
        let mut down = RateProfile::constant(8e6);
        down.change_at(ms(10), Source::Constant(0.0));
        assert_eq!(s.finish(&down, ms(9), 2000), None, "down for good");
        assert_eq!(down.nominal_bps(ms(11)), 0.0);
    }

    #[test]
    fn trace_opportunities_and_leftover() {
        let tr = Arc::new(Trace::parse("t", "1\n1\n3\n4\n").unwrap());
        assert_eq!(tr.period_ms, 4);
        let p = RateProfile::trace(tr.clone());
        let mut s = Server::default();
        // A 1000-byte packet at 0 uses the first opportunity at 1 ms, leaving 500 bytes.
        assert_eq!(s.finish(&p, ms(0), 1000), Some(ms(1)));
        // A 400-byte packet starting at 1 ms uses the leftover at once.
        assert_eq!(s.finish(&p, ms(1), 400), Some(ms(1)));
        // The next 1500 bytes: the second opportunity at 1 ms is still unused.
        assert_eq!(s.finish(&p, ms(1), 1500), Some(ms(1)));
        // Then 3 ms, 4 ms, and after the repeat 5 ms (= 4 + 1).
        assert_eq!(s.finish(&p, ms(2), 3000), Some(ms(4)));
        assert_eq!(
            s.finish(&p, ms(4) + Duration::from_micros(1), 1),
            Some(ms(5))
        );
        // 4 opportunities per 4 ms = 1500 B/ms = 12 Mbps.
        assert_eq!(tr.mean_bps(), 12e6);
        assert_eq!(p.cumulative_bytes(ms(4)), 6000.0);
        assert_eq!(p.cumulative_bytes(ms(8)), 12000.0);
    }

    #[test]
    fn bad_traces_are_clear_errors() {
        let e = Trace::parse("x", "5\n3\n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        assert!(Trace::parse("x", "").is_err());
        assert!(Trace::parse("x", "0\n0\n").is_err());
        assert!(Trace::parse("x", "1\nfoo\n")
            .unwrap_err()
            .to_string()
            .contains("ms"));
        // The path in the message, the OS's reason as its source (printed once in a chain).
        let e = Trace::load("/nonexistent/trace").unwrap_err();
        assert_eq!(e.to_string(), "cannot read trace /nonexistent/trace");
        assert!(std::error::Error::source(&e).is_some());
    }
}
