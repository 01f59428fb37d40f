//! `mpbond sim`: run the simulator from the command line.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use mpbond_core::scheduler::{PadModel, RecallAmount, NAMES};
use mpbond_sim::rate::Trace;
use mpbond_sim::report::human_bytes;
use mpbond_sim::spec::{
    parse_duration, parse_list, parse_rate_bps, parse_size, Change, FeedbackRoute, HelperSpec,
    LinkRef, PathSpec, RateSource,
};
use mpbond_sim::{Scenario, SimResult};

/// Options of `mpbond sim`.
#[derive(Args, Debug)]
#[command(after_help = "\
Rates are in Mbps unless a unit is given (500kbps, 1Gbps); 'down' is 0. Sizes: 512KB, 10MB
(powers of 10) or 4MiB (powers of 2). Lists are comma-separated, one value per helper; a list
shorter than the number of helpers repeats its last value.

Several values for --devices, --size or --scheduler run every combination and print a
comparison table with each run's ratio to the fluid lower bound.

RUST_LOG=mpbond::sched=trace logs every scheduling decision to stderr (the simulated time,
the subflow, the range and the path views it was made from), as the daemons log theirs.

Examples:
  mpbond sim --ps 8 --hs 10 --pipe 5 --size 10MB --scheduler pams
  mpbond sim --ps 8 --hs 10,6 --pipe 5,3 --size 10MB --json
  mpbond sim --ps 5 --hs 10 --pipe 5 --size 4MB --at 2s:pipe1=1 --scheduler pams --no-reinject
  mpbond sim --devices 1,2,3 --size 512KB,1MB,2MB --scheduler all")]
