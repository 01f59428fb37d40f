//! Scenario description and the parsers for its textual form (`10MB`, `8` Mbps, `50ms`,
//! `2s:pipe1=1`), shared by `mpbond sim` and the tests.

use std::sync::Arc;
use std::time::Duration;

use mpbond_core::energy::Radio;
use mpbond_core::{PamsConfig, Time};

use crate::rate::{RateProfile, Source, Trace};
use crate::tcp::TcpConfig;

pub use mpbond_core::units::{parse_duration, parse_rate_bps, parse_size, UnitError as SpecError};

fn err<T>(msg: String) -> Result<T, SpecError> {
    Err(SpecError(msg))
}

/// Which link a change or a trace applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkRef {
    /// The PS-Path.
    Ps,
    /// HS-Path of helper `k` (1-based, as written).
    Hs(usize),
    /// Pipe of helper `k` (1-based).
    Pipe(usize),
}

impl LinkRef {
    /// Parses `ps`, `hs1`, `pipe2` (a bare `hs`/`pipe` means helper 1).
    pub fn parse(s: &str) -> Result<LinkRef, SpecError> {
        let t = s.trim().to_ascii_lowercase();
        let num = |rest: &str| -> Result<usize, SpecError> {
            if rest.is_empty() {
                return Ok(1);
            }
            match rest.parse::<usize>() {
                Ok(k) if k >= 1 => Ok(k),
                _ => err(format!("bad link {s:?}: helpers are numbered from 1")),
            }
        };
        if t == "ps" {
            Ok(LinkRef::Ps)
        } else if let Some(r) = t.strip_prefix("pipe") {
            Ok(LinkRef::Pipe(num(r)?))
        } else if let Some(r) = t.strip_prefix("hs") {
            Ok(LinkRef::Hs(num(r)?))
        } else {
            err(format!("bad link {s:?}: use ps, hs<k> or pipe<k>"))
        }
    }
}

/// A timed change: `2s:pipe1=1` (at 2 s the pipe of helper 1 drops to 1 Mbps),
/// `5s:hs2=down`.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// When.
    pub at: Duration,
    /// Which link.
    pub link: LinkRef,
    /// The new rate, bits per second.
    pub bps: f64,
}

impl Change {
    /// Parses `TIME:LINK=RATE`.
    pub fn parse(s: &str) -> Result<Change, SpecError> {
        let usage = || {
            SpecError(format!(
                "bad change {s:?}: use TIME:LINK=RATE, e.g. 2s:pipe1=1"
            ))
        };
        let (time, rest) = s.split_once(':').ok_or_else(usage)?;
        let (link, rate) = rest.split_once('=').ok_or_else(usage)?;
        Ok(Change {
            at: parse_duration(time)?,
            link: LinkRef::parse(link)?,
            bps: parse_rate_bps(rate)?,
        })
    }
}

/// A comma-separated list; each element parsed by `f`.
pub fn parse_list<T>(
    s: &str,
    f: impl Fn(&str) -> Result<T, SpecError>,
) -> Result<Vec<T>, SpecError> {
    s.split(',')
        .filter(|x| !x.trim().is_empty())
        .map(f)
        .collect()
}

/// One path's link settings.
#[derive(Clone, Debug, PartialEq)]
pub struct PathSpec {
    /// Capacity over time (the direction that carries the download).
    pub rate: RateProfile,
    /// Round-trip propagation delay of the path.
    pub rtt: Duration,
    /// Drop-tail queue in bytes; `None` sizes it to one bandwidth-delay product (at least 16
    /// packets).
    pub queue_bytes: Option<u64>,
    /// Random loss probability per packet.
    pub loss: f64,
    /// Capacity toward the proxy (TCP ACKs, `DATA_ACK`s, pipe feedback, a rejoin's SYN), if
    /// limited: an LTE uplink trace, whose outages stop the download's ACKs and so, once the
    /// window is out, the download itself. `None`: only propagation delay, as before uplinks
    /// were modelled.
    pub up: Option<RateProfile>,
    /// Whether `rate` is the radio's own (a WLAN profile whose rate follows the distance)
    /// rather than a throttle on a WLAN close by, as the paper's `tc` was: a WiFi radio is
    /// priced by its airtime against this rate, or against [`WIFI_CLOSE_MBPS`] for a
    /// throttle (`crate::energy::air_mbps`).
    ///
    /// [`WIFI_CLOSE_MBPS`]: mpbond_core::energy::WIFI_CLOSE_MBPS
    pub radio_rate: bool,
}

