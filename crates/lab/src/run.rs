//! One run: build the testbed, start a scheme's programs, download, collect every number,
//! tear everything down.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mpbond_daemon::keys::KeyPair;
use mpbond_sim::fluid::{
    arrival_times_from, delivered_per_sample, lower_bound, max_delivered, sequential_arrival_times,
    AckLink, Feedback, FluidPath,
};
use mpbond_sim::link::LinkConfig;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::counters;
use crate::cpu::{CpuMeter, DaemonCpu, HostCpu};
use crate::emu::{LinkReport, PacketEvent};
use crate::energy::{self, Radio};
use crate::http::{self, Via};
use crate::netns::{self, sh};
use crate::scenario::{Scenario, WorkloadKind};
use crate::scheme::{Kind, MpbondVariant, Scheme};
use crate::topo::{addr, Testbed, TopologySpec};
use crate::{combine, split};

/// Emulator time at which an mpbond scheme's workload starts. mpbond's daemons have every
/// subflow and link up about 0.55 s after the emulator starts (0.2 s of it the lab's pause
/// between the helpers and the primary), and the run checks that they have ([`NotReady`]
/// otherwise); the rest is margin for a busy machine, and a session a moment old, as a
/// deployed one would be, with its pipes' round trips measured.
pub const WARMUP: Duration = Duration::from_millis(1200);
/// Emulator time at which a baseline's workload starts (single TCP, kibbutz, COMBINE, the
/// fixed splits): no daemons connect, and its servers listen before the emulator's clock
/// matters (`Server::listen`); what is left is the last run's devices closing
/// ([`crate::emu::close_retired`], about 0.2 s for a three-device testbed) and, for
/// kibbutz, a few `ip mptcp` calls. The workload is anchored to its lead either way (rate
/// changes and traces start with it), so a shorter lead changes nothing a run measures; it
/// takes 0.7 s off each of the full suite's 600 baseline runs, which waited [`WARMUP`] as
/// well before. A set-up that runs past it fails the run as [`NotReady`].
pub const BASELINE_LEAD: Duration = Duration::from_millis(500);
/// How much later the workload starts when the scenario warms the session first
/// (`workload.warm`): the warm-up download runs in this time.
pub const WARM_LEAD: Duration = Duration::from_secs(4);
/// Least silence between the warm-up's end and the measured download: longer than any
/// retransmission timeout here, so every TCP connection restarts from its initial window
/// (Linux's `tcp_slow_start_after_idle`), as a later download on a deployed system would.
pub const WARM_IDLE: Duration = Duration::from_secs(1);
/// TCP payload per 1500-byte IP packet (MSS 1448 with timestamps): the lower bound counts
/// payload capacity, because that is what a download can use.
pub const PAYLOAD_SHARE: f64 = 1448.0 / 1500.0;

/// The binary the lab's daemons run: this very process's executable, named through
/// `/proc/<pid>/exe`, which the kernel resolves to the running file even once it has been
/// replaced or deleted. A suite thus keeps running the build it started with when
/// `target/release/mpbond` is rebuilt meanwhile (the path alone would start the new build's
/// daemons, or nothing at all: `current_exe` then names a "(deleted)" file).
pub fn own_executable() -> std::io::Result<PathBuf> {
    let p = PathBuf::from(format!("/proc/{}/exe", std::process::id()));
    if p.exists() {
        Ok(p)
    } else {
        std::env::current_exe()
    }
}

/// Where the programs and files are.
#[derive(Clone, Debug)]
pub struct RunEnv {
    /// The `mpbond` binary (for the daemons).
    pub exe: PathBuf,
    /// A scratch directory for configs, keys and logs.
    pub work: PathBuf,
    /// Also write every link's packet log of the workload to `packets.csv` in the run's
    /// scratch directory (for looking at what a scheme did packet by packet), and the kernel
    /// counters that moved on each device to `counters.csv` (why a kernel sender held back).
    pub packet_log: bool,
}

/// When a subflow delivered its last data packet, and how much.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SubflowResult {
    /// `ps`, `ps2`, or the pipe's link name (`p11` = helper 1, pipe 1).
    pub link: String,
    /// Seconds after the request (None if it carried no data).
    pub completion_s: Option<f64>,
    /// IP bytes of data packets moved toward the primary (away from it for an upload).
    pub bytes: u64,
    /// (seconds, cumulative IP bytes), sampled every 50 ms.
    pub progress: Vec<(f64, u64)>,
}

/// Bytes on one link during the workload.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LinkBytes {
    /// The link.
    pub link: String,
    /// IP bytes toward the primary.
    pub down: u64,
    /// IP bytes away from it.
    pub up: u64,
    /// TCP payload bytes, both directions (`emu::tcp_payload`): the data a link carried
    /// without its IP and TCP headers. `None` in results from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<u64>,
    /// Queue drops and random losses, both directions.
    pub drops: u64,
    /// The capacity the link offered toward the primary over the workload, bytes: what its
    /// rate profile would have carried had its queue never run dry. `None` in results from
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_offered: Option<f64>,
    /// Of that, the bytes it offered while it stood idle, with nothing queued toward the
    /// primary (`emu::DirReport::capacity`): what no sender used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_unused: Option<f64>,
}

/// Radio energy of one device (the model is in [`crate::energy`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeviceEnergy {
    /// `primary`, `helper1`, ...
    pub device: String,
    /// Joules, all its interfaces, the final tails included.
    pub joules: f64,
    /// Of which the final tails after the last packet.
    pub tail_joules: f64,
    /// (link, radio, joules with tail, tail joules) per interface.
    pub interfaces: Vec<(String, Radio, f64, f64)>,
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    /// The scheme.
    pub scheme: String,
    /// The testbed's TCP congestion control as the run had it ([`netns::congestion_label`]:
    /// for CUBIC, with its HyStart), since results depend on it; the report is written from
    /// it, so a report rewritten from `results.json` names it too. Empty in results written
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cc: String,
    /// What the workload did.
    pub workload: WorkloadKind,
    /// File size (0 for bulk).
    pub size: u64,
    /// Repetition, from 0.
    pub rep: usize,
    /// How far into its traces this repetition started (`trace_step`), seconds.
    pub trace_offset_s: f64,
    /// Seconds from the request to the last byte (bulk: the duration; chunks: the mean
    /// chunk time, so shares of a core take [`Self::cpu_window_s`] instead).
    pub seconds: f64,
    /// Payload bytes moved.
    pub bytes: u64,
    /// Mean goodput, Mbit/s.
    pub mean_mbps: f64,
    /// Whether every byte arrived intact (SHA-256 of everything, or of the bulk prefix).
    pub intact: bool,
    /// SHA-256 of what arrived.
    pub sha256: String,
    /// The fluid lower bound on the time (bulk: the duration).
    pub lower_bound_s: f64,
    /// The fluid upper bound on the mean goodput, Mbit/s.
    pub bound_mbps: f64,
    /// Bulk: the fluid's payload goodput per sample interval, Mbit/s: what the links could
    /// hand the application in each interval ([`bound_samples_mbps`]).
    pub bound_samples_mbps: Vec<f64>,
    /// How far from the physical limit: time / lower bound, or for bulk bound / goodput.
    pub ratio_to_bound: f64,
    /// Bulk goodput per sample interval, Mbit/s.
    pub throughput_mbps: Vec<f64>,
    /// Bulk: what reached the primary's interfaces per sample interval, Mbit/s
    /// ([`arrival_samples`]); empty for other workloads and for results written before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arrival_mbps: Vec<f64>,
    /// Per subflow into (for uploads: out of) the primary.
    pub subflows: Vec<SubflowResult>,
    /// Per link.
    pub links: Vec<LinkBytes>,
    /// Radio energy per device.
    pub energy: Vec<DeviceEnergy>,
    /// Their sum, joules (MPBond §6 sums over all devices), final tails included.
    pub energy_j: f64,
    /// The same without the final tails: the energy of the transfer itself.
    pub transfer_energy_j: f64,
    /// The transfer energy with Huang et al.'s linear WiFi model
    /// ([`RadioModel::huang2012_wifi`](crate::energy::RadioModel::huang2012_wifi)), the
    /// lab's before WiFi was priced by airtime: what the change does, in the same runs.
    /// `None` in results written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_energy_linear_wifi_j: Option<f64>,
    /// Application-level progress (seconds, bytes).
    pub progress: Vec<(f64, u64)>,
    /// The variant of the scenario (`[[variant]]`, `[sweep]`), if any.
    pub variant: Option<String>,
    /// What the video player saw (`video` workloads).
    pub video: Option<crate::video::VideoStats>,
    /// `chunks` workloads: each device's chunk times, s.
    pub chunk_times: Vec<(String, Vec<f64>)>,
    /// CPU seconds of each mpbond daemon over the workload (MPBond §6.8); empty for schemes
    /// without daemons on the devices.
    pub cpu: Vec<DaemonCpu>,
    /// The host over the same time (the hypervisor's steal, the lab's own CPU, a probe of
    /// fixed work every 100 ms), to read [`Self::cpu`] and the run's times against; `None`
    /// for results written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu: Option<HostCpu>,
    /// The hypervisor's steal (share of a core) in each earlier attempt at this run that was
    /// set aside for it, in order (`--rerun-stolen`, [`crate::rerun::rerun_stolen`]); the attempts
    /// themselves are in `stolen.json` beside `results.json`. Empty when the first attempt
    /// was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside_steal: Vec<f64>,
    /// What mpbond's senders did (recalls, bytes sent again, failed links), from the
    /// daemons' control endpoints; `None` for other schemes or when they did not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched: Option<crate::sched::SchedStats>,
    /// The kernel counters of [`crate::counters::REPORTED`] that moved on each device during
    /// the workload, keyed `"<device> <Name>"`; empty for results written before them.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub kernel: std::collections::BTreeMap<String, u64>,
}

