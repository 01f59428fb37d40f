//! Device configuration: one TOML file per device, with a section per role it plays.
//!
//! A device that is both a primary and a helper (dual mode, MPBond §4.4.1) has both sections.
//! Sizes and durations are written as text (`"4MiB"`, `"1s"`). README.md, "Configuration",
//! lists every key; `examples/` has a file per role.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mpbond_core::units::{parse_duration, parse_size};
use mpbond_proto::Radio;
use serde::{Deserialize, Deserializer, Serialize};

use crate::keys::PublicKey;

/// A size in bytes, written as `"4MiB"`, `"512KB"` or a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Size(pub u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Size(n)),
            Raw::S(s) => parse_size(&s).map(Size).map_err(serde::de::Error::custom),
        }
    }
}

/// A duration, written as `"1s"` or `"250ms"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Dur(pub Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s)
            .map(Dur)
            .map_err(serde::de::Error::custom)
    }
}

/// Errors reading a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML is invalid or has unknown or mistyped keys.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What the parser said (with line and column).
        message: String,
    },
    /// The values are inconsistent.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// A named peer's public key.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    /// A name for logs and status.
    pub name: String,
    /// Its public key (base64).
    pub key: PublicKey,
}

/// Settings shared by every role; the defaults suit mobile links.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Tuning {
    /// TCP_NOTSENT_LOWAT of every subflow and pipe socket: data waits in user space, where
    /// the scheduler can still move it, until the kernel has less than this left to send.
    pub lowat: Size,
    /// Largest `STREAM_DATA` payload.
    pub segment: Size,
    /// On a path slower than a low-water mark (`lowat`) per this time, data frames and the
    /// records they are sealed in carry only this long's worth of the path's throughput (at
    /// least 2 KiB): the primary hands a frame to the application only once its whole
    /// record has arrived, and a 16 KiB record takes 130 ms on a 1 Mbit/s path. The
    /// scheduler still decides whole `segment`s. `"0ms"` keeps records at the mark
    /// (`mpbond-fixed-segments` in the lab).
    pub segment_time: Dur,
    /// Unacknowledged bytes buffered per stream on the sending side, to start with.
    pub stream_buffer: Size,
    /// Receive window per stream, to start with.
    pub recv_window: Size,
    /// How far a stream's receive window and send buffer may grow while its application
    /// keeps up (receive-window autotuning, `RecvStream::autotune`; the default is Linux's
    /// `tcp_rmem` maximum). Equal to `recv_window` for fixed windows.
    pub window_max: Size,
    /// Bytes buffered on the sending side across all streams of a session.
    pub session_buffer: Size,
    /// A link with unacknowledged data and no ACK for this long, or busy and hearing nothing
    /// from its peer, has stalled: its data is reinjected on the other subflows. A pipe is then
    /// torn down; a WAN link (PS-Path, HS-Path) goes stale and keeps its connection
    /// ([`crate::liveness`]).
    pub stall_timeout: Dur,
    /// How long a WAN link may stay stale before it is torn down and its device connects
    /// again; `"0s"` tears it down at the stall, as MPBond §4.1 does.
    pub dead_timeout: Dur,
    /// How often helpers report pipe state.
    pub feedback_interval: Dur,
    /// How long to wait for an origin, a handshake or a join.
    pub connect_timeout: Dur,
    /// Disable encryption and authentication (benchmarks only; both ends must agree).
    pub insecure: bool,
    /// PAMS deferral lookahead in RTTs of the slowest subflow; 0 is Algorithm 1 as published
    /// (the whole backlog counts). See `PamsConfig::lookahead_rtts`.
    pub pams_lookahead: f64,
    /// How PAMS counts bytes in flight in a subflow's delay: `"drain"` (they drain at the
    /// bottleneck; mpbond's default) or `"paper"` (OWD + B/Th, MPBond §4.3.2 as published).
    /// See `PadModel`.
    pub pams_pad: String,
    /// How long a path's throughput estimate holds its level after a loss, in smoothed RTTs
    /// (0, the default: the plain moving average). See `PathEstimator`: it keeps CUBIC's
    /// post-loss dip out of PAMS's split, which helps some settings and hurts others
    /// (docs/evaluation.md), so it is opt-in.
    pub loss_hold: f64,
    /// For how many smoothed RTTs after a loss a path's rate samples count at least the rate
    /// its ACKs show a standing queue draining at (3, the default; 0: the kernel's samples as
    /// they are). See `PathEstimator::with_drain_floor`: it keeps the dip of CUBIC's pause
    /// after a loss out of PAMS's split while the bottleneck stays busy, and follows a drop
    /// in capacity at once.
    pub drain_floor: f64,
    /// PAMS reinjection (MPBond §4.3.4); off only to measure what it buys (§6.2). Failed
    /// subflows are rescued either way.
    pub pams_reinjection: bool,
    /// How many of a source path's recent rate shortfalls PAMS's recall test reads it below
    /// its estimate (0, the default: the estimate as it is; 1 in the lab's
    /// `mpbond-shortfall`). See
    /// `PamsConfig::shortfall_sigmas`: at the end of a transfer it lets a recall rescue the
    /// last bytes of a cellular path that slowed faster than its estimate could follow.
    pub recall_shortfall: f64,
    /// Window rescue: when a stream is blocked (its buffer or the peer's window full) behind
    /// the oldest unacknowledged range on a late subflow, send that range again on an idle
    /// one (MPTCP's opportunistic retransmission, Raiciu et al., NSDI 2012 §4.2). Off only to
    /// measure what it buys (`mpbond-no-rescue` in the lab). See `SenderConfig::window_rescue`.
    pub window_rescue: bool,
    /// Late-head rescue: a stream's head of line well past the time PAMS expected it at the
    /// primary (a path whose rate collapsed, or whose retransmission waits behind its own
    /// queue) goes out again on a subflow that would deliver it sooner, with the rest of its
    /// subflow's share behind it. Off only to measure what it buys (`mpbond-no-late-rescue`
    /// in the lab). See `SenderConfig::late_rescue`.
    pub late_rescue: bool,
    /// Loss rescue: a stream's head of line held behind a hole its subflow's TCP is
    /// recovering from goes out again on a subflow that delivers it well before the
    /// retransmission, which crosses the path's queue, can. Off only to measure what it buys
    /// (`mpbond-no-loss-rescue` in the lab). See `SenderConfig::loss_rescue`.
    pub loss_rescue: bool,
    /// Tail copy: once a transfer's rest is all scheduled, a subflow that drained carries
    /// copies of the last segments of the one that will finish last, last first (off by
    /// default; `mpbond-tail-copy` in the lab). See `SenderConfig::tail_copy`.
    pub tail_copy: bool,
    /// Late binding at the end of a transfer: within `late_bind_horizon` of the end, PAMS
    /// gives a subflow new bytes only while the queue they would join there is at most this
    /// long, so that the last bytes are assigned when a path is about to run dry rather than
    /// a whole deep queue earlier. `"0ms"` (the default) turns it off; `mpbond-late-bind` in
    /// the lab. See `PamsConfig::late_bind`.
    pub late_bind: Dur,
    /// How close to the end late binding starts: the unscheduled bytes at the subflows'
    /// combined rate. See `PamsConfig::late_bind_horizon`.
    pub late_bind_horizon: Dur,
    /// A helper sends its pipe's minimum RTT (`PIPE_MIN_RTT`) beside its reports, and the
    /// scheduler at the other end takes it for the pipe's delay in PAD instead of the
    /// smoothed RTT, which holds the queue of the helper's buffer while it relays
    /// (`mpbond_core::scheduler::pams::pad_drain`). Off only to measure what it buys, as a
    /// helper that predates the frame (`mpbond-no-pipe-min-rtt` in the lab).
    pub pipe_min_rtt: bool,
    /// Kernel pacing on every link (MPBond's subflows and pipes): the kernel spreads each
    /// congestion window over the round trip instead of sending it in one burst. Without it,
    /// the burst a link sends when the scheduler refills it queues at a cellular bottleneck,
    /// and CUBIC's HyStart reads that self-made delay as a full path and leaves slow start
    /// early: on the LTE traces of docs/evaluation.md (10a) a helper subflow left it at 28
    /// packets, 43 KB into a 4 MB download, and crawled up by one packet per round trip.
    pub pacing: bool,
    /// Slow-start queue guard: while a link in slow start has filled its bottleneck's queue
    /// (RTT half again its minimum, over 1.5 bandwidth-delay products and 64 KiB in flight),
    /// its pacing rate is capped at this factor times the rate it delivers, so the queue
    /// grows slowly instead of overflowing by a window at the end of a transfer
    /// ([`crate::queue_guard`]; docs/evaluation.md, item 34). 0: off (`mpbond-no-guard` in
    /// the lab). Needs `pacing`.
    pub queue_guard: f64,
    /// The queue guard of a proxy's HS-Paths, in slow start and in congestion avoidance
    /// alike, in place of `queue_guard` there (0: off, the HS-Paths take `queue_guard`).
    /// A helper splits TCP (MPBond §4.2) and hands its pipe only what the HS-Path delivered
    /// in order, so a drop at the HS-Path's full queue starves the pipe until the
    /// retransmission has crossed that queue; held at a small factor over the rate it
    /// delivers, the HS-Path's queue fills too slowly to overflow in a download. It holds
    /// while the helper's buffer would drain through its pipe sooner than the HS-Path's
    /// queue delay, the only case where such a drop idles the pipe, and past slow start
    /// only while the path's delivery rate is steady (`QueueGuard::for_hs_path`;
    /// docs/evaluation.md, item 38; `mpbond-no-hs-guard` in the lab turns it off). Needs
    /// `pacing`.
    pub hs_queue_guard: f64,
    /// The queue guard of every other link (a proxy's PS-Path) past slow start: while the
    /// link's delivery rate is steady and its queue stands (the same test as
    /// `queue_guard`), its pacing rate is capped at this factor times the rate it
    /// delivers, so CUBIC's window does not grow into a drop in the last round trips of a
    /// download, whose retransmission the primary, reading in order, would wait for
    /// (`QueueGuard::for_ps_path`; docs/evaluation.md, item 39; `mpbond-ps-guard` in the lab
    /// runs `1`). At `1` the queue is held where it stands. `0`: off, the default: over LTE
    /// traces it cost about 2% of the time at 4 MB. Needs `pacing`.
    pub ps_queue_guard: f64,
    /// When stream data resumes on a link after this long without any, a CUBIC link's
    /// congestion control starts afresh, so that HyStart judges the new transfer's delay
    /// against the path as it is now, not against the smallest RTT the link's small frames
    /// saw while it idled (`LinkWriter::set_cc_restart`). `"0ms"`: never (`mpbond-no-cc-restart` in the lab).
    pub cc_restart: Dur,
    /// On links to a helper (the proxy's HS-Paths, the primary's pipes), a burst of stream
    /// data after a pause of 100 ms starts in records of 2 KiB, doubling to the usual size,
    /// so the helper, which relays a record only once all of it has arrived, starts its
    /// pipe sooner (`LinkWriter::set_ramp`). `false`: every record at its usual size.
    pub ramp_records: bool,
    /// Congestion control of every link (TCP_CONGESTION, e.g. `"bbr"`); empty keeps the
    /// system's default. The paper's proxy ran CUBIC on each subflow (MPBond §6.1).
    pub congestion: String,
    /// Congestion control of a proxy's links to its helpers, the HS-Paths, in place of
    /// `congestion` there (empty: as `congestion`). A helper splits TCP (MPBond §4.2): it
    /// hands its pipe only what the HS-Path delivered in order, so a loss on the HS-Path
    /// starves the pipe until the retransmission has crossed the HS-Path's bottleneck queue,
    /// a queue that CUBIC keeps full. A tethering helper forwards the packets behind the
    /// hole and loses nothing (docs/evaluation.md, "Known shortfalls"). `"bbr"` keeps that
    /// queue short (`mpbond-hs-bbr` in the lab).
    pub hs_congestion: String,
    /// Runtime worker threads; 0 picks one per core for a process running the proxy (many
    /// independent sessions) and one otherwise (a device's few sessions run best without
    /// cross-core wakeups between their tasks; docs/performance.md).
    pub threads: usize,
    /// Energy-aware helper admission, set at the proxy: how many joules a second of a
    /// download's finish is worth to the user (watts; about what the phone draws while its
    /// user waits). Set, PAMS leaves a helper out of a transfer when its radios, as their
    /// devices declared them (`wan_radio`, `pipe_radio`), would cost more than the time it
    /// saves is worth at this rate, counting the primary's own radio time it saves
    /// (`mpbond_core::scheduler::admission`; `mpbond-eco` in the lab). Unset, the default:
    /// time only, as MPBond's PAMS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_value: Option<f64>,
}