impl PathSpec {
    /// A constant-rate path.
    pub fn constant(mbps: f64, rtt: Duration) -> Self {
        PathSpec {
            rate: RateProfile::constant(mbps * 1e6),
            rtt,
            queue_bytes: None,
            loss: 0.0,
            up: None,
            radio_rate: false,
        }
    }

    /// One-way delay (half the RTT).
    pub fn owd(&self) -> Duration {
        self.rtt / 2
    }

    /// The queue limit actually used.
    pub fn queue_limit(&self, mss: u64) -> u64 {
        self.queue_bytes.unwrap_or_else(|| {
            let bdp = self.rate.nominal_bps(Time::ZERO) / 8.0 * self.rtt.as_secs_f64();
            (bdp as u64).max(16 * (mss + 52))
        })
    }
}

/// One helper: its HS-Path and its pipe.
#[derive(Clone, Debug, PartialEq)]
pub struct HelperSpec {
    /// The helper's WAN path to the proxy.
    pub hs: PathSpec,
    /// The pipe to the primary.
    pub pipe: PathSpec,
}

/// How pipe feedback reaches the sender (MPBond §5, §6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedbackRoute {
    /// Always over the HS-Path ("fixed-always").
    HsPath,
    /// Over the HS-Path while it carries data, else over pipe + PS-Path ("flexible").
    Flexible,
}

/// What the throughput estimators are fed (MPBond §4.3.2 uses CWND/RTT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateSource {
    /// The connection's delivery-rate samples, as the daemons read tcpi_delivery_rate.
    DeliveryRate,
    /// CWND / smoothed RTT, as in the paper.
    CwndRtt,
}