impl RunResult {
    /// Whether the hypervisor stole more than [`crate::cpu::STEAL_LIMIT`] of a core over
    /// the workload, so that the run's daemon CPU measures the host (false for results
    /// written before steal was recorded).
    pub fn stolen(&self) -> bool {
        self.steal_share()
            .is_some_and(|s| s > crate::cpu::STEAL_LIMIT)
    }

    /// The wall seconds [`Self::cpu`] and [`Self::host_cpu`] were measured over
    /// ([`crate::cpu::HostCpu::window_s`]). Results written before it was recorded fall back
    /// to [`Self::seconds`], which is the measured time for every workload but chunks; for
    /// chunks, whose `seconds` is a mean chunk time, to the probes' count times
    /// [`crate::cpu::PROBE_EVERY`] (each probe adds its own work and wake-up to the period,
    /// so this reads under 1% short: 932 probes in a dual-mode run's 93.8 s window).
    pub fn cpu_window_s(&self) -> f64 {
        match &self.host_cpu {
            Some(h) if h.window_s > 0.0 => h.window_s,
            Some(h) if self.workload == WorkloadKind::Chunks && h.probes > 0 => {
                f64::from(h.probes) * crate::cpu::PROBE_EVERY.as_secs_f64()
            }
            _ => self.seconds,
        }
    }

    /// The hypervisor's steal as a share of one core over the measured window; `None` for
    /// results written before steal was recorded.
    pub fn steal_share(&self) -> Option<f64> {
        let h = self.host_cpu.as_ref()?;
        Some(h.steal_s / self.cpu_window_s().max(1e-9))
    }
}

impl SubflowResult {
    /// Whether the link ends at the primary (a PS-Path or a pipe) rather than at a helper
    /// (an HS-Path).
    pub fn reaches_primary(&self) -> bool {
        reaches_primary(&self.link)
    }
}

/// Size of the endless file a bulk download reads.
const BULK_FILE: u64 = 1 << 40;

/// Children, each with the device it runs on (`proxy`, `primary`, `helper1`, ...), killed on
/// drop.
struct Procs(Vec<(String, Child)>);

impl Procs {
    /// Each child's device and PID (`ip netns exec` execs the daemon, so the PID is its).
    fn pids(&self) -> Vec<(String, u32)> {
        self.0.iter().map(|(d, c)| (d.clone(), c.id())).collect()
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `f` on a thread inside namespace `ns`, with its own single-threaded runtime.
fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce(&tokio::runtime::Runtime) -> anyhow::Result<T> + Send + 'static,
) -> std::thread::JoinHandle<anyhow::Result<T>> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        netns::enter(&ns)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        f(&rt)
    })
}