pub struct SimArgs {
    /// PS-Path (primary's own WAN) downlink rate, Mbps.
    #[arg(long, default_value = "8", value_name = "RATE")]
    ps: String,
    /// HS-Path downlink rate of each helper, Mbps. "none" for no helper.
    #[arg(long, default_value = "10", value_name = "LIST")]
    hs: String,
    /// Pipe rate (helper to primary) of each helper, Mbps.
    #[arg(long, default_value = "5", value_name = "LIST")]
    pipe: String,
    /// Number of devices (primary + helpers) to run; overrides the length of --hs/--pipe.
    #[arg(long, value_name = "LIST")]
    devices: Option<String>,
    /// Round-trip propagation delay of the PS-Path.
    #[arg(long, default_value = "50ms", value_name = "DUR")]
    rtt_ps: String,
    /// Round-trip propagation delay of each HS-Path.
    #[arg(long, default_value = "50ms", value_name = "LIST")]
    rtt_hs: String,
    /// Round-trip propagation delay of each pipe.
    #[arg(long, default_value = "4ms", value_name = "LIST")]
    rtt_pipe: String,
    /// Drop-tail queue of every link, bytes (default: one bandwidth-delay product).
    #[arg(long, value_name = "SIZE")]
    queue: Option<String>,
    /// Random packet loss on a link, e.g. --loss hs1=0.01 (repeatable).
    #[arg(long, value_name = "LINK=P")]
    loss: Vec<String>,
    /// Download size(s).
    #[arg(long, default_value = "10MB", value_name = "LIST")]
    size: String,
    /// Scheduler(s): pams, minrtt, roundrobin, swtc, or all.
    #[arg(long, default_value = "pams", value_name = "LIST")]
    scheduler: String,
    /// PAMS reinjection threshold η.
    #[arg(long, default_value_t = 0.2)]
    eta: f64,
    /// How many of a source path's recent rate shortfalls PAMS's recall test reads it below
    /// its estimate (as `tuning.recall_shortfall`; 0, the default: the estimate as it is).
    #[arg(long, default_value_t = 0.0, value_name = "SIGMAS")]
    recall_shortfall: f64,
    /// Disable PAMS reinjection and the late-head, loss and window rescues, which also send
    /// data again on purpose: MPBond §6.2's "without reinjection". Dead paths are still
    /// rescued.
    #[arg(long)]
    no_reinject: bool,
    /// Disable the loss rescue alone (as `tuning.loss_rescue = false`): a head of line held
    /// behind a hole its subflow's TCP is recovering from waits for the retransmission
    /// unless it turns late.
    #[arg(long)]
    no_loss_rescue: bool,
    /// Let a subflow that drained carry copies of the tail of the last one to finish (as
    /// `tuning.tail_copy`; off by default).
    #[arg(long)]
    tail_copy: bool,
    /// Late binding at the end of a transfer (as `tuning.late_bind`; off by default): within
    /// --late-bind-horizon of the end, a subflow takes new bytes only while the queue a byte
    /// would join there is at most this long, e.g. 50ms.
    #[arg(long, value_name = "DUR")]
    late_bind: Option<String>,
    /// How close to the end late binding starts: the unscheduled bytes at the subflows'
    /// combined rate (as `tuning.late_bind_horizon`).
    #[arg(long, default_value = "500ms", value_name = "DUR")]
    late_bind_horizon: String,
    /// Helpers send no pipe minimum RTT (as `tuning.pipe_min_rtt = false`): PAD reads a
    /// pipe's smoothed RTT as its delay, as before `PIPE_MIN_RTT`.
    #[arg(long)]
    no_pipe_min_rtt: bool,
    /// PAMS deferral lookahead in RTTs of the slowest subflow, or `off` for the paper's
    /// unbounded Algorithm 1.
    #[arg(long, default_value = "2", value_name = "RTTS|off")]
    lookahead: String,
    /// Let recalled bytes still travel from helpers instead of sending DATA_CANCEL (the
    /// paper's behaviour).
    #[arg(long)]
    no_cancel: bool,
    /// Use reported helper buffers as they are, without clamping them to the outstanding
    /// bytes.
    #[arg(long)]
    no_clamp: bool,
    /// PAMS recall amount: balanced (both subflows end together) or paper
    /// ((maxPAD - minPAD) x B, MPBond 4.3.4).
    #[arg(long, default_value = "balanced")]
    recall: String,
    /// PAMS delay model: drain (bytes in flight drain at the bottleneck) or paper
    /// (OWD + B/Th, MPBond 4.3.2).
    #[arg(long, default_value = "drain")]
    pad: PadModel,
    /// Start pipe throughput estimates cold (initial window / RTT) instead of at the pipe's
    /// measured rate.
    #[arg(long)]
    cold_pipes: bool,
    /// Turn off TCP's tail loss probe (RFC 8985; on in Linux and by default here): a lost
    /// tail then waits for the retransmission timeout, as in docs/sim.md's figures before
    /// the probe was modelled.
    #[arg(long)]
    no_tail_loss_probe: bool,
    /// A rate change: TIME:LINK=RATE, e.g. 2s:pipe1=1 or 5s:hs1=down (repeatable).
    #[arg(long = "at", value_name = "CHANGE")]
    changes: Vec<String>,
    /// Make a link follow a mahimahi trace: LINK=FILE, e.g. ps=traces/Verizon-LTE-short.down
    /// (repeatable). FILE may also be one of the lab's WLAN profiles, e.g. pipe1=wlan:walk
    /// (the walk of 10a and 10b) or pipe1=wlan:12m-nlos.
    #[arg(long, value_name = "LINK=FILE")]
    trace: Vec<String>,
    /// Make a WAN path's direction toward the proxy (its ACKs and control frames) follow a
    /// mahimahi trace: LINK=FILE with LINK ps or hs<k>, e.g.
    /// ps=traces/Verizon-LTE-short.up (repeatable). Without it the uplink only delays.
    #[arg(long = "trace-up", value_name = "LINK=FILE")]
    trace_up: Vec<String>,
    /// Start every --trace and --trace-up this far into it, wrapping at its end (as the lab's `trace_step`
    /// does per repetition), to sample other stretches of the same traces.
    #[arg(long, default_value = "0s", value_name = "DUR")]
    trace_from: String,
    /// Largest STREAM_DATA payload.
    #[arg(long, default_value = "16KiB", value_name = "SIZE")]
    segment: String,
    /// Not-sent low-water mark of every socket (TCP_NOTSENT_LOWAT).
    #[arg(long, default_value = "4KiB", value_name = "SIZE")]
    lowat: String,
    /// Helper buffer per subflow.
    #[arg(long, default_value = "8MiB", value_name = "SIZE")]
    helper_buffer: String,
    /// Pipe feedback interval.
    #[arg(long, default_value = "20ms", value_name = "DUR")]
    feedback_interval: String,
    /// Feedback route: hs (always over the HS-Path) or flexible (HS-Path while it carries data,
    /// else pipe + PS-Path).
    #[arg(long, default_value = "hs")]
    feedback: String,
    /// A path with data outstanding and no progress for this long has stalled: a WAN path
    /// goes stale (its data goes elsewhere, its connections stay), a pipe is dead.
    #[arg(long, default_value = "1s", value_name = "DUR")]
    stall_timeout: String,
    /// How long a stalled WAN path stays stale before it is dead, as the daemons'
    /// `tuning.dead_timeout`; 0s: dead at the stall, as before stale paths.
    #[arg(long, default_value = "10s", value_name = "DUR")]
    dead_timeout: String,
    /// Leave a dead subflow dead, as the simulator did before it modelled the daemons'
    /// rejoin (the PS-Path reconnecting at once, a helper joining again a second later).
    #[arg(long)]
    no_rejoin: bool,
    /// Time constant of the throughput estimators (EWMA of CWND/RTT).
    #[arg(long, default_value = "100ms", value_name = "DUR")]
    tau: String,
    /// How long the throughput estimators hold their level after a loss, in smoothed RTTs
    /// (0: the plain average; 3 is what the lab's mpbond-loss-hold uses).
    #[arg(long, default_value_t = 0.0, value_name = "RTTS", value_parser = parse_rtts)]
    loss_hold: f64,
    /// For how many smoothed RTTs after a loss a rate sample counts at least the rate the
    /// connection's ACKs show its standing queue draining at (3, as the daemons'
    /// `tuning.drain_floor`; 0: the samples as they are).
    #[arg(
        long,
        default_value_t = mpbond_core::estimator::DRAIN_FLOOR_RTTS,
        value_name = "RTTS",
        value_parser = parse_rtts
    )]
    drain_floor: f64,
    /// What feeds the throughput estimators: delivery (the connection's delivery rate, as the
    /// daemons read from TCP_INFO) or cwnd (CWND/RTT, as in the paper).
    #[arg(long, default_value = "delivery")]
    rate_source: String,
    /// The pipes' radio (wifi, bluetooth or ethernet), priced at both ends by the energy
    /// model; the WAN links are LTE.
    #[arg(long, default_value = "wifi", value_name = "RADIO")]
    pipe_radio: String,
    /// Hide the phones' radio state (each subflow's radios, how long its WAN link has been
    /// quiet) from the proxy's views, as the simulator did before it modelled radios: PAMS's
    /// wake cost of a drained helper and its energy-aware admission then never act.
    #[arg(long)]
    no_radio_state: bool,
    /// PAMS's energy-aware helper admission: what a second of the download's finish is worth,
    /// in joules (watts), as the daemons' `tuning.time_value` (the lab's mpbond-eco-<W>W).
    #[arg(long, value_name = "WATTS", value_parser = parse_watts)]
    time_value: Option<f64>,
    /// Pace every connection as Linux does with pacing on (the daemons' `tuning.pacing`, on
    /// there by default): twice the window per RTT in slow start, 1.2 times after. Off, a
    /// window's packets leave back to back, as in every figure of docs/sim.md not marked
    /// otherwise.
    #[arg(long)]
    pacing: bool,
    /// End TCP slow starts by HyStart as Linux's CUBIC does by default (on a rise of the
    /// round's RTT or a long ACK train, before the queue overflows). Off, slow start ends
    /// only on the first loss, as in every figure of docs/sim.md not marked otherwise.
    #[arg(long)]
    hystart: bool,
    /// With --pacing, the proxy's queue guard (the daemons' `tuning.queue_guard`): a PS-Path
    /// or HS-Path that fills its queue in slow start is paced at this factor over its
    /// delivered rate; 0: off.
    #[arg(long, value_name = "FACTOR", value_parser = parse_factor)]
    queue_guard: Option<f64>,
    /// With --pacing, the HS-Paths' own guard (the daemons' `tuning.hs_queue_guard`, 1.1 by
    /// default): while the helper's buffer is short, in slow start, and in congestion
    /// avoidance at a steady rate; 0: the HS-Paths take --queue-guard (the lab's
    /// mpbond-no-hs-guard).
    #[arg(long, value_name = "FACTOR", value_parser = parse_factor)]
    hs_queue_guard: Option<f64>,
    /// With --pacing, the PS-Path's guard past slow start (the daemons'
    /// `tuning.ps_queue_guard`, off by default): in congestion avoidance at a steady rate
    /// and outside loss recovery, once its queue stands, pace it at this factor over its
    /// delivered rate (the lab's mpbond-ps-guard: 1); 0: off.
    #[arg(long, value_name = "FACTOR", value_parser = parse_factor)]
    ps_queue_guard: Option<f64>,
    /// Seed for random loss.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Record per-subflow progress every DUR (in the JSON output).
    #[arg(long, value_name = "DUR")]
    timeline: Option<String>,
    /// Print JSON instead of a table, with what the table leaves out: per subflow its queue
    /// drops, HyStart exits and the capacity its WAN link and pipe left unused, per phone the
    /// energy of each interface (docs/sim.md).
    #[arg(long)]
    json: bool,
}