/// Everything a simulation run needs.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The primary's own WAN path.
    pub ps: PathSpec,
    /// The helpers.
    pub helpers: Vec<HelperSpec>,
    /// Download size in bytes.
    pub size: u64,
    /// Scheduler name.
    pub scheduler: String,
    /// PAMS settings (η, reinjection).
    pub pams: PamsConfig,
    /// Largest `STREAM_DATA` payload.
    pub segment: usize,
    /// The sender writes to a subflow only while its not-sent bytes are below this
    /// (TCP_NOTSENT_LOWAT).
    pub notsent_lowat: u64,
    /// Bytes a helper buffers per subflow before it stops reading its HS-Path.
    pub helper_buffer: u64,
    /// How often helpers report pipe state.
    pub feedback_interval: Duration,
    /// Which way feedback travels.
    pub feedback_route: FeedbackRoute,
    /// Send `DATA_CANCEL` for recalled bytes.
    pub cancel_recalled: bool,
    /// Clamp reported helper buffers to the outstanding bytes.
    pub clamp_helper_buffer: bool,
    /// Send a head of line long past its due time again (`SenderConfig::late_rescue`).
    pub late_rescue: bool,
    /// Send a head of line held behind a loss again (`SenderConfig::loss_rescue`).
    pub loss_rescue: bool,
    /// Copy the tail of the last subflow to finish onto drained ones
    /// (`SenderConfig::tail_copy`).
    pub tail_copy: bool,
    /// Helpers send their pipe's minimum RTT beside their reports (`PIPE_MIN_RTT`,
    /// `tuning.pipe_min_rtt`); off, PAD reads the reported (smoothed) pipe RTT as its delay.
    pub pipe_min_rtt: bool,
    /// Send a head of line blocking a full window or stuck on a stalled path again
    /// (`SenderConfig::window_rescue`).
    pub window_rescue: bool,
    /// A path with data outstanding and no progress for this long is declared dead.
    pub stall_timeout: Duration,
    /// How long a stalled WAN path stays stale before it is dead, as in the daemons
    /// (`mpbond_daemon::liveness`): a stale subflow's data goes to the others and it gets
    /// nothing new, but its connections stay and it is scheduled on again once its TCP
    /// makes progress. Zero: a stalled path is dead at once (MPBond §4.1). A stalled pipe
    /// is dead at once either way.
    pub dead_timeout: Duration,
    /// Bring a dead subflow back as the daemons do: the primary reconnects its PS-Path at
    /// once, and asks a helper to join again a second after its subflow died; the new
    /// connection is up once its handshake has crossed the link (after an outage ends) and
    /// starts from a fresh window and fresh estimates. Off, a dead subflow stays dead.
    pub rejoin: bool,
    /// Time constant of the throughput estimators.
    pub estimator_tau: Duration,
    /// How long the throughput estimators hold their level after a loss, in smoothed RTTs
    /// (0: the plain average; `LOSS_HOLD_RTTS` is the value the lab tries).
    pub loss_hold: f64,
    /// For how many smoothed RTTs after a loss a rate sample counts at least the rate the
    /// connection's ACKs show a standing queue draining at (`PathEstimator::
    /// with_drain_floor`; 3 as in the daemons, 0: the samples as they are).
    pub drain_floor: f64,
    /// What the throughput estimators are fed.
    pub rate_source: RateSource,
    /// Start each pipe's throughput estimate at the pipe's rate, as if measured when the pipe
    /// was set up (pipes are long-lived local links); otherwise start from the initial window
    /// over the RTT like a fresh connection.
    pub warm_pipes: bool,
    /// TCP model settings.
    pub tcp: TcpConfig,
    /// Seed for random loss and trace offsets.
    pub seed: u64,
    /// Give up after this much simulated time.
    pub time_limit: Duration,
    /// Record per-subflow progress every this often, if set.
    pub timeline_every: Option<Duration>,
    /// Every phone's WAN radio (PS-Path, HS-Paths): what the energy meter prices
    /// ([`crate::energy`]) and the proxy's views declare.
    pub wan_radio: Radio,
    /// Every pipe's radio, at both ends.
    pub pipe_radio: Radio,
    /// Give the proxy's views the phones' radio state as the daemons do: each subflow's
    /// radios (`PathView::power`, from the devices' `RADIOS` frames there) and how long its
    /// WAN link has been quiet (`PathView::wan_idle`, from their sockets there). PAMS's
    /// radio-aware rules (the wake cost of a drained helper, the energy-aware admission)
    /// read them; without them those rules are inert, as in the simulator before it modelled
    /// radios.
    pub radio_state: bool,
    /// The proxy's queue guard on its PS-Path and HS-Paths, as the daemons'
    /// `tuning.queue_guard` (`mpbond_core::queue_guard`): pace a link filling its queue in
    /// slow start at this factor over its delivered rate; below 1, off. It acts only with
    /// `tcp.pacing`, as in the daemons.
    pub queue_guard: f64,
    /// An HS-Path's own guard, as `tuning.hs_queue_guard` (docs/evaluation.md, item 38): in
    /// slow start and congestion avoidance while the helper's buffer would drain sooner than
    /// the HS-Path's queue delay and, past slow start, its rate is steady (1.1 by default, as
    /// in the daemons); below 1, the HS-Paths take `queue_guard`.
    pub hs_queue_guard: f64,
    /// The PS-Path's guard in congestion avoidance, as `tuning.ps_queue_guard`
    /// (docs/evaluation.md, item 39): past slow start, while its rate is steady, pace it at
    /// this factor over its delivered rate once its queue stands; below 1 (the default, as
    /// in the daemons), off.
    pub ps_queue_guard: f64,
}

impl Scenario {
    /// The paper's common setting with `helpers` helpers: PS 8 Mbps, each HS 10 Mbps and pipe
    /// 5 Mbps, WAN RTT 50 ms, pipe RTT 4 ms.
    pub fn paper_common(helpers: usize, size: u64, scheduler: &str) -> Scenario {
        Scenario::new(
            PathSpec::constant(8.0, Duration::from_millis(50)),
            (0..helpers)
                .map(|_| HelperSpec {
                    hs: PathSpec::constant(10.0, Duration::from_millis(50)),
                    pipe: PathSpec::constant(5.0, Duration::from_millis(4)),
                })
                .collect(),
            size,
            scheduler,
        )
    }

