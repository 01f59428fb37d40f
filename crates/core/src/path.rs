//! What a scheduler sees of each subflow: plain numbers, filled in by whoever owns the sockets
//! (the daemons from TCP_INFO and pipe feedback, the simulator from its model).

use mpbond_proto::SubflowId;

use crate::energy::PathPower;

/// Whether a subflow reaches the receiver directly or through a helper and its pipe.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PathKind {
    /// The PS-Path: sender straight to the primary.
    Direct,
    /// An HS-Path plus a pipe: sender to a helper, which buffers and relays over the pipe
    /// (MPBond §4.2).
    Helper,
}

/// The pipe part of a helper subflow, as last reported by `PIPE_FEEDBACK` (MPBond §4.3.2).
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct PipeView {
    /// Th_p, bytes per second.
    pub throughput: f64,
    /// Pipe RTT, seconds (OWD_p is half of it): the pipe's smoothed RTT while the helper
    /// relays, which holds the queue of what it buffered, its minimum while idle.
    pub rtt: f64,
    /// The pipe's minimum RTT, seconds (`PIPE_MIN_RTT`); 0 when the helper has not sent one
    /// (a version-1 helper that predates it). See [`PipeView::propagation_rtt`].
    pub min_rtt: f64,
    /// B_p: bytes buffered at the helper for this subflow, user space plus the pipe socket.
    pub buffered: u64,
    /// Bytes the sender-side path (the HS-Path) delivered to the helper that the report
    /// that gave B_p did not count: its TCP's bytes acknowledged since that report arrived
    /// ([`crate::PipeState::unreported`]), plus those the helper holds out of order
    /// (SACKed; [`crate::PipeState::view_at`]). `None` when not known. With the sender-side
    /// queue and B_p it bounds what can still be ahead of a new byte ([`crate::scheduler::pams::pad_drain`]).
    pub unreported: Option<u64>,
}

impl PipeView {
    /// B_p/Th_p: how long the helper's buffer takes to drain through its pipe, seconds, if
    /// the pipe's rate is known (MPBond §4.3.2; the HS-Paths' queue guard weighs it,
    /// [`crate::queue_guard::QueueGuard::set_pipe_drain`]).
    pub fn drain_time(&self) -> Option<f64> {
        (self.throughput > 0.0).then(|| self.buffered as f64 / self.throughput)
    }

    /// Round trip of a byte that meets no queue in the pipe: its minimum RTT (at most the
    /// reported one), or the reported RTT where no minimum is known. The reported RTT of a
    /// busy pipe holds the queue of the helper's buffer, which PAD counts on its own as
    /// `B_p / Th_p` ([`crate::scheduler::pams::pad_drain`]), as
    /// [`PathView::propagation_rtt`] does for the sender-side path.
    pub fn propagation_rtt(&self) -> f64 {
        if self.min_rtt > 0.0 {
            self.min_rtt.min(self.rtt)
        } else {
            self.rtt
        }
    }
}

/// One subflow's state at the moment of a scheduling decision.
#[derive(Clone, PartialEq, Debug)]
pub struct PathView {
    /// The subflow.
    pub id: SubflowId,
    /// Direct or through a helper.
    pub kind: PathKind,
    /// True when the sender-side path (PS-Path or HS-Path) can take data now: it has room in
    /// its congestion window and nothing is waiting in front of new data. Algorithm 1 calls
    /// such a subflow idle.
    pub idle: bool,
    /// Smoothed RTT of the sender-side path, seconds.
    pub rtt: f64,
    /// Smallest RTT seen on the sender-side path, seconds (propagation estimate).
    pub min_rtt: f64,
    /// Estimated throughput of the sender-side path, bytes per second (Th_ps or Th_hs).
    pub throughput: f64,
    /// How far the sender-side path lately delivered below `throughput`, in natural-log
    /// units ([`crate::PathEstimator::rate_shortfall`]); 0 when unknown or steady. PAMS's
    /// recall test can read a source this much slower ([`PathView::cautious`],
    /// [`crate::scheduler::PamsConfig::shortfall_sigmas`]).
    pub rate_shortfall: f64,
    /// Congestion window of the sender-side path, bytes.
    pub cwnd: u64,
    /// Bytes sent on the sender-side path and not yet acknowledged by TCP.
    pub inflight: u64,
    /// B_s: bytes queued for this subflow at the sender, in user space plus unsent and
    /// unacknowledged in the kernel.
    pub queued: u64,
    /// Bytes acknowledged by TCP on the sender-side path since it opened (tcpi_bytes_acked).
    pub bytes_acked: u64,
    /// Fraction of packets lost on the sender-side path, 0..1.
    pub loss_rate: f64,
    /// The sender-side path's TCP is recovering from a loss (`tcpi_ca_state` Recovery or
    /// Loss): the byte at its cumulative ACK is missing at the receiver, and everything the
    /// path carries from there on waits for its retransmission ([`crate::Sender`]'s loss
    /// rescue).
    pub recovering: bool,
    /// Bytes the receiver holds above the cumulative ACK (`tcpi_sacked` in bytes), which
    /// `queued` leaves out: with it, the sender places the cumulative ACK in its own count
    /// of bytes written to the path.
    pub sacked: u64,
    /// Pipe state; `Some` exactly for helper subflows that have reported.
    pub pipe: Option<PipeView>,
    /// Seconds since the sender-side path last sent or received anything (data, feedback,
    /// pings): for an HS-Path, how long the helper's cellular radio has been out of use, which
    /// is what waking it costs while it is still in its tail. Infinity when unknown.
    pub wan_idle: f64,
    /// Bytes scheduled on this subflow that the receiver has not acknowledged at the data
    /// level. The [`crate::Sender`] fills this in; callers may leave it 0.
    pub outstanding: u64,
    /// The radios that carry this subflow, as its devices declared them; `None` when
    /// unknown. Only PAMS's energy-aware admission reads it
    /// ([`crate::scheduler::admission`]), and a subflow of unknown power costs it nothing.
    pub power: Option<PathPower>,
}