/// A count of smoothed RTTs (`--loss-hold`, `--drain-floor`), checked once when the
/// arguments are parsed.
fn parse_rtts(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a number of RTTs >= 0")),
    }
}

/// A queue guard's factor (`--queue-guard`, `--hs-queue-guard`): 0 (off) or at least 1, as
/// the daemons' configuration checks it.
fn parse_factor(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v == 0.0 || v.is_finite() && v >= 1.0 => Ok(v),
        _ => Err(format!("{s:?} is not a factor >= 1 (or 0, off)")),
    }
}

/// A value of time in watts (`--time-value`): positive and finite.
fn parse_watts(s: &str) -> std::result::Result<f64, String> {
    match s.trim_end_matches('W').parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a positive number of watts")),
    }
}

fn extend<T: Clone>(mut v: Vec<T>, n: usize, what: &str) -> Result<Vec<T>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let Some(last) = v.last().cloned() else {
        bail!("--{what} needs a value for the helpers");
    };
    v.resize(n, last);
    Ok(v)
}

impl SimArgs {
    fn scenarios(&self) -> Result<Vec<Scenario>> {
        let no_helpers = self.hs.trim().eq_ignore_ascii_case("none");
        let hs = if no_helpers {
            Vec::new()
        } else {
            parse_list(&self.hs, parse_rate_bps)?
        };
        let pipe = if no_helpers {
            Vec::new()
        } else {
            parse_list(&self.pipe, parse_rate_bps)?
        };
        let device_counts: Vec<usize> = match &self.devices {
            Some(d) => parse_list(d, |x| {
                x.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| (1..=255).contains(&n))
                    .ok_or_else(|| {
                        mpbond_sim::spec::SpecError(format!("bad device count {x:?}: 1 to 255"))
                    })
            })?,
            None => vec![1 + hs.len().max(pipe.len())],
        };
        let sizes = parse_list(&self.size, parse_size)?;
        let schedulers: Vec<String> = if self.scheduler.trim() == "all" {
            NAMES.iter().map(|s| s.to_string()).collect()
        } else {
            self.scheduler
                .split(',')
                .map(|s| s.trim().to_string())
                .collect()
        };
        for s in &schedulers {
            mpbond_core::by_name(s, Default::default())?;
        }
        let rtt_ps = parse_duration(&self.rtt_ps)?;
        let rtt_hs = parse_list(&self.rtt_hs, parse_duration)?;
        let rtt_pipe = parse_list(&self.rtt_pipe, parse_duration)?;
        let queue = self.queue.as_deref().map(parse_size).transpose()?;
        let changes: Vec<Change> = self
            .changes
            .iter()
            .map(|c| Change::parse(c))
            .collect::<Result<_, _>>()?;
        let trace_from = parse_duration(&self.trace_from).context("--trace-from")?;
        let trace_from =
            u64::try_from(trace_from.as_millis()).context("--trace-from is too long")?;
        let load = |specs: &[String], flag: &str| -> Result<Vec<(LinkRef, Arc<Trace>, bool)>> {
            let mut out = Vec::new();
            for t in specs {
                let (link, file) = t
                    .split_once('=')
                    .with_context(|| format!("bad --{flag} {t:?}: use LINK=FILE"))?;
                let wlan = file.strip_prefix("wlan:");
                let trace = match wlan {
                    // The lab's WLAN profiles (crates/lab/src/wlan.rs), so a pipe can follow
                    // the same walk as in the lab's 10a and 10b.
                    Some(spec) => match mpbond_lab::wlan::profile(spec)? {
                        mpbond_lab::wlan::Profile::Walk(t) => t,
                        mpbond_lab::wlan::Profile::Constant(bps) => {
                            Trace::from_rates(&format!("wlan:{spec}"), 100, &[bps])?
                        }
                    },
                    None => Trace::load(file)?,
                }
                .starting_at(trace_from);
                // A WLAN profile's rate is its radio's own: its airtime is priced against it.
                out.push((LinkRef::parse(link)?, Arc::new(trace), wlan.is_some()));
            }
            Ok(out)
        };
        let traces = load(&self.trace, "trace")?;
        let up_traces = load(&self.trace_up, "trace-up")?;
        let mut losses = Vec::new();
        for l in &self.loss {
            let (link, p) = l
                .split_once('=')
                .with_context(|| format!("bad --loss {l:?}: use LINK=PROBABILITY"))?;
            let p: f64 = p
                .parse()
                .ok()
                .filter(|p: &f64| (0.0..1.0).contains(p))
                .with_context(|| format!("bad loss probability in {l:?}: 0 <= p < 1"))?;
            losses.push((LinkRef::parse(link)?, p));
        }
        let feedback_route = match self.feedback.as_str() {
            "hs" => FeedbackRoute::HsPath,
            "flexible" => FeedbackRoute::Flexible,
            other => bail!("bad --feedback {other:?}: hs or flexible"),
        };
        if !self.pacing
            && (self.queue_guard.is_some()
                || self.hs_queue_guard.is_some()
                || self.ps_queue_guard.is_some())
        {
            bail!(
                "--queue-guard, --hs-queue-guard and --ps-queue-guard need --pacing: the guard \
                 caps the pacing rate"
            );
        }
        if !(self.recall_shortfall.is_finite() && self.recall_shortfall >= 0.0) {
            bail!(
                "--recall-shortfall must be a number >= 0 (0: the estimate as it is), not {}",
                self.recall_shortfall
            );
        }
        let late_bind = self
            .late_bind
            .as_deref()
            .map(parse_duration)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--late-bind: {e}"))?
            .map(|d| d.as_secs_f64());
        let late_bind_horizon = parse_duration(&self.late_bind_horizon)
            .map_err(|e| anyhow::anyhow!("--late-bind-horizon: {e}"))?
            .as_secs_f64();
        let pipe_radio = mpbond_core::energy::Radio::parse(&self.pipe_radio)
            .map_err(|e| anyhow::anyhow!("--pipe-radio: {e}"))?;
        let mut out = Vec::new();
        for &devices in &device_counts {
            let n = devices - 1;
            let hs = extend(hs.clone(), n, "hs")?;
            let pipe = extend(pipe.clone(), n, "pipe")?;
            let rtt_hs = extend(rtt_hs.clone(), n, "rtt-hs")?;
            let rtt_pipe = extend(rtt_pipe.clone(), n, "rtt-pipe")?;
            for &size in &sizes {
                for sched in &schedulers {
                    let mut ps = PathSpec::constant(parse_rate_bps(&self.ps)? / 1e6, rtt_ps);
                    ps.queue_bytes = queue;
                    let helpers = (0..n)
                        .map(|k| {
                            let mut h = HelperSpec {
                                hs: PathSpec::constant(hs[k] / 1e6, rtt_hs[k]),
                                pipe: PathSpec::constant(pipe[k] / 1e6, rtt_pipe[k]),
                            };
                            h.hs.queue_bytes = queue;
                            h.pipe.queue_bytes = queue;
                            h
                        })
                        .collect();
                    let mut sc = Scenario::new(ps, helpers, size, sched);
                    sc.pams.eta = self.eta;
                    sc.pams.shortfall_sigmas = self.recall_shortfall;
                    sc.pams.reinjection = !self.no_reinject;
                    sc.late_rescue = !self.no_reinject;
                    sc.loss_rescue = !self.no_reinject && !self.no_loss_rescue;
                    sc.window_rescue = !self.no_reinject;
                    sc.tail_copy = self.tail_copy;
                    sc.pams.late_bind = late_bind;
                    sc.pams.late_bind_horizon = late_bind_horizon;
                    sc.pipe_min_rtt = !self.no_pipe_min_rtt;
                    sc.pams.lookahead_rtts = match self.lookahead.as_str() {
                        "off" => None,
                        v => match v.parse::<f64>() {
                            Ok(x) if x > 0.0 && x.is_finite() => Some(x),
                            _ => bail!("bad --lookahead {v:?}: a positive number of RTTs or off"),
                        },
                    };
                    sc.cancel_recalled = !self.no_cancel;
                    sc.warm_pipes = !self.cold_pipes;
                    sc.tcp.tail_loss_probe = !self.no_tail_loss_probe;
                    sc.tcp.pacing = self.pacing;
                    sc.tcp.hystart = self.hystart;
                    if let Some(f) = self.queue_guard {
                        sc.queue_guard = f;
                    }
                    if let Some(f) = self.hs_queue_guard {
                        sc.hs_queue_guard = f;
                    }
                    if let Some(f) = self.ps_queue_guard {
                        sc.ps_queue_guard = f;
                    }
                    sc.pams.recall = match self.recall.as_str() {
                        "balanced" => RecallAmount::Balanced,
                        "paper" => RecallAmount::Paper,
                        other => bail!("bad --recall {other:?}: balanced or paper"),
                    };
                    sc.pams.pad = self.pad;
                    sc.clamp_helper_buffer = !self.no_clamp;
                    sc.segment = parse_size(&self.segment)? as usize;
                    sc.notsent_lowat = parse_size(&self.lowat)?;
                    sc.helper_buffer = parse_size(&self.helper_buffer)?;
                    sc.feedback_interval = parse_duration(&self.feedback_interval)?;
                    sc.feedback_route = feedback_route;
                    sc.stall_timeout = parse_duration(&self.stall_timeout)?;
                    sc.dead_timeout = parse_duration(&self.dead_timeout)?;
                    sc.rejoin = !self.no_rejoin;
                    sc.seed = self.seed;
                    sc.pipe_radio = pipe_radio;
                    sc.radio_state = !self.no_radio_state;
                    sc.pams.time_value = self.time_value;
                    sc.estimator_tau = parse_duration(&self.tau)?;
                    sc.loss_hold = self.loss_hold;
                    sc.drain_floor = self.drain_floor;
                    sc.rate_source = match self.rate_source.as_str() {
                        "delivery" => RateSource::DeliveryRate,
                        "cwnd" => RateSource::CwndRtt,
                        other => bail!("bad --rate-source {other:?}: delivery or cwnd"),
                    };
                    sc.timeline_every = self.timeline.as_deref().map(parse_duration).transpose()?;
                    for (link, t, wlan) in &traces {
                        sc.set_trace(*link, t.clone())?;
                        sc.path_mut(*link)?.radio_rate = *wlan;
                    }
                    for (link, t, _) in &up_traces {
                        sc.set_up_trace(*link, t.clone()).context("--trace-up")?;
                    }
                    for c in &changes {
                        sc.apply(c)?;
                    }
                    for (link, p) in &losses {
                        sc.path_mut(*link)?.loss = *p;
                    }
                    if sc.segment == 0 || sc.segment > mpbond_proto::MAX_PAYLOAD {
                        bail!("--segment must be 1 to {} bytes", mpbond_proto::MAX_PAYLOAD);
                    }
                    out.push(sc);
                }
            }
        }
        Ok(out)
    }
}