    /// A scenario with default settings for everything but the topology.
    pub fn new(ps: PathSpec, helpers: Vec<HelperSpec>, size: u64, scheduler: &str) -> Scenario {
        Scenario {
            ps,
            helpers,
            size,
            scheduler: scheduler.to_string(),
            pams: PamsConfig::default(),
            segment: 16_384,
            notsent_lowat: 4096,
            helper_buffer: 8 << 20,
            feedback_interval: Duration::from_millis(20),
            feedback_route: FeedbackRoute::HsPath,
            cancel_recalled: true,
            clamp_helper_buffer: true,
            late_rescue: true,
            loss_rescue: true,
            tail_copy: false,
            pipe_min_rtt: true,
            window_rescue: true,
            stall_timeout: Duration::from_secs(1),
            dead_timeout: Duration::from_secs(10),
            rejoin: true,
            estimator_tau: Duration::from_millis(100),
            loss_hold: 0.0,
            drain_floor: mpbond_core::estimator::DRAIN_FLOOR_RTTS,
            rate_source: RateSource::DeliveryRate,
            warm_pipes: true,
            tcp: TcpConfig::default(),
            seed: 1,
            time_limit: Duration::from_secs(3600),
            timeline_every: None,
            wan_radio: Radio::Lte,
            pipe_radio: Radio::Wifi,
            radio_state: true,
            queue_guard: mpbond_core::queue_guard::DEFAULT_FACTOR,
            hs_queue_guard: mpbond_core::queue_guard::DEFAULT_HS_FACTOR,
            ps_queue_guard: mpbond_core::queue_guard::DEFAULT_PS_FACTOR,
        }
    }

    /// Applies a timed change.
    pub fn apply(&mut self, c: &Change) -> Result<(), SpecError> {
        let at = Time::from_secs_f64(c.at.as_secs_f64());
        let path = self.path_mut(c.link)?;
        path.rate.change_at(at, Source::Constant(c.bps));
        Ok(())
    }

    /// Makes a link follow a trace from time 0.
    pub fn set_trace(&mut self, link: LinkRef, trace: Arc<Trace>) -> Result<(), SpecError> {
        self.path_mut(link)?.rate = RateProfile::trace(trace);
        Ok(())
    }

    /// Makes a link's direction toward the proxy follow a trace from time 0 (the PS-Path
    /// and HS-Paths: a pipe's uplink is not modelled).
    pub fn set_up_trace(&mut self, link: LinkRef, trace: Arc<Trace>) -> Result<(), SpecError> {
        if let LinkRef::Pipe(_) = link {
            return err("an uplink trace is for ps or hs<k>: pipe uplinks are not modelled".into());
        }
        self.path_mut(link)?.up = Some(RateProfile::trace(trace));
        Ok(())
    }

    /// The path settings of a link.
    pub fn path_mut(&mut self, link: LinkRef) -> Result<&mut PathSpec, SpecError> {
        let n = self.helpers.len();
        let missing = |k: usize| {
            SpecError(format!(
                "helper {k} does not exist: this scenario has {n} helper(s)"
            ))
        };
        match link {
            LinkRef::Ps => Ok(&mut self.ps),
            LinkRef::Hs(k) => self
                .helpers
                .get_mut(k - 1)
                .map(|h| &mut h.hs)
                .ok_or_else(|| missing(k)),
            LinkRef::Pipe(k) => self
                .helpers
                .get_mut(k - 1)
                .map(|h| &mut h.pipe)
                .ok_or_else(|| missing(k)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_and_lists() {
        assert_eq!(
            Change::parse("2s:pipe1=1").unwrap(),
            Change {
                at: Duration::from_secs(2),
                link: LinkRef::Pipe(1),
                bps: 1e6
            }
        );
        assert_eq!(Change::parse("5s:hs=down").unwrap().link, LinkRef::Hs(1));
        assert!(Change::parse("2s-pipe1").is_err());
        assert!(LinkRef::parse("hs0").is_err());
        assert_eq!(
            parse_list("10, 6", parse_rate_bps).unwrap(),
            vec![10e6, 6e6]
        );
    }

    #[test]
    fn changes_apply_to_existing_links_only() {
        let mut s = Scenario::paper_common(1, 1000, "pams");
        s.apply(&Change::parse("2s:pipe1=1").unwrap()).unwrap();
        assert_eq!(
            s.helpers[0].pipe.rate.nominal_bps(Time::from_millis(2500)),
            1e6
        );
        assert_eq!(
            s.helpers[0].pipe.rate.nominal_bps(Time::from_millis(1500)),
            5e6
        );
        let e = s.apply(&Change::parse("1s:hs2=3").unwrap()).unwrap_err();
        assert!(e.0.contains("1 helper"), "{e}");
    }
}