impl Tuning {
    /// The congestion control to set on a link, empty for the system's: `hs_congestion` on
    /// a proxy's HS-Path when it is set, `congestion` everywhere else.
    pub fn congestion_for(&self, hs_path: bool) -> &str {
        if hs_path && !self.hs_congestion.is_empty() {
            &self.hs_congestion
        } else {
            &self.congestion
        }
    }

    /// How long a stalled WAN link stays stale before it is dead ([`crate::liveness`]):
    /// `None` when `dead_timeout` is zero (dead at the stall).
    pub fn dead_after(&self) -> Option<Duration> {
        Some(self.dead_timeout.0).filter(|d| !d.is_zero())
    }

    /// The PAD formula `pams_pad` names, or the error to show for it.
    pub fn pad_model(&self) -> Result<mpbond_core::scheduler::PadModel, String> {
        self.pams_pad
            .parse()
            .map_err(|e| format!("tuning.pams_pad: {e}"))
    }
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            lowat: Size(16 << 10),
            segment: Size(16 << 10),
            segment_time: Dur(Duration::from_millis(20)),
            stream_buffer: Size(4 << 20),
            recv_window: Size(4 << 20),
            window_max: Size(32 << 20),
            session_buffer: Size(64 << 20),
            stall_timeout: Dur(Duration::from_secs(1)),
            dead_timeout: Dur(Duration::from_secs(10)),
            feedback_interval: Dur(Duration::from_millis(20)),
            connect_timeout: Dur(Duration::from_secs(10)),
            insecure: false,
            pams_lookahead: mpbond_core::scheduler::LOOKAHEAD_RTTS,
            pams_reinjection: true,
            recall_shortfall: 0.0,
            window_rescue: true,
            late_rescue: true,
            loss_rescue: true,
            tail_copy: false,
            late_bind: Dur(Duration::ZERO),
            late_bind_horizon: Dur(Duration::from_secs_f64(
                mpbond_core::scheduler::LATE_BIND_HORIZON,
            )),
            pipe_min_rtt: true,
            pams_pad: "drain".into(),
            loss_hold: 0.0,
            drain_floor: mpbond_core::estimator::DRAIN_FLOOR_RTTS,
            pacing: true,
            queue_guard: crate::queue_guard::DEFAULT_FACTOR,
            hs_queue_guard: crate::queue_guard::DEFAULT_HS_FACTOR,
            ps_queue_guard: crate::queue_guard::DEFAULT_PS_FACTOR,
            cc_restart: Dur(Duration::from_secs(1)),
            ramp_records: true,
            congestion: String::new(),
            hs_congestion: String::new(),
            threads: 0,
            time_value: None,
        }
    }
}