/// Runs `mpbond sim`.
pub fn run(args: SimArgs) -> Result<()> {
    // Quiet unless asked: `RUST_LOG=mpbond::sched=trace` logs every scheduling decision
    // with the simulated time, as the daemons log theirs.
    super::daemon::init_logging("off");
    let scenarios = args.scenarios()?;
    let mut results: Vec<(usize, SimResult, f64)> = Vec::new();
    for sc in &scenarios {
        let t0 = Instant::now();
        let r = mpbond_sim::run(sc)?;
        results.push((1 + sc.helpers.len(), r, t0.elapsed().as_secs_f64()));
    }
    if args.json {
        let v: Vec<&SimResult> = results.iter().map(|(_, r, _)| r).collect();
        if v.len() == 1 {
            println!("{}", serde_json::to_string_pretty(v[0])?);
        } else {
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
    } else if results.len() == 1 {
        print!("{}", results[0].1.table());
    } else {
        print!("{}", comparison(&results));
    }
    if results.iter().any(|(_, r, _)| !r.verified) {
        bail!("a run did not deliver every byte intact (see 'verified' above)");
    }
    Ok(())
}

fn comparison(results: &[(usize, SimResult, f64)]) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:>7} {:>9} {:<11} {:>10} {:>11} {:>8} {:>9}",
        "devices", "size", "scheduler", "download", "lower bound", "ratio", "gap"
    );
    for (devices, r, _) in results {
        let _ = writeln!(
            o,
            "{:>7} {:>9} {:<11} {:>10} {:>9.3} s {:>8} {:>7.3} s",
            devices,
            human_bytes(r.size_bytes),
            r.scheduler,
            r.download_time_s
                .map_or("timeout".into(), |d| format!("{d:.3} s")),
            r.lower_bound_s,
            r.ratio_to_bound.map_or("-".into(), |x| format!("{x:.3}")),
            r.completion_gap_s
        );
    }
    o
}