/// What mpbond's senders did in this run: the proxy's sessions and, but in dual mode (whose
/// devices both run a primary's downloads through the proxy), the primary's, which sends
/// uploads. A daemon that does not answer is logged and leaves the run without them.
fn sched_stats(tb: &Testbed, dual: bool) -> Option<crate::sched::SchedStats> {
    let mut namespaces = vec![tb.names.proxy.clone()];
    if !dual {
        namespaces.push(tb.names.primary.clone());
    }
    let mut stats = crate::sched::SchedStats::default();
    for ns in namespaces {
        let got = in_ns(&ns, |rt| {
            rt.block_on(crate::sched::query(crate::sched::CONTROL_PORT))
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the status thread panicked"))
        .and_then(|r| r);
        match got {
            Ok((status, metrics)) => stats.add(&status, &metrics),
            Err(e) => {
                tracing::warn!(namespace = %ns, "no scheduler statistics: {e:#}");
                return None;
            }
        }
    }
    Some(stats)
}

/// The testbed was not ready when the workload was due ([`WARMUP`] or [`BASELINE_LEAD`]):
/// mpbond's daemons had not connected every subflow, or the set-up ran past the start. The run
/// measured nothing, and running it again on a fresh testbed is safe; a workload started
/// late would instead miss the first part of its links' schedule (a trace, a rate change).
#[derive(Debug, thiserror::Error)]
#[error("the testbed was not ready when the workload was due ({0})")]
pub struct NotReady(String);

/// Waits until mpbond's daemons have every session, subflow and link of the run up (the
/// proxy and each primary asked through their control endpoints), at most `within`: a run
/// whose workload started before a helper had connected would measure fewer devices than it
/// says. Answers how long the wait took.
fn wait_connected(
    tb: &Testbed,
    helpers: usize,
    dual: bool,
    within: Duration,
) -> anyhow::Result<Duration> {
    let began = Instant::now();
    let pipes = tb
        .pipes
        .iter()
        .take(helpers)
        .map(Vec::len)
        .min()
        .unwrap_or(0);
    // (namespace, sessions, subflows per session, links a helper subflow needs)
    let mut asks = vec![(
        tb.names.proxy.clone(),
        if dual { 2 } else { 1 },
        helpers + 1,
        1,
    )];
    asks.push((tb.names.primary.clone(), 1, helpers + 1, pipes));
    if dual {
        asks.push((tb.names.helpers[0].clone(), 1, helpers + 1, pipes));
    }
    for (ns, sessions, subflows, helper_links) in asks {
        let left = within.saturating_sub(began.elapsed());
        let got = in_ns(&ns, move |rt| {
            Ok(rt.block_on(crate::sched::wait_until(
                crate::sched::CONTROL_PORT,
                left,
                |st| {
                    crate::sched::connected(st, sessions, subflows, |kind| {
                        if kind == "helper" {
                            helper_links
                        } else {
                            1
                        }
                    })
                },
            )))
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the readiness thread panicked"))??;
        if let Err(last) = got {
            let seen = match last {
                None => "its control endpoint never answered".to_string(),
                Some(st) => format!(
                    "it had {} session(s) with {:?} subflow(s) and {:?} link(s)",
                    st.sessions.len(),
                    st.sessions
                        .iter()
                        .map(|s| s.subflows.len())
                        .collect::<Vec<_>>(),
                    st.sessions
                        .iter()
                        .map(|s| s.subflows.iter().map(|f| f.links.len()).collect::<Vec<_>>())
                        .collect::<Vec<_>>()
                ),
            };
            return Err(NotReady(format!(
                "mpbond's daemons, namespace {ns}: {seen}, wanted {sessions} session(s) of {subflows} subflow(s)"
            ))
            .into());
        }
    }
    Ok(began.elapsed())
}

/// A server thread in a namespace, stopped (and joined) on drop, so the namespace can go.
struct Server {
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

/// How a [`Server`] listens.
#[derive(Clone, Copy, Debug)]
enum Listen {
    Tcp,
    /// Kernel MPTCP (kibbutz's relay on the proxy).
    Mptcp,
}

impl Server {
    /// Starts a server in namespace `ns` on `addr` and returns once it listens, or with why
    /// it cannot: a baseline's workload starts soon after the testbed is up
    /// ([`BASELINE_LEAD`]), so its servers must be listening by then, not on their way.
    fn listen<F>(
        ns: &str,
        addr: SocketAddr,
        how: Listen,
        serve: impl FnOnce(tokio::net::TcpListener) -> F + Send + 'static,
    ) -> anyhow::Result<Server>
    where
        F: std::future::Future<Output = std::io::Result<()>>,
    {
        let (stop, mut rx) = watch::channel(false);
        let (ready, listening) = std::sync::mpsc::channel();
        let mut thread = Some(in_ns(ns, move |rt| {
            rt.block_on(async move {
                let bound = match how {
                    Listen::Tcp => tokio::net::TcpListener::bind(addr).await,
                    Listen::Mptcp => http::mptcp_listener(addr),
                };
                let l = match bound {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return Ok(());
                    }
                };
                let _ = ready.send(Ok(()));
                tokio::select! {
                    r = serve(l) => r.map_err(anyhow::Error::from),
                    _ = rx.changed() => Ok(()),
                }
            })
        }));
        let why = match listening.recv() {
            Ok(Ok(())) => return Ok(Server { stop, thread }),
            Ok(Err(e)) => anyhow::Error::from(e),
            // The thread ended before it tried: it could not enter the namespace, say.
            Err(_) => match thread.take().map(|t| t.join()) {
                Some(Ok(Err(e))) => e,
                _ => anyhow::anyhow!("the server thread ended before it listened"),
            },
        };
        if let Some(t) = thread {
            let _ = t.join();
        }
        Err(why.context(format!("cannot listen on {addr} in namespace {ns}")))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The fluid paths a scheme can use: the PS-Path, `ps2` for `mptcp-wifi-lte`, and the first
/// `helpers` helper paths (HS then pipe for downloads, pipe then HS for uploads).
/// `topo` must have its time 0 at the request (`Scenario::topology(Duration::ZERO)`).
/// With a `window`, each hop's acknowledgements ride its link's other direction
/// (`mpbond_sim::fluid`'s window-limited bound).
fn with_paths<T>(
    topo: &TopologySpec,
    scheme: Scheme,
    upload: bool,
    window: Option<u64>,
    f: impl FnOnce(&[FluidPath<'_>]) -> T,
) -> T {
    let dir = |l: &crate::topo::LinkParams| {
        if upload {
            (l.up.clone(), l.down.clone())
        } else {
            (l.down.clone(), l.up.clone())
        }
    };
    let ps = dir(&topo.ps);
    let ps2 = topo.ps2.as_ref().map(dir);
    let helpers = scheme.helpers_used(topo.helpers.len());
    let hp: Vec<_> = topo
        .helpers
        .iter()
        .take(helpers)
        .map(|h| (dir(&h.hs), dir(&h.pipes[0])))
        .collect();
    fn ack(l: &LinkConfig) -> AckLink<'_> {
        AckLink {
            link: &l.rate,
            delay: l.delay,
        }
    }
    fn direct(l: &(LinkConfig, LinkConfig), window: Option<u64>) -> FluidPath<'_> {
        FluidPath {
            wan: &l.0.rate,
            wan_delay: l.0.delay,
            pipe: None,
            feedback: window.map(|window| Feedback {
                wan: ack(&l.1),
                pipe: None,
                window,
            }),
        }
    }
    let mut paths = vec![direct(&ps, window)];
    if let (Kind::MptcpWifiLte, Some(p2)) = (scheme.kind, &ps2) {
        paths.push(direct(p2, window));
    }
    for (hs, pipe) in &hp {
        let (first, second) = if upload { (pipe, hs) } else { (hs, pipe) };
        paths.push(FluidPath {
            wan: &first.0.rate,
            wan_delay: first.0.delay,
            pipe: Some((&second.0.rate, second.0.delay)),
            feedback: window.map(|window| Feedback {
                wan: ack(&first.1),
                pipe: Some(ack(&second.1)),
                window,
            }),
        });
    }
    f(&paths)
}

/// The window the window-limited bounds give every sender (`mpbond_sim::fluid`): Linux's
/// default `tcp_wmem` maximum, 4 MiB, which the testbed sets in every namespace
/// (`topo::SEND_BUFFER_MAX`). A TCP sender's socket buffer holds its unacknowledged bytes,
/// so no scheme in the lab keeps more than this in flight on one hop.
pub const WINDOW_BOUND: u64 = crate::topo::SEND_BUFFER_MAX;

/// The fluid lower bound for moving `size` payload bytes with `scheme`: the paths' IP
/// capacity carries payload at [`PAYLOAD_SHARE`], plus the request's trip to the origin.
/// With a `window`, the window-limited bound.
pub fn bound(
    topo: &TopologySpec,
    scheme: Scheme,
    size: u64,
    upload: bool,
    window: Option<u64>,
) -> f64 {
    let ip_bytes = (size as f64 / PAYLOAD_SHARE).ceil() as u64;
    let t = with_paths(topo, scheme, upload, window, |p| {
        lower_bound(ip_bytes, p, Duration::from_secs(600))
    });
    // A download waits for the request to reach the origin; an upload for the answer.
    t + if upload {
        topo.ps.down.delay.as_secs_f64()
    } else {
        topo.ps.up.delay.as_secs_f64()
    }
}

/// The fluid upper bound on a bulk download's mean payload goodput over `duration`, Mbit/s
/// (with a `window`, the window-limited one).
pub fn bound_mbps(
    topo: &TopologySpec,
    scheme: Scheme,
    duration: Duration,
    window: Option<u64>,
) -> f64 {
    let bytes = with_paths(topo, scheme, false, window, |p| max_delivered(p, duration));
    bytes * PAYLOAD_SHARE * 8.0 / duration.as_secs_f64() / 1e6
}

/// The fluid payload goodput of a bulk download in each `sample` interval, Mbit/s
/// (`mpbond_sim::fluid::delivered_per_sample`): its median and 5th percentile bound what a
/// scheme's goodput samples can reach when no path ever blocks the receiver (with a
/// `window`, when no window-based sender does).
pub fn bound_samples_mbps(
    topo: &TopologySpec,
    scheme: Scheme,
    duration: Duration,
    sample: Duration,
    window: Option<u64>,
) -> Vec<f64> {
    let per_s = PAYLOAD_SHARE * 8.0 / sample.as_secs_f64() / 1e6;
    with_paths(topo, scheme, false, window, |p| {
        delivered_per_sample(p, duration, sample)
    })
    .into_iter()
    .map(|b| b * per_s)
    .collect()
}

/// The least stall ratio a one-rung video could have over `scheme`'s paths with playback
/// from `start_s` (a run's own startup; `None`: as early as the player may): a greedy
/// player (`crate::video::stall_bound`) fed each segment at the earliest time the links
/// could deliver it (payload at [`PAYLOAD_SHARE`]) when, as [`crate::video::Player::play`]
/// does, it asks for a segment once it holds the previous one and the request takes the
/// PS-Path's one-way delay to the origin (`mpbond_sim::fluid::sequential_arrival_times`).
/// `None` for an adaptive ladder, whose bound would depend on the rungs chosen. With a
/// `window`, the arrivals are the window-limited bound's.
pub fn video_stall_bound(
    sc: &Scenario,
    topo: &TopologySpec,
    scheme: Scheme,
    window: Option<u64>,
    start_s: Option<f64>,
) -> anyhow::Result<Option<f64>> {
    let p = sc.player()?;
    let [rate] = p.ladder[..] else {
        return Ok(None);
    };
    let n = (p.video_s / p.segment_s).ceil() as usize;
    let seg = ((rate * p.segment_s / 8.0).round() as u64).max(1);
    let sizes = vec![(seg as f64 / PAYLOAD_SHARE).ceil() as u64; n];
    let horizon = Duration::from_secs_f64((p.video_s * 20.0).clamp(60.0, 3600.0));
    let request = topo.ps.up.delay;
    let arrivals = with_paths(topo, scheme, false, window, |paths| {
        sequential_arrival_times(&sizes, paths, request, horizon)
    });
    Ok(Some(
        crate::video::stall_bound(&arrivals, p.segment_s, start_s) / p.video_s,
    ))
}

/// For each segment of a video run, the earliest end its links allowed it from the moment
/// the player asked for it (`asked`, seconds), its request taking the PS-Path's one-way
/// delay to the origin, on links and helper buffers empty at the request
/// (`mpbond_sim::fluid::arrival_times_from`; payload at [`PAYLOAD_SHARE`]). The segments'
/// sizes are the steps of the run's `progress`. The stall bound chains segments at the
/// bound's own ends ([`video_stall_bound`]); this holds each of the run's segments against
/// its own start, so the time beyond it says in which segments a scheme lost time, and how
/// much (docs/lab.md).
pub fn segment_bounds(
    topo: &TopologySpec,
    scheme: Scheme,
    asked: &[f64],
    progress: &[(f64, u64)],
) -> Vec<f64> {
    let sizes: Vec<u64> = progress
        .windows(2)
        .map(|w| (w[1].1.saturating_sub(w[0].1) as f64 / PAYLOAD_SHARE).ceil() as u64)
        .collect();
    let n = sizes.len().min(asked.len());
    let last = asked[..n]
        .iter()
        .copied()
        .filter(|t| t.is_finite())
        .fold(0.0, f64::max);
    let horizon = Duration::from_secs_f64((last + 120.0).min(1e6));
    let request = topo.ps.up.delay;
    with_paths(topo, scheme, false, None, |paths| {
        arrival_times_from(&sizes[..n], &asked[..n], paths, request, horizon)
    })
}

/// How the client reaches the origin.
#[derive(Clone)]
enum Client {
    Via(Via),
    Combine {
        chunk: u64,
        helpers: Vec<SocketAddr>,
    },
    /// Fixed split: the first `ps_bytes` over the PS-Path, the rest from `tether`.
    Split {
        ps_percent: u8,
        tether: std::net::IpAddr,
    },
}

/// The order in which one repetition runs its schemes: the scenario's order turned by one
/// place per repetition (A B, then B A, ...), so each scheme runs first as often as the
/// others. A run that follows another on the same machine might differ from one that leads
/// (in one of experiment 12's chunk schedules whichever of two builds ran second was about 2%
/// slower), and a fixed order would hand any such effect to one scheme. Measured in this
/// order (`scripts/order-effect`), it stayed within its standard error in 06, 11d and 12
/// (docs/evaluation.md, item 53), so the turning costs nothing and rules it out.
pub fn run_order<T: Clone>(schemes: &[T], rep: usize) -> Vec<T> {
    let mut order = schemes.to_vec();
    if !order.is_empty() {
        let k = rep % order.len();
        order.rotate_left(k);
    }
    order
}

/// Attempts at one run whose testbed was not ready in time before the suite stops.
const READY_ATTEMPTS: usize = 3;

/// [`run_one`], again on a fresh testbed when it was not ready by the workload's start
/// ([`NotReady`]: a run that measured nothing, as on a machine busy for a moment), at most
/// `READY_ATTEMPTS` times, a baseline's attempts after the first with mpbond's longer lead;
/// any other failure stops at once.
pub fn run_retrying(
    sc: &Scenario,
    scheme: Scheme,
    size: u64,
    rep: usize,
    env: &RunEnv,
) -> anyhow::Result<RunResult> {
    retry_not_ready(&env.work, READY_ATTEMPTS, |work, attempt| {
        let env = RunEnv {
            work: work.to_path_buf(),
            ..env.clone()
        };
        run_one(sc, scheme, size, rep, &env, attempt)
    })
}

/// Calls `attempt` with a scratch directory and the attempt's number (from 1) until it
/// returns anything but [`NotReady`], at most `attempts` times; each retry gets a fresh
/// directory under `work` (`attempt2`, ...), since a run never overwrites its keys.
fn retry_not_ready<T>(
    work: &Path,
    attempts: usize,
    mut attempt: impl FnMut(&Path, usize) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let mut n = 1;
    loop {
        let dir = if n == 1 {
            work.to_path_buf()
        } else {
            work.join(format!("attempt{n}"))
        };
        match attempt(&dir, n) {
            Err(e) if n < attempts && e.is::<NotReady>() => {
                eprintln!("lab: {e}; running it again ({n} of {attempts} failed)");
                n += 1;
            }
            r => return r,
        }
    }
}

/// Emulator time by which `scheme`'s testbed must be ready (the workload's start, unless the
/// scenario warms the session first): [`WARMUP`] for mpbond's daemons, [`BASELINE_LEAD`]
/// for a baseline's first attempt and [`WARMUP`] for its later ones, so a set-up that a busy
/// host slowed past the short lead gets the margin every run had before.
fn ready_by(scheme: Scheme, attempt: usize) -> Duration {
    if scheme.is_mpbond() || attempt > 1 {
        WARMUP
    } else {
        BASELINE_LEAD
    }
}

/// Runs one workload item: a file of `size` bytes (ignored for bulk). `attempt` counts from
/// 1: a baseline that was not ready by [`BASELINE_LEAD`] (a set-up slowed by a busy host)
/// tries again with [`WARMUP`].
pub fn run_one(
    sc: &Scenario,
    scheme: Scheme,
    size: u64,
    rep: usize,
    env: &RunEnv,
    attempt: usize,
) -> anyhow::Result<RunResult> {
    sc.supports(scheme)?;
    let kind = sc.workload.kind;
    let upload = kind == WorkloadKind::Upload;
    let warm = sc.warm()?;
    let ready = ready_by(scheme, attempt);
    let lead = ready
        + if warm.is_some() {
            WARM_LEAD
        } else {
            Duration::ZERO
        };
    let topo = sc.topology(lead, rep)?;
    let helpers_used = scheme.helpers_used(topo.helpers.len());
    let mut tb = Testbed::build(&topo)?;
    // The last run's TUN devices close while this one's daemons connect (crate::emu::RETIRED).
    let closing = crate::emu::close_retired();
    let work = env.work.join(format!("{}-{}-{}", scheme, size, rep));
    std::fs::create_dir_all(&work)?;
    let origin = SocketAddr::from((addr::ORIGIN, 80));
    let _origin = Server::listen(&tb.names.origin, origin, Listen::Tcp, |l| async move {
        http::serve_origin(l).await;
        Ok(())
    })?;
    let mut _servers = Vec::new();
    let mut _procs = Procs(Vec::new());
    let client = match scheme.kind {
        Kind::Single => Client::Via(Via::Direct),
        Kind::KibbutzSplit { ps_percent } => {
            let p = tb
                .pipes
                .first()
                .and_then(|p| p.first())
                .ok_or_else(|| anyhow::anyhow!("{scheme} needs a helper"))?;
            Client::Split {
                ps_percent,
                tether: addr::pipe(*p).0.into(),
            }
        }
        Kind::Kibbutz | Kind::KibbutzN | Kind::MptcpWifiLte => {
            let relay = SocketAddr::from((addr::PS_PROXY, 8080));
            for ns in [&tb.names.primary, &tb.names.proxy] {
                sh(&[
                    "ip",
                    "-n",
                    ns,
                    "mptcp",
                    "limits",
                    "set",
                    "subflows",
                    "8",
                    "add_addr_accepted",
                    "8",
                ])?;
            }
            // The extra subflows' source addresses: the tethered pipes, or the WiFi.
            let mut endpoints: Vec<(String, String)> = Vec::new();
            if scheme.kind == Kind::MptcpWifiLte {
                let dev = tb
                    .ps2_dev
                    .clone()
                    .ok_or_else(|| anyhow::anyhow!("the testbed has no ps2 link"))?;
                endpoints.push((addr::PS2_PRIMARY.to_string(), dev));
            }
            for pipes in tb.pipes.iter().take(helpers_used) {
                for &p in pipes {
                    endpoints.push((addr::pipe(p).0.to_string(), tb.pipe_devs[p].clone()));
                }
            }
            for (ip, dev) in &endpoints {
                sh(&[
                    "ip",
                    "-n",
                    &tb.names.primary,
                    "mptcp",
                    "endpoint",
                    "add",
                    ip,
                    "dev",
                    dev,
                    "subflow",
                ])?;
            }
            _servers.push(Server::listen(
                &tb.names.proxy,
                relay,
                Listen::Mptcp,
                move |l| http::relay(l, origin),
            )?);
            Client::Via(Via::Mptcp(relay))
        }
        Kind::Combine { chunk } => {
            let mut helpers = Vec::new();
            for (i, pipes) in tb.pipes.iter().enumerate().take(helpers_used) {
                let agent = SocketAddr::from((addr::pipe(pipes[0]).1, 8081));
                _servers.push(Server::listen(
                    &tb.names.helpers[i],
                    agent,
                    Listen::Tcp,
                    move |l| combine::serve_helper(l, origin),
                )?);
                helpers.push(agent);
            }
            Client::Combine { chunk, helpers }
        }
        Kind::Mpbond(_) if sc.dual => {
            _procs = start_mpbond_dual(&tb, &work, &env.exe)?;
            Client::Via(Via::Socks(SocketAddr::from(([127, 0, 0, 1], 1080))))
        }
        Kind::Mpbond(variant) => {
            _procs = start_mpbond(&tb, &work, &env.exe, variant, helpers_used, &sc.radios()?)?;
            Client::Via(Via::Socks(SocketAddr::from(([127, 0, 0, 1], 1080))))
        }
    };
    let duration = sc.bulk_duration()?;
    let sample = sc.sample_interval()?;
    let player = match kind {
        WorkloadKind::Video => {
            let p = sc.player()?;
            let reference = p.reference();
            Some((p, reference))
        }
        _ => None,
    };
    let emu_now = || tb.emu.as_ref().map_or(lead, |e| e.now());
    let wait_until = |t: Duration| {
        while emu_now() < t {
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    if let Kind::Mpbond(_) = scheme.kind {
        let took = wait_connected(&tb, helpers_used, sc.dual, ready.saturating_sub(emu_now()))?;
        tracing::debug!(
            took_s = took.as_secs_f64(),
            emu_s = emu_now().as_secs_f64(),
            "mpbond's daemons connected"
        );
    }
    if let Some(w) = warm {
        wait_until(ready);
        let f = in_ns(&tb.names.primary, {
            let client = client.clone();
            move |rt| rt.block_on(fetch_file(client, origin, w))
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the warm-up thread panicked"))??;
        if !f.intact {
            anyhow::bail!("the warm-up download of {w} bytes did not arrive intact");
        }
        let ended = emu_now();
        if ended + WARM_IDLE > lead {
            anyhow::bail!(
                "the warm-up download ended {:.1} s after the start of the lead time, less \
                 than {:?} before the measured download: make workload.warm smaller",
                (ended.saturating_sub(ready)).as_secs_f64(),
                WARM_IDLE
            );
        }
    }
    if closing.join().is_err() {
        tracing::warn!("the thread closing the last run's devices panicked");
    }
    // The kernel's counters of every device, before and after the workload: the reported
    // few go into the result, all that moved into `counters.csv` with `--packets`.
    let devices = tb.names.devices();
    // A diagnostic: a run does not fail for want of it.
    let read_counters = || match counters::snapshot(&devices) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the kernel's counters");
            None
        }
    };
    let counters_before = read_counters();
    // With `--packets`, every socket's window over the run (a diagnostic too).
    let probe = if env.packet_log {
        crate::tcp_probe::TcpProbe::start(&format!("{scheme}-{size}-{rep}"))
            .map_err(|e| tracing::warn!(error = %e, "no tcp_probe.csv for this run"))
            .ok()
    } else {
        None
    };
    // Wait for the workload's start time; a set-up that ran past it would start the workload
    // late against its links' schedule.
    let set_up = emu_now();
    tracing::debug!(
        set_up_s = set_up.as_secs_f64(),
        lead_s = lead.as_secs_f64(),
        "the testbed is ready for the workload"
    );
    if set_up > lead {
        return Err(NotReady(format!(
            "its set-up took {:.3} s of emulator time, past the workload's start at {:.3} s",
            set_up.as_secs_f64(),
            lead.as_secs_f64()
        ))
        .into());
    }
    wait_until(lead);
    let start_us = emu_now().as_micros() as u64;
    if let Some(p) = &probe {
        if let Err(e) = p.mark_start() {
            tracing::warn!(error = %e, "cannot mark the start in tcp_probe's trace");
        }
    }
    let cpu_meter = CpuMeter::start(&_procs.pids());
    let mut chunk_times = Vec::new();
    let (fetch, samples, video) = if kind == WorkloadKind::Chunks {
        let Client::Via(via) = client else {
            anyhow::bail!("{scheme} cannot run a chunks workload");
        };
        let gap = sc.gap()?;
        let mut devices = vec![("primary".to_string(), tb.names.primary.clone())];
        if sc.dual {
            devices.push(("helper1".into(), tb.names.helpers[0].clone()));
        }
        let threads: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(i, (_, ns))| {
                let via = via.clone();
                let seed = sc.seed.wrapping_add(rep as u64 * 97 + i as u64 + 1);
                in_ns(ns, move |rt| {
                    rt.block_on(http::chunks(origin, &via, size, gap, duration, seed))
                        .map_err(anyhow::Error::from)
                })
            })
            .collect();
        let (mut intact, mut bytes, mut all) = (true, 0, Vec::new());
        for ((device, _), t) in devices.into_iter().zip(threads) {
            let (times, ok, b) = t
                .join()
                .map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
            intact &= ok && !times.is_empty();
            bytes += b;
            all.extend(times.iter().copied());
            chunk_times.push((device, times));
        }
        let mean = all.iter().sum::<f64>() / all.len().max(1) as f64;
        let fetch = http::Fetch {
            bytes,
            seconds: mean,
            intact,
            sha256: String::new(),
            progress: Vec::new(),
        };
        (fetch, Vec::new(), None)
    } else {
        in_ns(&tb.names.primary, move |rt| {
            rt.block_on(async move {
                let started = Instant::now();
                let via = match client {
                    Client::Via(v) => v,
                    other => return Ok((fetch_file(other, origin, size).await?, Vec::new(), None)),
                };
                let mut s = http::connect(origin, &via).await?;
                Ok(match (kind, player) {
                    (WorkloadKind::Video, Some((p, reference))) => {
                        let (f, v) = p.play(s, &reference).await?;
                        (f, vec![], Some(v))
                    }
                    (WorkloadKind::Upload, _) => {
                        (http::put(&mut s, size, started).await?, vec![], None)
                    }
                    (WorkloadKind::Bulk, _) => {
                        let (f, samples) = http::bulk(s, BULK_FILE, duration, sample).await?;
                        (f, samples, None)
                    }
                    _ => (http::get(&mut s, size, None, started).await?, vec![], None),
                })
            })
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the client thread panicked"))??
    };
    let (cpu, host_cpu) = cpu_meter.finish();
    let mut kernel = std::collections::BTreeMap::new();
    if let (Some(before), Some(after)) = (&counters_before, read_counters()) {
        let moved = counters::moved(before, &after);
        kernel = counters::reported(&moved);
        if env.packet_log {
            counters::write(&work.join("counters.csv"), &moved)?;
        }
    }
    let sched = match scheme.kind {
        Kind::Mpbond(_) => sched_stats(&tb, sc.dual),
        _ => None,
    };
    std::thread::sleep(Duration::from_millis(50));
    let links = tb.emu.take().map(|e| e.stop()).unwrap_or_default();
    if env.packet_log {
        write_packet_log(&work.join("packets.csv"), &links, start_us)?;
    }
    if let Some(p) = probe {
        let cap = p.finish()?;
        if cap.lost > 0 {
            tracing::warn!(
                lost = cap.lost,
                "tcp_probe.csv misses events the trace buffer dropped"
            );
        }
        match cap.start_ns {
            Some(t0) => crate::tcp_probe::write_csv(&work.join("tcp_probe.csv"), &cap.events, t0)?,
            None => tracing::warn!("no start mark in tcp_probe's trace: no tcp_probe.csv"),
        }
    }
    drop(_procs);
    drop(_servers);
    drop(_origin);
    drop(tb);
    let topo0 = sc.topology(Duration::ZERO, rep)?;
    let (lb, bmbps) = match kind {
        WorkloadKind::Bulk | WorkloadKind::Video => (
            duration.as_secs_f64(),
            bound_mbps(&topo0, scheme, duration, None),
        ),
        _ => {
            let lb = bound(&topo0, scheme, size, upload, None);
            (lb, size as f64 * 8.0 / lb / 1e6)
        }
    };
    let mut video = video;
    if let (Some(v), WorkloadKind::Video) = (video.as_mut(), kind) {
        // Held against the run's own startup: a later start can stall less.
        let start = Some(v.startup_s);
        v.stall_ratio_bound = video_stall_bound(sc, &topo0, scheme, None, start)?;
        v.stall_ratio_window_bound =
            video_stall_bound(sc, &topo0, scheme, Some(WINDOW_BOUND), start)?;
        v.segment_bound_s = segment_bounds(&topo0, scheme, &v.asked_s, &fetch.progress);
    }
    let mean_mbps = fetch.bytes as f64 * 8.0 / fetch.seconds / 1e6;
    let ratio = match kind {
        WorkloadKind::Bulk | WorkloadKind::Video => bmbps / mean_mbps.max(1e-9),
        _ => fetch.seconds / lb,
    };
    // In dual mode both devices run the workload, whatever the scheme.
    let energy_devices = if sc.dual { 1 } else { helpers_used };
    let (energy, linear_wifi_j) = device_energy(sc, &topo, &links, start_us, energy_devices)?;
    let end_us = start_us + (fetch.seconds * 1e6) as u64;
    let link_bytes = links
        .iter()
        .map(|l| {
            let cap = l.ba.capacity(start_us, end_us);
            LinkBytes {
                link: l.name.clone(),
                down: bytes_after(&l.ba.records, start_us, |r| r.size),
                up: bytes_after(&l.ab.records, start_us, |r| r.size),
                payload: Some(
                    bytes_after(&l.ba.records, start_us, |r| r.payload)
                        + bytes_after(&l.ab.records, start_us, |r| r.payload),
                ),
                drops: l.ab.queue_drops + l.ab.losses + l.ba.queue_drops + l.ba.losses,
                down_offered: cap.map(|c| c.offered),
                down_unused: cap.map(|c| c.unused),
            }
        })
        .collect();
    Ok(RunResult {
        scheme: scheme.to_string(),
        cc: netns::congestion_label(&sc.cc),
        workload: kind,
        size,
        rep,
        trace_offset_s: sc.trace_offset(rep)?.as_secs_f64(),
        seconds: fetch.seconds,
        bytes: fetch.bytes,
        mean_mbps,
        intact: fetch.intact,
        sha256: fetch.sha256,
        lower_bound_s: lb,
        bound_mbps: bmbps,
        bound_samples_mbps: if kind == WorkloadKind::Bulk {
            bound_samples_mbps(&topo0, scheme, duration, sample, None)
        } else {
            Vec::new()
        },
        ratio_to_bound: ratio,
        arrival_mbps: if kind == WorkloadKind::Bulk {
            arrival_samples(&links, start_us, sample, samples.len())
        } else {
            Vec::new()
        },
        throughput_mbps: if samples.is_empty() {
            samples_from_progress(&fetch.progress, sample)
        } else {
            samples
        },
        subflows: subflow_results(&links, start_us, upload),
        links: link_bytes,
        energy_j: energy.iter().map(|d| d.joules).sum(),
        transfer_energy_j: energy.iter().map(|d| d.joules - d.tail_joules).sum(),
        transfer_energy_linear_wifi_j: Some(linear_wifi_j),
        energy,
        progress: fetch.progress,
        variant: None,
        video,
        chunk_times,
        cpu,
        host_cpu,
        set_aside_steal: Vec::new(),
        sched,
        kernel,
    })
}

/// A plain download of `size` bytes over `client` (the warm-up of `workload.warm`, and the
/// download itself for the clients that only download).
async fn fetch_file(client: Client, origin: SocketAddr, size: u64) -> anyhow::Result<http::Fetch> {
    let started = Instant::now();
    Ok(match client {
        Client::Combine { chunk, helpers } => {
            combine::download(origin, &helpers, size, chunk).await?
        }
        Client::Split { ps_percent, tether } => {
            let ps_bytes = size * u64::from(ps_percent) / 100;
            split::download(origin, size, ps_bytes, tether).await?
        }
        Client::Via(via) => {
            let mut s = http::connect(origin, &via).await?;
            http::get(&mut s, size, None, started).await?
        }
    })
}

/// Radio energy of the primary and of the helpers the scheme used, from the workload's start,
/// and the transfer energy of them all with Huang et al.'s linear WiFi model. Side `a` of
/// every link is the primary (or, for `hs`, the helper); side `b` of a pipe is the helper.
fn device_energy(
    sc: &Scenario,
    topo: &TopologySpec,
    links: &[LinkReport],
    start_us: u64,
    helpers: usize,
) -> anyhow::Result<(Vec<DeviceEnergy>, f64)> {
    let radios = sc.radios()?;
    let radio = |name: &str| {
        radios
            .iter()
            .find(|(n, _)| n == name)
            .map_or(Radio::Ethernet, |(_, r)| *r)
    };
    let mut devices = vec![DeviceEnergy {
        device: "primary".into(),
        joules: 0.0,
        tail_joules: 0.0,
        interfaces: Vec::new(),
    }];
    for k in 1..=helpers {
        devices.push(DeviceEnergy {
            device: format!("helper{k}"),
            joules: 0.0,
            tail_joules: 0.0,
            interfaces: Vec::new(),
        });
    }
    let mut linear_wifi_j = 0.0;
    let mut add = |dev: usize, name: &str, i: energy::Interface<'_>| {
        if let Some(d) = devices.get_mut(dev) {
            let bins = energy::activity(&i, start_us);
            let model = energy::RadioModel::for_radio(i.radio);
            let (transfer, tail) = energy::price(&i, &bins, &model, start_us);
            linear_wifi_j += if i.radio == Radio::Wifi {
                energy::price(&i, &bins, &energy::RadioModel::huang2012_wifi(), start_us).0
            } else {
                transfer
            };
            d.interfaces
                .push((name.to_string(), i.radio, transfer + tail, tail));
        }
    };
    for l in links {
        let name = l.name.as_str();
        let helper_no = |prefix: &str, suffix_len: usize| -> Option<usize> {
            let k = name.get(prefix.len()..name.len().checked_sub(suffix_len)?)?;
            k.parse::<usize>()
                .ok()
                .filter(|k| (1..=topo.helpers.len()).contains(k))
        };
        // The device on side a, the link, and the helper on side b (pipes only).
        let (a_dev, params, b_dev) = match name {
            "ps" => (0, &topo.ps, None),
            "ps2" => match &topo.ps2 {
                Some(p) => (0, p, None),
                None => continue,
            },
            n if n.starts_with("hs") => match helper_no("hs", 0) {
                Some(k) => (k, &topo.helpers[k - 1].hs, None),
                None => continue,
            },
            // p<k><j>: helper k's pipe j (one pipe per helper in scenarios).
            n if n.starts_with('p') => match helper_no("p", 1) {
                Some(k) => (0, &topo.helpers[k - 1].pipes[0], Some(k)),
                None => continue,
            },
            _ => continue,
        };
        let r = radio(name);
        add(
            a_dev,
            name,
            energy::Interface {
                radio: r,
                sent: &l.ab,
                sent_delay: params.up.delay,
                received: &l.ba,
                rate: &params.down.rate,
                radio_rate: params.radio_rate,
            },
        );
        if let Some(k) = b_dev {
            add(
                k,
                name,
                energy::Interface {
                    radio: r,
                    sent: &l.ba,
                    sent_delay: params.down.delay,
                    received: &l.ab,
                    rate: &params.down.rate,
                    radio_rate: params.radio_rate,
                },
            );
        }
    }
    for d in &mut devices {
        d.joules = d.interfaces.iter().map(|x| x.2).sum();
        d.tail_joules = d.interfaces.iter().map(|x| x.3).sum();
    }
    Ok((devices, linear_wifi_j))
}

/// Goodput per `sample` interval from a cumulative progress record (seconds, bytes), from
/// the first record to the last: the input of the throughput CDF for file workloads.
pub fn samples_from_progress(progress: &[(f64, u64)], sample: Duration) -> Vec<f64> {
    let (Some(first), Some(last)) = (progress.first(), progress.last()) else {
        return Vec::new();
    };
    let dt = sample.as_secs_f64();
    let n = ((last.0 - first.0) / dt).ceil() as usize;
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    let mut prev = first.1;
    for k in 1..=n {
        let t = first.0 + k as f64 * dt;
        while i + 1 < progress.len() && progress[i + 1].0 <= t {
            i += 1;
        }
        let now = if k == n { last.1 } else { progress[i].1 };
        out.push(now.saturating_sub(prev) as f64 * 8.0 / dt / 1e6);
        prev = now;
    }
    out
}

/// The IP bytes of data packets that reached the primary's interfaces (its PS-Paths and
/// pipes, toward it; retransmissions, copies and headers included) in each of `n` `sample`
/// intervals from `start_us`, Mbit/s: the counterpart of a bulk download's goodput samples at
/// the radios. A goodput sample counts what the application could read in order, so it is
/// empty while the head of line is late on one path even if the others deliver; an arrival
/// sample is not. MPBond §6.4 "measured the instantaneous throughput every 100ms" for its
/// Figure 15 without saying at which of the two. Empty (no value) if the emulator's log of
/// one of those links hit its cap, rather than samples that silently miss its end.
pub fn arrival_samples(
    links: &[crate::emu::LinkReport],
    start_us: u64,
    sample: Duration,
    n: usize,
) -> Vec<f64> {
    let into_primary = || links.iter().filter(|l| reaches_primary(&l.name));
    if into_primary().any(|l| l.ba.truncated) {
        return Vec::new();
    }
    let step_us = sample.as_micros().max(1) as u64;
    let mut bytes = vec![0u64; n];
    for l in into_primary() {
        for r in l.ba.records.iter().filter(|r| {
            r.event == PacketEvent::Delivered && r.t_us >= start_us && r.size > DATA_PACKET_MIN
        }) {
            if let Some(b) = bytes.get_mut(((r.t_us - start_us) / step_us) as usize) {
                *b += u64::from(r.size);
            }
        }
    }
    let dt = sample.as_secs_f64();
    bytes.iter().map(|&b| b as f64 * 8.0 / dt / 1e6).collect()
}

/// Packets larger than this carry data (a pure ACK or a ping is smaller).
const DATA_PACKET_MIN: u32 = 200;

/// Whether a link ends at the primary (a PS-Path `ps`/`ps2` or a pipe `pNN`) rather than at a
/// helper (an HS-Path `hsK`).
fn reaches_primary(link: &str) -> bool {
    link.starts_with('p')
}

/// Writes `link,dir,t_s,bytes,event` for every packet event from the workload's start on
/// (`down` = toward the primary or the helper, `up` = away from it).
fn write_packet_log(
    path: &Path,
    links: &[crate::emu::LinkReport],
    start_us: u64,
) -> anyhow::Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(f, "link,dir,t_s,bytes,event,payload")?;
    for l in links {
        for (dir, d) in [("up", &l.ab), ("down", &l.ba)] {
            for r in d.records.iter().filter(|r| r.t_us >= start_us) {
                let t = (r.t_us - start_us) as f64 / 1e6;
                writeln!(
                    f,
                    "{},{dir},{t:.6},{},{:?},{}",
                    l.name, r.size, r.event, r.payload
                )?;
            }
        }
    }
    f.flush()?;
    Ok(())
}

/// What `count` says of every packet delivered from `start_us` on, summed.
fn bytes_after(
    records: &[crate::emu::PacketRecord],
    start_us: u64,
    count: impl Fn(&crate::emu::PacketRecord) -> u32,
) -> u64 {
    records
        .iter()
        .filter(|r| r.event == PacketEvent::Delivered && r.t_us >= start_us)
        .map(|r| u64::from(count(r)))
        .sum()
}

/// Data packets (over 200 bytes) delivered toward the primary (or, for an upload, away from
/// it) on `ps`, `ps2`, every pipe, and every HS-Path (toward its helper): each subflow's
/// share and completion, and when each helper's cellular link finished (MPBond Figure 4
/// plots all three).
fn subflow_results(links: &[LinkReport], start_us: u64, upload: bool) -> Vec<SubflowResult> {
    links
        .iter()
        .filter(|l| l.name.starts_with('p') || l.name.starts_with("hs"))
        .map(|l| {
            let dir = if upload { &l.ab } else { &l.ba };
            let data: Vec<_> = dir
                .records
                .iter()
                .filter(|r| {
                    r.event == PacketEvent::Delivered
                        && r.t_us >= start_us
                        && r.size > DATA_PACKET_MIN
                })
                .collect();
            let mut progress = Vec::new();
            let mut total = 0u64;
            let mut last_t = -1.0;
            for r in &data {
                total += u64::from(r.size);
                let t = (r.t_us - start_us) as f64 / 1e6;
                if t - last_t >= 0.05 {
                    progress.push((t, total));
                    last_t = t;
                }
            }
            let completion_s = data.last().map(|r| (r.t_us - start_us) as f64 / 1e6);
            if let Some(c) = completion_s {
                progress.push((c, total));
            }
            SubflowResult {
                link: l.name.clone(),
                completion_s,
                bytes: total,
                progress,
            }
        })
        .collect()
}

/// Starts `mpbond ROLE -c WORK/CFG.toml` in namespace `ns`, its log in `WORK/CFG.log`.
fn spawn_daemon(exe: &Path, work: &Path, ns: &str, role: &str, cfg: &str) -> anyhow::Result<Child> {
    let log = std::fs::File::create(work.join(format!("{cfg}.log")))?;
    Ok(Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(exe)
        .args([role, "-c"])
        .arg(work.join(format!("{cfg}.toml")))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?)
}

/// Dual mode (MPBond §6.6): the primary and helper 1 each run a primary and a helper in one
/// process (`mpbond run`), each the other's helper over their pipe; the proxy serves both.
fn start_mpbond_dual(tb: &Testbed, work: &Path, exe: &Path) -> anyhow::Result<Procs> {
    let proxy = KeyPair::generate();
    let a = KeyPair::generate();
    let b = KeyPair::generate();
    proxy.save(&work.join("proxy.key"))?;
    a.save(&work.join("a.key"))?;
    b.save(&work.join("b.key"))?;
    let pipe = *tb
        .pipes
        .first()
        .and_then(|p| p.first())
        .ok_or_else(|| anyhow::anyhow!("dual mode needs a pipe"))?;
    let (pa, pb) = addr::pipe(pipe);
    let (hs_ip, _) = addr::hs(0);
    let proxy_addr = SocketAddr::from((addr::PS_PROXY, 7000));
    std::fs::write(
        work.join("proxy.toml"),
        format!(
            "key = \"proxy.key\"\nlog = \"warn\"\n{}[proxy]\nlisten = \"0.0.0.0:7000\"\ndeny_origins = []\nallow = [{{ name = \"a\", key = \"{}\" }}, {{ name = \"b\", key = \"{}\" }}]\n",
            crate::sched::control_section(),
            a.public,
            b.public
        ),
    )?;
    // One device: its WAN address, its pipe address, the other's pipe address and key.
    let device = |key: &str,
                  wan: std::net::IpAddr,
                  me: std::net::IpAddr,
                  other: std::net::IpAddr,
                  other_key: &str| {
        format!(
            "key = \"{key}.key\"\nlog = \"warn\"\n{}[primary]\nproxy = \"{proxy_addr}\"\nproxy_key = \"{}\"\nps_bind = \"{wan}\"\nsocks = \"127.0.0.1:1080\"\n[[primary.helper]]\nname = \"peer\"\nkey = \"{other_key}\"\n[[primary.helper.pipe]]\nname = \"pipe\"\naddr = \"{other}:7100\"\nbind = \"{me}\"\n[helper]\nlisten = \"{me}:7100\"\nhs_bind = \"{wan}\"\nallow = [{{ name = \"peer\", key = \"{other_key}\" }}]\n",
            crate::sched::control_section(),
            proxy.public
        )
    };
    std::fs::write(
        work.join("a.toml"),
        device(
            "a",
            addr::PS_PRIMARY.into(),
            pa.into(),
            pb.into(),
            &b.public.to_string(),
        ),
    )?;
    std::fs::write(
        work.join("b.toml"),
        device(
            "b",
            hs_ip.into(),
            pb.into(),
            pa.into(),
            &a.public.to_string(),
        ),
    )?;
    let mut procs = Procs(Vec::new());
    let spawn = |ns: &str, role: &str, cfg: &str| spawn_daemon(exe, work, ns, role, cfg);
    procs
        .0
        .push(("proxy".into(), spawn(&tb.names.proxy, "proxy", "proxy")?));
    procs
        .0
        .push(("primary".into(), spawn(&tb.names.primary, "run", "a")?));
    procs
        .0
        .push(("helper1".into(), spawn(&tb.names.helpers[0], "run", "b")?));
    Ok(procs)
}

/// The `[tuning]` table an mpbond variant writes into every daemon's configuration (empty for
/// the variants that change no tuning): the one place a lab variant turns a daemon's dial.
fn variant_tuning(variant: MpbondVariant) -> String {
    let fixed = match variant {
        MpbondVariant::Eco(mw) => {
            return format!("[tuning]\ntime_value = {:?}\n", f64::from(mw) / 1000.0)
        }
        MpbondVariant::Paper => "[tuning]\npams_lookahead = 0.0\npams_pad = \"paper\"\n",
        MpbondVariant::PaperPad => "[tuning]\npams_pad = \"paper\"\n",
        MpbondVariant::LossHold => "[tuning]\nloss_hold = 3.0\n",
        MpbondVariant::NoDrainFloor => "[tuning]\ndrain_floor = 0.0\n",
        MpbondVariant::Shortfall => "[tuning]\nrecall_shortfall = 1.0\n",
        MpbondVariant::TailCopy => "[tuning]\ntail_copy = true\n",
        MpbondVariant::LateBind => "[tuning]\nlate_bind = \"100ms\"\n",
        MpbondVariant::NoPipeMinRtt => "[tuning]\npipe_min_rtt = false\n",
        MpbondVariant::NoReinject => {
            "[tuning]\npams_reinjection = false\nlate_rescue = false\nloss_rescue = false\nwindow_rescue = false\n"
        }
        MpbondVariant::NoRescue => "[tuning]\nwindow_rescue = false\n",
        MpbondVariant::NoLateRescue => "[tuning]\nlate_rescue = false\n",
        MpbondVariant::NoLossRescue => "[tuning]\nloss_rescue = false\n",
        MpbondVariant::NoRamp => "[tuning]\nramp_records = false\n",
        MpbondVariant::FixedSegments => "[tuning]\nsegment_time = \"0ms\"\n",
        MpbondVariant::Unpaced => "[tuning]\npacing = false\n",
        MpbondVariant::DeepLowat => "[tuning]\nlowat = \"64KiB\"\n",
        MpbondVariant::NoGuard => "[tuning]\nqueue_guard = 0.0\n",
        MpbondVariant::NoCcRestart => "[tuning]\ncc_restart = \"0ms\"\n",
        MpbondVariant::Bbr => "[tuning]\ncongestion = \"bbr\"\n",
        MpbondVariant::HsBbr => "[tuning]\nhs_congestion = \"bbr\"\n",
        MpbondVariant::HsGuard => "[tuning]\nhs_queue_guard = 1.1\n",
        MpbondVariant::NoHsGuard => "[tuning]\nhs_queue_guard = 0.0\n",
        MpbondVariant::PsGuard => "[tuning]\nps_queue_guard = 1.0\n",
        MpbondVariant::NoPsGuard => "[tuning]\nps_queue_guard = 0.0\n",
        MpbondVariant::NoStale => "[tuning]\ndead_timeout = \"0s\"\n",
        _ => "",
    };
    fixed.to_string()
}

/// Writes keys and configs and starts proxy, helpers and primary in their namespaces. Every
/// device declares the scenario's radios of its links (`wan_radio`, `pipe_radio`), which
/// only `mpbond-eco`'s proxy weighs.
fn start_mpbond(
    tb: &Testbed,
    work: &Path,
    exe: &Path,
    variant: MpbondVariant,
    helpers: usize,
    radios: &[(String, Radio)],
) -> anyhow::Result<Procs> {
    let radio = |link: &str, key: &str| {
        radios
            .iter()
            .find(|(n, _)| n == link)
            .map_or(String::new(), |(_, r)| {
                format!("{key} = \"{}\"\n", r.name())
            })
    };
    let scheduler = if variant == MpbondVariant::Naive {
        "minrtt"
    } else {
        "pams"
    };
    // The same tuning on every daemon (both ends of a link should agree).
    let tuning = variant_tuning(variant);
    let helper_extra = match variant {
        MpbondVariant::FixedAlways => "feedback = \"always\"\n",
        MpbondVariant::FixedOnDemand => "feedback = \"on-demand\"\n",
        MpbondVariant::MeasuredBuffering => "buffering_estimate = \"measured\"\n",
        _ => "",
    };
    let proxy = KeyPair::generate();
    let phone = KeyPair::generate();
    proxy.save(&work.join("proxy.key"))?;
    phone.save(&work.join("phone.key"))?;
    let proxy_addr = SocketAddr::from((addr::PS_PROXY, 7000));
    std::fs::write(
        work.join("proxy.toml"),
        format!(
            "key = \"proxy.key\"\nlog = \"warn\"\n{}{tuning}[proxy]\nlisten = \"0.0.0.0:7000\"\nscheduler = \"{scheduler}\"\ndeny_origins = []\nallow = [{{ name = \"phone\", key = \"{}\" }}]\n",
            crate::sched::control_section(),
            phone.public
        ),
    )?;
    let early_data = variant != MpbondVariant::WaitOpen;
    let mut primary = format!(
        "key = \"phone.key\"\nlog = \"warn\"\n{}{tuning}[primary]\nproxy = \"{proxy_addr}\"\nproxy_key = \"{}\"\nps_bind = \"{}\"\nsocks = \"127.0.0.1:1080\"\nscheduler = \"{scheduler}\"\nearly_data = {early_data}\n{}",
        crate::sched::control_section(),
        proxy.public,
        addr::PS_PRIMARY,
        radio("ps", "wan_radio"),
    );
    let mut procs = Procs(Vec::new());
    let spawn = |ns: &str, role: &str, cfg: &str| spawn_daemon(exe, work, ns, role, cfg);
    procs
        .0
        .push(("proxy".into(), spawn(&tb.names.proxy, "proxy", "proxy")?));
    for (i, pipes) in tb.pipes.iter().enumerate().take(helpers) {
        let k = KeyPair::generate();
        k.save(&work.join(format!("helper{}.key", i + 1)))?;
        let (hs_ip, _) = addr::hs(i);
        std::fs::write(
            work.join(format!("helper{}.toml", i + 1)),
            format!(
                "key = \"helper{}.key\"\nlog = \"warn\"\n{tuning}[helper]\nlisten = \"0.0.0.0:7100\"\nhs_bind = \"{hs_ip}\"\n{helper_extra}{}{}allow = [{{ name = \"phone\", key = \"{}\" }}]\n",
                i + 1,
                radio(&format!("hs{}", i + 1), "wan_radio"),
                radio(&format!("p{}1", i + 1), "pipe_radio"),
                phone.public
            ),
        )?;
        primary.push_str(&format!(
            "[[primary.helper]]\nname = \"helper{}\"\nkey = \"{}\"\n",
            i + 1,
            k.public
        ));
        for &p in pipes {
            let (pa, pb) = addr::pipe(p);
            primary.push_str(&format!(
                "[[primary.helper.pipe]]\nname = \"pipe{p}\"\naddr = \"{pb}:7100\"\nbind = \"{pa}\"\n"
            ));
        }
        let device = format!("helper{}", i + 1);
        let child = spawn(&tb.names.helpers[i], "helper", &device)?;
        procs.0.push((device, child));
    }
    std::fs::write(work.join("primary.toml"), primary)?;
    std::thread::sleep(Duration::from_millis(200));
    procs.0.push((
        "primary".into(),
        spawn(&tb.names.primary, "primary", "primary")?,
    ));
    Ok(procs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant's tuning is one the daemons accept (their `Tuning` refuses unknown
    /// keys, so a misspelt dial fails here, not as a daemon that will not start in a lab
    /// run), and each variant that writes one changes the defaults, but the two kept only so
    /// that old commands still run.
    #[test]
    fn every_variant_writes_a_tuning_the_daemons_accept_and_that_changes_something() {
        #[derive(serde::Deserialize)]
        struct Doc {
            #[serde(default)]
            tuning: mpbond_daemon::config::Tuning,
        }
        let defaults = mpbond_daemon::config::Tuning::default();
        let mut written = 0;
        for kind in crate::scheme::Scheme::kinds() {
            let crate::scheme::Kind::Mpbond(v) = kind else {
                continue;
            };
            let text = variant_tuning(v);
            let doc: Doc = toml::from_str(&text)
                .unwrap_or_else(|e| panic!("{v:?}'s tuning {text:?} does not parse: {e}"));
            if text.is_empty() {
                continue;
            }
            written += 1;
            let same_as_default = matches!(v, MpbondVariant::HsGuard | MpbondVariant::NoPsGuard);
            assert_eq!(doc.tuning == defaults, same_as_default, "{v:?}: {text:?}");
        }
        assert!(written >= 20, "only {written} variants write a tuning");
        let no_ramp: Doc = toml::from_str(&variant_tuning(MpbondVariant::NoRamp)).unwrap();
        assert!(defaults.ramp_records && !no_ramp.tuning.ramp_records);
    }

    #[test]
    fn every_scheme_leads_a_repetition_in_turn() {
        let s = ["a", "b", "c"];
        assert_eq!(run_order(&s, 0), ["a", "b", "c"]);
        assert_eq!(run_order(&s, 1), ["b", "c", "a"]);
        assert_eq!(run_order(&s, 2), ["c", "a", "b"]);
        assert_eq!(run_order(&s, 3), ["a", "b", "c"]);
        let pair = ["x", "y"];
        let firsts: Vec<&str> = (0..4).map(|r| run_order(&pair, r)[0]).collect();
        assert_eq!(firsts, ["x", "y", "x", "y"]);
        assert!(run_order::<&str>(&[], 5).is_empty());
    }

    /// mpbond's daemons always get [`WARMUP`] to connect; a baseline starts at
    /// [`BASELINE_LEAD`] and, when that was too short, retries with [`WARMUP`].
    #[test]
    fn a_baseline_starts_early_and_retries_with_the_longer_lead() {
        assert!(BASELINE_LEAD < WARMUP);
        for kind in Scheme::kinds() {
            let scheme = Scheme::from(kind);
            let first = ready_by(scheme, 1);
            if scheme.is_mpbond() {
                assert_eq!(first, WARMUP, "{scheme}");
            } else {
                assert_eq!(first, BASELINE_LEAD, "{scheme}");
            }
            assert_eq!(ready_by(scheme, 2), WARMUP, "{scheme}");
            assert_eq!(ready_by(scheme, 3), WARMUP, "{scheme}");
        }
    }

    /// A run whose testbed was not ready runs again in a fresh scratch directory, up
    /// to the limit; its last failure is what the caller sees; other errors never repeat.
    #[test]
    fn only_a_run_whose_testbed_was_not_ready_runs_again_each_time_in_a_fresh_directory() {
        let work = Path::new("/scratch/mpbond-0-0");
        let mut dirs = Vec::new();
        let mut numbers = Vec::new();
        let r = retry_not_ready(work, 3, |d, n| {
            dirs.push(d.to_path_buf());
            numbers.push(n);
            if dirs.len() < 3 {
                Err(NotReady(format!("try {}", dirs.len())).into())
            } else {
                Ok(7)
            }
        });
        assert_eq!(r.expect("the third attempt succeeds"), 7);
        assert_eq!(
            dirs,
            [work.into(), work.join("attempt2"), work.join("attempt3")]
        );
        assert_eq!(numbers, [1, 2, 3]);

        let mut n = 0;
        let r: anyhow::Result<()> = retry_not_ready(work, 3, |_, _| {
            n += 1;
            Err(NotReady(format!("try {n}")).into())
        });
        let e = r.expect_err("three failures are a failure");
        assert_eq!(n, 3);
        assert!(e.to_string().contains("try 3"), "the last failure: {e}");

        let mut n = 0;
        let r: anyhow::Result<()> = retry_not_ready(work, 3, |_, _| {
            n += 1;
            anyhow::bail!("the origin did not answer")
        });
        assert!(r.is_err());
        assert_eq!(n, 1, "any other failure stops at once");
    }

    /// Arrival samples count the data packets delivered toward the primary on its PS-Path
    /// and pipes, in the interval they arrived: not ACKs, not the HS-Path (which ends at the
    /// helper), not the other direction, nothing before the workload started or after the
    /// last interval.
    #[test]
    fn arrival_samples_count_data_reaching_the_primary() {
        use crate::emu::{DirReport, LinkReport, PacketRecord};
        let rec = |t_us: u64, size: u32, event: PacketEvent| PacketRecord {
            t_us,
            size,
            payload: size.saturating_sub(52),
            event,
        };
        let dir = |records: Vec<PacketRecord>| DirReport {
            records,
            ..DirReport::default()
        };
        let start = 1_000_000;
        let links = vec![
            LinkReport {
                name: "ps".into(),
                // Toward the primary: two data packets in the first 100 ms, one in the third,
                // an ACK-sized one, a drop, one before the start and one after the end.
                ba: dir(vec![
                    rec(start - 10, 1500, PacketEvent::Delivered),
                    rec(start + 10_000, 1500, PacketEvent::Delivered),
                    rec(start + 90_000, 1000, PacketEvent::Delivered),
                    rec(start + 95_000, 66, PacketEvent::Delivered),
                    rec(start + 150_000, 1500, PacketEvent::QueueDrop),
                    rec(start + 250_000, 1500, PacketEvent::Delivered),
                    rec(start + 300_000, 1500, PacketEvent::Delivered),
                ]),
                // Away from it: the primary's own uploads do not count.
                ab: dir(vec![rec(start + 20_000, 1500, PacketEvent::Delivered)]),
            },
            LinkReport {
                name: "hs1".into(),
                ab: dir(vec![]),
                ba: dir(vec![rec(start + 20_000, 1500, PacketEvent::Delivered)]),
            },
            LinkReport {
                name: "p11".into(),
                ab: dir(vec![]),
                ba: dir(vec![rec(start + 120_000, 1250, PacketEvent::Delivered)]),
            },
        ];
        let a = arrival_samples(&links, start, Duration::from_millis(100), 3);
        let mbps = |bytes: f64| bytes * 8.0 / 0.1 / 1e6;
        assert_eq!(a, vec![mbps(2500.0), mbps(1250.0), mbps(1500.0)]);
        // A log that hit its cap gives no samples rather than short ones.
        let mut capped = links;
        capped[2].ba.truncated = true;
        assert!(arrival_samples(&capped, start, Duration::from_millis(100), 3).is_empty());
    }

    #[test]
    fn samples_cover_the_transfer_and_sum_to_its_bytes() {
        // 1 MB over 0.25 s, recorded unevenly.
        let p = [
            (0.0, 0),
            (0.05, 100_000),
            (0.12, 400_000),
            (0.25, 1_000_000),
        ];
        let s = samples_from_progress(&p, Duration::from_millis(100));
        assert_eq!(s.len(), 3);
        let bytes: f64 = s.iter().map(|m| m * 1e6 / 8.0 * 0.1).sum();
        assert!((bytes - 1e6).abs() < 1.0, "{bytes}");
        assert!((s[0] - 8.0).abs() < 1e-9, "{s:?}"); // 100 KB in the first 100 ms
        assert!(samples_from_progress(&[], Duration::from_millis(100)).is_empty());
    }
}