/// `[proxy]`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProxyConfig {
    /// Where primaries and helpers connect.
    pub listen: SocketAddr,
    /// Downlink scheduler: pams, minrtt, roundrobin or swtc.
    #[serde(default = "default_scheduler")]
    pub scheduler: String,
    /// The primaries this proxy serves; nobody else can open a session.
    #[serde(default)]
    pub allow: Vec<Peer>,
    /// Most sessions at once.
    #[serde(default = "default_max_sessions")]
    pub max_sessions: usize,
    /// Most streams per session.
    #[serde(default = "default_max_streams")]
    pub max_streams: usize,
    /// How long a session with no subflow left waits for its primary to come back.
    #[serde(default = "default_linger")]
    pub session_linger: Dur,
    /// Origins in these networks are refused, so a primary cannot reach the proxy host's own
    /// loopback or link-local services. Set to `[]` to allow everything.
    #[serde(default = "default_deny")]
    pub deny_origins: Vec<String>,
}

/// A pipe to a helper: a TCP connection over one local interface.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PipeConfig {
    /// Its name (`wifi`, `bt`, ...), used by `pipe_policy`.
    pub name: String,
    /// The helper's pipe listener reachable over this interface.
    pub addr: SocketAddr,
    /// Local address to bind, selecting the interface.
    #[serde(default)]
    pub bind: Option<std::net::IpAddr>,
}