/// A cellular radio that moved something this recently (seconds) is awake: one more packet
/// through it costs nothing more. One bin of the lab's energy model.
pub const RADIO_AWAKE: f64 = 0.1;

impl PathView {
    /// A helper subflow whose HS-Path has nothing queued: everything scheduled on it has
    /// crossed the helper's cellular link, and touching it again (new data, a recall's
    /// cancel) wakes that radio (`Pams::wake_cost`).
    pub fn hs_path_drained(&self) -> bool {
        self.kind == PathKind::Helper && self.queued == 0
    }

    /// Whether the sender-side path's radio moved something within [`RADIO_AWAKE`], or its
    /// idleness is unknown ([`PathView::wan_idle`] infinite).
    pub fn radio_awake(&self) -> bool {
        !self.wan_idle.is_finite() || self.wan_idle < RADIO_AWAKE
    }

    /// A view with the given identity and every number zero; handy for tests and builders.
    pub fn new(id: SubflowId, kind: PathKind) -> Self {
        PathView {
            id,
            kind,
            idle: true,
            rtt: 0.0,
            min_rtt: 0.0,
            throughput: 0.0,
            rate_shortfall: 0.0,
            cwnd: 0,
            inflight: 0,
            queued: 0,
            bytes_acked: 0,
            loss_rate: 0.0,
            recovering: false,
            sacked: 0,
            pipe: None,
            wan_idle: f64::INFINITY,
            outstanding: 0,
            power: None,
        }
    }

    /// One-way delay of the sender-side path, approximated as RTT/2 (MPBond §4.3.2).
    pub fn owd(&self) -> f64 {
        self.rtt / 2.0
    }

    /// One-way propagation delay of the sender-side path, `min_rtt / 2`: the delay of a byte
    /// that meets no queue. Falls back to [`owd`](Self::owd) while no minimum is known.
    pub fn propagation_owd(&self) -> f64 {
        if self.min_rtt > 0.0 {
            self.min_rtt / 2.0
        } else {
            self.owd()
        }
    }

    /// Round trip of a byte that meets no queue on the sender-side path: the minimum RTT (at
    /// most the smoothed one), or the smoothed RTT while no minimum is known. A drained
    /// path's smoothed RTT still holds the queueing of its last data.
    pub fn propagation_rtt(&self) -> f64 {
        if self.min_rtt > 0.0 {
            self.min_rtt.min(self.rtt)
        } else {
            self.rtt
        }
    }

    /// The same view with the sender-side path's throughput lowered by `sigmas` times its
    /// [`rate_shortfall`](Self::rate_shortfall): what the path may well deliver over its next
    /// few hundred milliseconds rather than what it delivered on average over its last round
    /// trip. The pipe's rate is left as it is: a local link does not swing as a cellular one
    /// does, and the helper measures it over its own short round trips.
    pub fn cautious(&self, sigmas: f64) -> PathView {
        let cut = (sigmas.max(0.0) * self.rate_shortfall).min(crate::estimator::MAX_SHORTFALL);
        PathView {
            throughput: self.throughput * (-cut).exp(),
            ..self.clone()
        }
    }

    /// Bytes queued at the sender that TCP has not sent yet.
    pub fn unsent(&self) -> u64 {
        self.queued.saturating_sub(self.inflight)
    }

    /// The subflow's end-to-end throughput: Th_ps for the direct path, min(Th_hs, Th_p) for a
    /// helper subflow (Algorithm 1, line 10).
    pub fn effective_throughput(&self) -> f64 {
        match (&self.kind, &self.pipe) {
            (PathKind::Helper, Some(p)) => self.throughput.min(p.throughput),
            _ => self.throughput,
        }
    }
}

/// Per subflow: id (`*` when idle), queued, outstanding, throughput, RTT and minimum RTT,
/// for a helper the pipe's reported buffer, throughput, RTT and minimum RTT (the terms of
/// `pad_drain`),
/// and where known how long its cellular link has
/// been quiet. One line for a trace of a scheduling decision (`RUST_LOG=mpbond::sched=trace`),
/// the same in the daemons and in the simulator, so their logs read alike.
pub fn format_views(views: &[PathView]) -> String {
    let paths: Vec<String> = views
        .iter()
        .map(|v| {
            let pipe = v.pipe.as_ref().map_or(String::new(), |p| {
                let u = p.unreported.map_or(String::new(), |u| format!(" u={u}"));
                format!(
                    " bp={} thp={:.0} rttp={:.4} minrttp={:.4}{u}",
                    p.buffered, p.throughput, p.rtt, p.min_rtt
                )
            });
            let wan = if v.wan_idle.is_finite() {
                format!(" wan_idle={:.3}", v.wan_idle)
            } else {
                String::new()
            };
            let short = if v.rate_shortfall > 0.0 {
                format!(" short={:.2}", v.rate_shortfall)
            } else {
                String::new()
            };
            format!(
                "{}{} q={} out={} th={:.0}{short} rtt={:.4} minrtt={:.4}{pipe}{wan}",
                v.id,
                if v.idle { "*" } else { "" },
                v.queued,
                v.outstanding,
                v.throughput,
                v.rtt,
                v.min_rtt
            )
        })
        .collect();
    paths.join(" | ")
}