/// One helper of a primary.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HelperPeer {
    /// Its name.
    pub name: String,
    /// Its public key.
    pub key: PublicKey,
    /// Its pipes.
    pub pipe: Vec<PipeConfig>,
    /// Which pipe carries data: `fastest`, `all`, or a pipe's name.
    #[serde(default = "default_policy")]
    pub pipe_policy: String,
}

/// `[primary.transparent]`: intercept chosen outgoing TCP with nftables.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TransparentConfig {
    /// Local port the redirected connections arrive on.
    pub listen: SocketAddr,
    /// Destination ports to intercept (empty: all).
    #[serde(default)]
    pub ports: Vec<u16>,
    /// Only connections of these user ids (empty: any).
    #[serde(default)]
    pub uids: Vec<u32>,
    /// Only connections of processes in these cgroup v2 paths, relative to the root.
    #[serde(default)]
    pub cgroups: Vec<String>,
}

/// `[primary]`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PrimaryConfig {
    /// The proxy's address.
    pub proxy: String,
    /// The proxy's public key.
    pub proxy_key: PublicKey,
    /// Local address for the PS-Path (selects the WAN interface).
    #[serde(default)]
    pub ps_bind: Option<std::net::IpAddr>,
    /// SOCKS5 listener for applications.
    #[serde(default)]
    pub socks: Option<SocketAddr>,
    /// Transparent interception.
    #[serde(default)]
    pub transparent: Option<TransparentConfig>,
    /// Uplink scheduler.
    #[serde(default = "default_scheduler")]
    pub scheduler: String,
    /// The helpers.
    #[serde(default)]
    pub helper: Vec<HelperPeer>,
    /// Most streams at once.
    #[serde(default = "default_max_streams")]
    pub max_streams: usize,
    /// 0-RTT stream open: relay an application's first bytes right behind `STREAM_OPEN`
    /// instead of waiting for the proxy's `STREAM_OPENED`, and answer SOCKS clients at once.
    /// This saves one PS-Path round trip on every connection (a tenth of a 512 KB download
    /// at 50 ms, docs/evaluation.md 07). The price: an origin the proxy cannot reach shows up
    /// as a reset connection instead of a SOCKS error code (the reason is logged). Off, the
    /// primary waits for the origin as a plain SOCKS proxy does.
    #[serde(default = "default_true")]
    pub early_data: bool,
    /// The radio of the PS-Path (`lte`, `wifi`, `bluetooth`, `ethernet`), declared to the
    /// proxy for its energy-aware helper admission (`tuning.time_value`). Unset: unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wan_radio: Option<Radio>,
}

/// How helpers send pipe feedback (MPBond §5, §6.2).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum FeedbackPolicy {
    /// Over the HS-Path while it carries data, else over the pipe and the PS-Path, so an idle
    /// helper radio is not woken.
    Flexible,
    /// Always over the HS-Path ("fixed-always").
    Always,
    /// Over the HS-Path, only while it carries data ("fixed-on-demand").
    OnDemand,
}

/// What a helper reports as its buffered bytes B_p, from which PAMS derives the pipe
/// buffering time B_p/Th_p (MPBond §4.3.2, §6.2).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum BufferingEstimate {
    /// The bytes in its buffer and pipe socket now: PAMS divides by the pipe's throughput.
    Queue,
    /// The buffering delay the last relayed frame actually saw, times the pipe throughput, so
    /// that PAMS sees the measured delay. It is stale by construction (a frame's delay is
    /// known only when it leaves); the paper measured it as the worse choice (3.6 s vs 4.4 s)
    /// and mpbond keeps it only to reproduce that.
    Measured,
}

/// `[helper]`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HelperConfig {
    /// Where primaries' pipes connect.
    pub listen: SocketAddr,
    /// Local address for HS-Paths (selects the WAN interface).
    #[serde(default)]
    pub hs_bind: Option<std::net::IpAddr>,
    /// The primaries this helper serves.
    #[serde(default)]
    pub allow: Vec<Peer>,
    /// Bytes buffered per direction per primary (the split-TCP buffer, MPBond §4.2).
    #[serde(default = "default_helper_buffer")]
    pub buffer: Size,
    /// Feedback policy.
    #[serde(default = "default_feedback")]
    pub feedback: FeedbackPolicy,
    /// How B_p is reported (`queue`, the default, or `measured`).
    #[serde(default = "default_buffering")]
    pub buffering_estimate: BufferingEstimate,
    /// Which pipe carries downlink data: `fastest`, `all`, or a pipe's name.
    #[serde(default = "default_policy")]
    pub pipe_policy: String,
    /// Most primaries served at once.
    #[serde(default = "default_max_primaries")]
    pub max_primaries: usize,
    /// The radio of the HS-Path, declared to the proxy with `pipe_radio` for its
    /// energy-aware helper admission (`tuning.time_value`). Unset: unknown, and the
    /// admission counts this helper as free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wan_radio: Option<Radio>,
    /// The radio of the pipe to the primary (`wifi`, `bluetooth`, `ethernet`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipe_radio: Option<Radio>,
}

/// `[control]`: the local status and metrics endpoint.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ControlConfig {
    /// Loopback address for `GET /status` and `GET /metrics`.
    pub listen: SocketAddr,
}

/// A whole device configuration file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The device's private key file, relative to the configuration file.
    pub key: PathBuf,
    /// Log filter (`info`, `debug`, `mpbond_daemon=trace`, ...).
    #[serde(default = "default_log")]
    pub log: String,
    /// Shared tuning.
    #[serde(default)]
    pub tuning: Tuning,
    /// Status and metrics.
    #[serde(default)]
    pub control: Option<ControlConfig>,
    /// Proxy role.
    #[serde(default)]
    pub proxy: Option<ProxyConfig>,
    /// Primary role.
    #[serde(default)]
    pub primary: Option<PrimaryConfig>,
    /// Helper role.
    #[serde(default)]
    pub helper: Option<HelperConfig>,
}

fn default_scheduler() -> String {
    "pams".into()
}
fn default_max_sessions() -> usize {
    256
}
fn default_true() -> bool {
    true
}
fn default_max_streams() -> usize {
    1024
}
fn default_linger() -> Dur {
    Dur(Duration::from_secs(30))
}
fn default_deny() -> Vec<String> {
    ["127.0.0.0/8", "::1/128", "169.254.0.0/16", "fe80::/10"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}
fn default_policy() -> String {
    "fastest".into()
}
fn default_helper_buffer() -> Size {
    Size(4 << 20)
}
fn default_feedback() -> FeedbackPolicy {
    FeedbackPolicy::Flexible
}
fn default_buffering() -> BufferingEstimate {
    BufferingEstimate::Queue
}
fn default_max_primaries() -> usize {
    16
}
fn default_log() -> String {
    "info".into()
}

impl Config {
    /// Parses TOML text; `path` is used in messages and to resolve the key file.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let p = path.display().to_string();
        let mut c: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: p.clone(),
            message: e.to_string(),
        })?;
        if c.key.is_relative() {
            if let Some(dir) = path.parent() {
                c.key = dir.join(&c.key);
            }
        }
        c.validate()
            .map_err(|message| ConfigError::Invalid { path: p, message })?;
        Ok(c)
    }

    /// Reads a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Config::parse(&text, path)
    }

    /// Checks values that TOML types cannot.
    pub fn validate(&self) -> Result<(), String> {
        let t = &self.tuning;
        if t.segment.0 == 0 || t.segment.0 > mpbond_proto::MAX_PAYLOAD as u64 {
            return Err(format!(
                "tuning.segment must be 1 to {} bytes",
                mpbond_proto::MAX_PAYLOAD
            ));
        }
        if t.stream_buffer.0 < t.segment.0 || t.recv_window.0 < t.segment.0 {
            return Err("tuning.stream_buffer and recv_window must hold a segment".into());
        }
        for (key, name, empty) in [
            ("congestion", &t.congestion, "the system default"),
            ("hs_congestion", &t.hs_congestion, "tuning.congestion's"),
        ] {
            if !(name.is_empty() || crate::sys::is_congestion_name(name)) {
                return Err(format!(
                    "tuning.{key} {name:?}: a kernel congestion control name such as \"cubic\" or \"bbr\" (at most 15 letters, digits or _), or empty for {empty}"
                ));
            }
        }
        for (name, rtts, zero) in [
            ("pams_lookahead", t.pams_lookahead, "the paper's rule"),
            ("loss_hold", t.loss_hold, "the plain average"),
            (
                "drain_floor",
                t.drain_floor,
                "the kernel's samples as they are",
            ),
        ] {
            if !(rtts.is_finite() && rtts >= 0.0) {
                return Err(format!(
                    "tuning.{name} must be a number of RTTs >= 0 (0: {zero}), not {rtts}"
                ));
            }
        }
        if !(t.recall_shortfall.is_finite() && t.recall_shortfall >= 0.0) {
            return Err(format!(
                "tuning.recall_shortfall must be a number of shortfalls >= 0 (0: the estimate as it is), not {}",
                t.recall_shortfall
            ));
        }
        for (key, factor, e) in [
            ("queue_guard", t.queue_guard, "1.25"),
            ("hs_queue_guard", t.hs_queue_guard, "1.1"),
            ("ps_queue_guard", t.ps_queue_guard, "1"),
        ] {
            if !(factor.is_finite() && (factor == 0.0 || factor >= 1.0)) {
                return Err(format!(
                    "tuning.{key} must be 0 (off) or a factor >= 1 over the rate a link delivers (e.g. {e}), not {factor}"
                ));
            }
        }
        if let Some(w) = t.time_value {
            if !(w.is_finite() && w >= 0.0) {
                return Err(format!(
                    "tuning.time_value must be joules per second of a download >= 0 (about what the phone draws while its user waits, e.g. 1.0), not {w}"
                ));
            }
        }
        t.pad_model()?;
        for sched in [
            self.proxy.as_ref().map(|p| &p.scheduler),
            self.primary.as_ref().map(|p| &p.scheduler),
        ]
        .into_iter()
        .flatten()
        {
            mpbond_core::by_name(sched, Default::default()).map_err(|e| e.to_string())?;
        }
        if let Some(p) = &self.proxy {
            for c in &p.deny_origins {
                crate::net::Cidr::parse(c)?;
            }
        }
        if let Some(p) = &self.primary {
            if p.socks.is_none() && p.transparent.is_none() {
                return Err("[primary] needs `socks` or `[primary.transparent]`".into());
            }
            for h in &p.helper {
                if h.pipe.is_empty() {
                    return Err(format!(
                        "helper {:?} has no [[primary.helper.pipe]]",
                        h.name
                    ));
                }
                let named = h.pipe_policy != "fastest" && h.pipe_policy != "all";
                if named && !h.pipe.iter().any(|x| x.name == h.pipe_policy) {
                    return Err(format!(
                        "helper {:?}: pipe_policy {:?} is not fastest, all, or one of its pipes",
                        h.name, h.pipe_policy
                    ));
                }
            }
        }
        if let Some(c) = &self.control {
            if !c.listen.ip().is_loopback() {
                return Err("control.listen must be a loopback address".into());
            }
        }
        if self.proxy.is_none() && self.primary.is_none() && self.helper.is_none() {
            return Err("no role: add [proxy], [primary] or [helper]".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::KeyPair;

    fn key() -> String {
        KeyPair::generate().public.to_string()
    }

    /// The files in `examples/` are what users copy: each must parse once its placeholder keys
    /// are filled in, and together they must cover every role.
    #[test]
    fn example_configs_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let mut roles = (0, 0, 0);
        for entry in std::fs::read_dir(&dir).expect("examples/ exists") {
            let path = entry.expect("readable").path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            let mut filled = String::new();
            let mut rest = text.as_str();
            while let Some(i) = rest.find("\"REPLACE-") {
                let end = rest[i + 1..].find('"').expect("closed placeholder") + i + 2;
                filled.push_str(&rest[..i]);
                filled.push_str(&format!("\"{}\"", key()));
                rest = &rest[end..];
            }
            filled.push_str(rest);
            let c =
                Config::parse(&filled, &path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            roles.0 += c.proxy.is_some() as usize;
            roles.1 += c.primary.is_some() as usize;
            roles.2 += c.helper.is_some() as usize;
        }
        assert!(roles.0 >= 1 && roles.1 >= 2 && roles.2 >= 2, "{roles:?}");
    }

    #[test]
    fn dual_mode_config_parses_with_units() {
        let text = format!(
            r#"
key = "me.key"
[tuning]
lowat = "8KiB"
stall_timeout = "500ms"
dead_timeout = "0s"
late_bind = "100ms"
[primary]
proxy = "203.0.113.7:7000"
proxy_key = "{}"
socks = "127.0.0.1:1080"
[[primary.helper]]
name = "watch"
key = "{}"
pipe_policy = "bt"
[[primary.helper.pipe]]
name = "wifi"
addr = "192.168.49.2:7100"
[[primary.helper.pipe]]
name = "bt"
addr = "10.9.0.2:7100"
bind = "10.9.0.1"
[helper]
listen = "0.0.0.0:7100"
buffer = "8MiB"
feedback = "on-demand"
allow = [{{ name = "friend", key = "{}" }}]
"#,
            key(),
            key(),
            key()
        );
        let c = Config::parse(&text, Path::new("/etc/mpbond/phone.toml")).unwrap();
        assert_eq!(c.key, PathBuf::from("/etc/mpbond/me.key"));
        assert_eq!(c.tuning.lowat, Size(8192));
        assert_eq!(c.tuning.stall_timeout, Dur(Duration::from_millis(500)));
        assert_eq!(c.tuning.dead_after(), None);
        assert_eq!(c.tuning.late_bind, Dur(Duration::from_millis(100)));
        assert_eq!(Tuning::default().late_bind, Dur(Duration::ZERO));
        assert_eq!(
            Tuning::default().dead_after(),
            Some(Duration::from_secs(10))
        );
        let p = c.primary.unwrap();
        assert_eq!(p.helper[0].pipe[1].bind, Some("10.9.0.1".parse().unwrap()));
        let h = c.helper.unwrap();
        assert_eq!(
            (h.buffer, h.feedback),
            (Size(8 << 20), FeedbackPolicy::OnDemand)
        );
    }

    #[test]
    fn mistakes_are_reported_with_their_place() {
        let p = Path::new("x.toml");
        let e = Config::parse(
            "key = \"k\"\n[proxy]\nlisten = \"0.0.0.0:1\"\nlisen = 3\n",
            p,
        )
        .unwrap_err();
        assert!(e.to_string().contains("lisen"), "{e}");
        let e = Config::parse("key = \"k\"\n", p).unwrap_err();
        assert!(e.to_string().contains("no role"), "{e}");
        let e = Config::parse(
            "key = \"k\"\n[proxy]\nlisten = \"0.0.0.0:1\"\nscheduler = \"fastest\"\n",
            p,
        )
        .unwrap_err();
        assert!(e.to_string().contains("choose one of"), "{e}");
        let e = Config::parse(
            "key = \"k\"\n[tuning]\nlowat = \"lots\"\n[proxy]\nlisten = \"0.0.0.0:1\"\n",
            p,
        )
        .unwrap_err();
        assert!(e.to_string().contains("bad size"), "{e}");
        let e = Config::parse(
            "key = \"k\"\n[tuning]\npams_lookahead = -1.0\n[proxy]\nlisten = \"0.0.0.0:1\"\n",
            p,
        )
        .unwrap_err();
        assert!(e.to_string().contains("pams_lookahead"), "{e}");
        for (bad, names) in [
            ("pams_pad = \"fifo\"", ["pams_pad", "drain"]),
            ("loss_hold = -3.0", ["loss_hold", "RTTs"]),
            ("drain_floor = nan", ["drain_floor", "RTTs"]),
            (
                "recall_shortfall = -1.0",
                ["recall_shortfall", "shortfalls >= 0"],
            ),
            ("time_value = -1.0", ["time_value", "joules per second"]),
            ("time_value = inf", ["time_value", "joules per second"]),
            ("queue_guard = 0.5", ["queue_guard", "factor >= 1"]),
            ("queue_guard = nan", ["queue_guard", "0 (off)"]),
            ("hs_queue_guard = 0.9", ["hs_queue_guard", "factor >= 1"]),
            ("ps_queue_guard = -1.0", ["ps_queue_guard", "factor >= 1"]),
        ] {
            let e = Config::parse(
                &format!("key = \"k\"\n[tuning]\n{bad}\n[proxy]\nlisten = \"0.0.0.0:1\"\n"),
                p,
            )
            .unwrap_err()
            .to_string();
            assert!(names.iter().all(|n| e.contains(n)), "{bad}: {e}");
        }
        // Radios: the four names, and a clear refusal of others.
        Config::parse(
            "key = \"k\"\n[tuning]\ntime_value = 1.0\n[helper]\nlisten = \"0.0.0.0:1\"\nwan_radio = \"lte\"\npipe_radio = \"bluetooth\"\n",
            p,
        )
        .expect("radios and a value of time are valid");
        let e = Config::parse(
            "key = \"k\"\n[helper]\nlisten = \"0.0.0.0:1\"\nwan_radio = \"5g\"\n",
            p,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("wan_radio") && e.to_string().contains("lte"),
            "{e}"
        );
        let e = Config::parse(
            "key = \"k\"\n[tuning]\ncongestion = \"bbr; x\"\n[proxy]\nlisten = \"0.0.0.0:1\"\n",
            p,
        )
        .unwrap_err();
        assert!(e.to_string().contains("tuning.congestion"), "{e}");
        Config::parse(
            "key = \"k\"\n[tuning]\ncongestion = \"bbr\"\npacing = false\n[proxy]\nlisten = \"0.0.0.0:1\"\n",
            p,
        )
        .expect("a congestion control name and pacing off are valid");
        let e = Config::parse(
            "key = \"k\"\n[tuning]\nhs_congestion = \"bbr x\"\n[proxy]\nlisten = \"0.0.0.0:1\"\n",
            p,
        )
        .unwrap_err();
        assert!(e.to_string().contains("tuning.hs_congestion"), "{e}");
        Config::parse(
            "key = \"k\"\n[tuning]\nhs_congestion = \"bbr\"\n[proxy]\nlisten = \"0.0.0.0:1\"\n",
            p,
        )
        .expect("a congestion control for the HS-Paths alone is valid");
        let e = Config::parse(
            "key = \"k\"\n[control]\nlisten = \"0.0.0.0:9\"\n[proxy]\nlisten = \"0.0.0.0:1\"\n",
            p,
        )
        .unwrap_err();
        assert!(e.to_string().contains("loopback"), "{e}");
    }
}
