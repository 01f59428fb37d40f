//! CPU time of the scheme's daemons during a workload, for MPBond §6.8's overhead check
//! ("the extra CPU utilization compared to kibbutz is no more than 4% for both the primary
//! and the helper").
//!
//! A process's CPU time is the sum of its threads' on-CPU nanoseconds from
//! `/proc/PID/task/*/schedstat` (first field): exact to the nanosecond, where `stat`'s
//! utime and stime count 10 ms ticks, too coarse for a download of a few seconds. A thread
//! that exits between two readings takes its time with it; the daemons keep their threads
//! for their whole life, so nothing is lost in practice.
//!
//! Kibbutz and COMBINE run no mpbond process on the devices (the kernel's MPTCP and
//! forwarding, and COMBINE's agents inside the lab), so only mpbond's daemons are measured;
//! kibbutz's own cost is kernel time that no process is charged for.
//!
//! The figures are small (a few percent of a core) and the machine is a shared VM, so each
//! run also records the host around them ([`HostCpu`]): the hypervisor's steal, each
//! daemon's wait on a run queue and its kernel share, and a probe thread that times the same
//! fixed work every [`PROBE_EVERY`]. They showed that the rare runs at three to six times
//! the usual CPU are runs the hypervisor stole from: the extra time is kernel time, mpbond's
//! user time and the probe's work stay level. Runs above [`STEAL_LIMIT`] are left out of
//! the CPU claims.

/// How long a process's threads have run and have waited to run, from schedstat.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SchedTimes {
    /// On-CPU seconds (schedstat's first field). With paravirtualised time accounting the
    /// hypervisor's steal is not in it.
    pub run_s: f64,
    /// Seconds spent runnable but waiting on a run queue (schedstat's second field): what
    /// the guest's own other work cost the process in latency.
    pub wait_s: f64,
}

/// [`SchedTimes`] of process `pid` so far (all its live threads), or `None` when it is gone
/// or `/proc` does not tell.
pub fn process_sched(pid: u32) -> Option<SchedTimes> {
    let (mut run, mut wait): (u128, u128) = (0, 0);
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(t) = t else { continue };
        // A thread may exit between the listing and the read: skip it.
        let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) else {
            continue;
        };
        let mut f = s.split_whitespace();
        run += f.next()?.parse::<u128>().ok()?;
        wait += f.next()?.parse::<u128>().ok()?;
    }
    Some(SchedTimes {
        run_s: run as f64 / 1e9,
        wait_s: wait as f64 / 1e9,
    })
}

/// Kernel-mode CPU seconds of process `pid` so far (`/proc/PID/stat`'s stime, field 15, in
/// USER_HZ ticks), or `None` when it is gone or the line does not parse.
pub fn process_sys_s(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from its end.
    let rest = &s[s.rfind(')')? + 1..];
    let stime: u64 = rest.split_whitespace().nth(12)?.parse().ok()?;
    Some(stime as f64 / USER_HZ)
}

/// The unit of `/proc/stat`'s and `/proc/PID/stat`'s times, which Linux's ABI fixes at 100
/// per second on every architecture this runs on.
const USER_HZ: f64 = 100.0;

/// On-CPU seconds of process `pid` so far (all its live threads), or `None` when it is gone
/// or `/proc` does not tell.
pub fn process_cpu_s(pid: u32) -> Option<f64> {
    Some(process_sched(pid)?.run_s)
}

/// One daemon's CPU use over the workload.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct DaemonCpu {
    /// The device it runs on: `primary`, `helper1`, ... or `proxy`.
    pub device: String,
    /// On-CPU seconds from the workload's start to its end.
    pub cpu_s: f64,
    /// Seconds its threads waited runnable on a run queue over the workload; 0 in results
    /// written before it was recorded.
    #[serde(default)]
    pub wait_s: f64,
    /// The part of [`Self::cpu_s`] spent in the kernel, from `/proc/PID/stat`'s stime (in
    /// 10 ms clock ticks, so rough over a short workload): whether a run's extra CPU went to
    /// system calls and packets or to mpbond's own code. 0 in results written before it.
    #[serde(default)]
    pub sys_s: f64,
}

/// The machine around a run's daemons over the workload, to tell a run whose daemons did
/// more work from one on a slower or busier host (MPBond §6.8's CPU figures are small
/// enough that one such run moves a mean by a point).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct HostCpu {
    /// Seconds the hypervisor ran something else while the guest wanted its CPUs (steal,
    /// `/proc/stat`), summed over CPUs.
    pub steal_s: f64,
    /// On-CPU seconds of the lab's own process (the link emulator, the client and the
    /// probes below).
    pub lab_s: f64,
    /// How many [`calibration_spin`] probes ran over the workload, one every
    /// [`PROBE_EVERY`].
    pub probes: u32,
    /// Their mean thread CPU milliseconds for the same fixed work: it rises on a core that
    /// runs slower (a busy hyperthread sibling, a lower clock) and where time the hypervisor
    /// took is charged to whatever ran.
    pub probe_cpu_ms: f64,
    /// The largest probe's CPU milliseconds.
    pub probe_cpu_max_ms: f64,
    /// Their mean wall milliseconds: above the CPU figure by what preemption and steal
    /// took from the probe.
    pub probe_wall_ms: f64,
    /// The mean thread CPU milliseconds of [`kernel_spin`]'s fixed system calls, run with
    /// each probe: where the daemons spend their time (sockets), which a slower path into
    /// and through the kernel makes dearer while the user-space spin stays level. 0 in
    /// results written before it.
    #[serde(default)]
    pub probe_sys_ms: f64,
    /// Wall seconds from the measurement's start to its end, the time every share of a core
    /// of this run is taken over (its steal and its daemons' CPU). A download's is its
    /// `seconds`, but a chunks workload's `seconds` is its mean chunk time while the
    /// measurement spans all its chunks and pauses. 0 in results written before it; see
    /// `RunResult::cpu_window_s`.
    #[serde(default)]
    pub window_s: f64,
}

/// The hypervisor's steal, as a share of one core over the workload, above which a run's
/// daemon CPU measures the host rather than mpbond, and the CPU claims leave the run out.
///
/// On this machine (a KVM guest) the daemons' CPU grows with the steal while their user
/// time stays level: in 16 runs of 14 at 20 MB (lab-results/h65c-14) the primary read
/// 2.8-3.3% of a core (29-52% of it in the kernel) with at most 1% stolen, and 5.2-18.6%
/// (63-95% in the kernel) with 13-54% stolen; the probe's fixed user-space work cost the
/// same throughout. The limit lets a little of the host in: in an earlier batch, runs with
/// 2.1-2.9% stolen read 3.2-3.5% on the primary, those with less 2.4-3.2%.
pub const STEAL_LIMIT: f64 = 0.03;

/// How often the CPU probe runs its fixed work during a workload (each probe costs about
/// 0.5 ms of one core, 0.3-0.4 ms in user space and 0.15 ms in socket calls: 0.5% of a core,
/// charged to the lab's process).
pub const PROBE_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// `/proc/stat`'s aggregate steal, in seconds summed over CPUs, or `None` when it cannot be
/// read.
fn host_steal_s() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let line = s.lines().find(|l| l.starts_with("cpu "))?;
    // cpu user nice system idle iowait irq softirq steal ...
    let steal: u64 = line.split_whitespace().nth(8)?.parse().ok()?;
    Some(steal as f64 / USER_HZ)
}

/// Words of [`calibration_spin`]'s buffer: 256 KiB, which fits a core's L2 cache.
pub const SPIN_WORDS: usize = 32 * 1024;

/// Runs a fixed amount of work (a pseudo-random walk over `buf`, [`SPIN_WORDS`] long,
/// 0.3-0.4 ms on this machine's cores) and returns the thread CPU and wall milliseconds it
/// took. The caller keeps the buffer between spins, so no page faults land in the timed
/// work: it does not depend on anything outside, and its cost moves only with the core it
/// ran on and with how that core's time is accounted.
pub fn calibration_spin(buf: &mut [u64; SPIN_WORDS]) -> (f64, f64) {
    const STEPS: usize = 200_000;
    let wall = std::time::Instant::now();
    let t0 = mpbond_daemon::sys::thread_cpu_seconds();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..STEPS {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let i = (x >> 40) as usize % SPIN_WORDS;
        buf[i] = buf[i].wrapping_add(x);
    }
    std::hint::black_box(&*buf);
    let cpu = (mpbond_daemon::sys::thread_cpu_seconds() - t0) * 1e3;
    (cpu, wall.elapsed().as_secs_f64() * 1e3)
}

/// Sends a 64-byte datagram across a Unix socket pair and reads it back, 100 times, and
/// returns the thread CPU milliseconds it took: a fixed amount of work in the kernel's
/// socket paths. `None` when a call fails.
pub fn kernel_spin(
    a: &std::os::unix::net::UnixDatagram,
    b: &std::os::unix::net::UnixDatagram,
) -> Option<f64> {
    let (out, mut back) = ([7u8; 64], [0u8; 64]);
    let t0 = mpbond_daemon::sys::thread_cpu_seconds();
    for _ in 0..100 {
        a.send(&out).ok()?;
        b.recv(&mut back).ok()?;
    }
    Some((mpbond_daemon::sys::thread_cpu_seconds() - t0) * 1e3)
}

/// One probe: [`calibration_spin`]'s CPU and wall milliseconds and [`kernel_spin`]'s.
type ProbeReading = (f64, f64, Option<f64>);

/// A thread that runs [`calibration_spin`] and [`kernel_spin`] every [`PROBE_EVERY`] until
/// stopped.
struct Probe {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<Vec<ProbeReading>>,
}

impl Probe {
    fn start() -> std::io::Result<Probe> {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("cpu-probe".into())
            .spawn(move || {
                let pair = std::os::unix::net::UnixDatagram::pair().ok();
                let mut buf = Box::new([0u64; SPIN_WORDS]);
                // Fault the buffer in before the first timed spin.
                calibration_spin(&mut buf);
                let mut out = Vec::new();
                loop {
                    let (cpu, wall) = calibration_spin(&mut buf);
                    let sys = pair.as_ref().and_then(|(a, b)| kernel_spin(a, b));
                    out.push((cpu, wall, sys));
                    match stopped.recv_timeout(PROBE_EVERY) {
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        _ => return out,
                    }
                }
            })?;
        Ok(Probe { stop, thread })
    }

    /// The probes' readings; empty when the thread panicked.
    fn finish(self) -> Vec<ProbeReading> {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_default()
    }
}

/// CPU readings of named processes taken at the workload's start; [`Self::finish`] turns
/// them into each one's CPU seconds since, and the host's.
pub struct CpuMeter {
    started: std::time::Instant,
    start: Vec<(String, u32, SchedTimes, f64)>,
    steal: Option<f64>,
    lab: Option<f64>,
    probe: Option<Probe>,
}

impl CpuMeter {
    /// Reads every `(device, pid)`, the host and this process now, and starts the probe;
    /// processes `/proc` cannot read are left out.
    pub fn start(procs: &[(String, u32)]) -> CpuMeter {
        CpuMeter {
            started: std::time::Instant::now(),
            start: procs
                .iter()
                .filter_map(|(d, pid)| {
                    Some((d.clone(), *pid, process_sched(*pid)?, process_sys_s(*pid)?))
                })
                .collect(),
            steal: host_steal_s(),
            lab: process_cpu_s(std::process::id()),
            probe: Probe::start()
                .map_err(|e| tracing::warn!(error = %e, "no CPU probe for this run"))
                .ok(),
        }
    }

    /// Each process's CPU seconds since [`Self::start`] (a process that died in between is
    /// left out rather than reported as 0), and the host's over the same time (`None` when
    /// `/proc` did not tell or the probe did not run).
    pub fn finish(self) -> (Vec<DaemonCpu>, Option<HostCpu>) {
        let window_s = self.started.elapsed().as_secs_f64();
        let probes = self.probe.map(Probe::finish).unwrap_or_default();
        let daemons = self
            .start
            .into_iter()
            .filter_map(|(device, pid, t0, sys0)| {
                let t1 = process_sched(pid)?;
                let sys = process_sys_s(pid)? - sys0;
                Some(DaemonCpu {
                    device,
                    cpu_s: (t1.run_s - t0.run_s).max(0.0),
                    wait_s: (t1.wait_s - t0.wait_s).max(0.0),
                    sys_s: sys.max(0.0),
                })
            })
            .collect();
        let host = (|| {
            let s0 = self.steal?;
            let s1 = host_steal_s()?;
            let lab = process_cpu_s(std::process::id())? - self.lab?;
            if probes.is_empty() {
                return None;
            }
            let n = probes.len() as f64;
            Some(HostCpu {
                steal_s: (s1 - s0).max(0.0),
                lab_s: lab.max(0.0),
                probes: probes.len() as u32,
                probe_cpu_ms: probes.iter().map(|p| p.0).sum::<f64>() / n,
                probe_cpu_max_ms: probes.iter().map(|p| p.0).fold(0.0, f64::max),
                probe_wall_ms: probes.iter().map(|p| p.1).sum::<f64>() / n,
                probe_sys_ms: {
                    let sys: Vec<f64> = probes.iter().filter_map(|p| p.2).collect();
                    sys.iter().sum::<f64>() / sys.len().max(1) as f64
                },
                window_s,
            })
        })();
        (daemons, host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spinning for a while shows up as at least most of that time, and no more than the
    /// wall time (this process's other threads are idle test threads).
    #[test]
    fn a_busy_process_is_charged_its_cpu_time() {
        let me = std::process::id();
        let meter = CpuMeter::start(&[("self".into(), me)]);
        let t0 = std::time::Instant::now();
        let mut x: u64 = 1;
        while t0.elapsed() < std::time::Duration::from_millis(200) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let wall = t0.elapsed().as_secs_f64();
        let (r, host) = meter.finish();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].device, "self");
        // Scheduling on a shared machine may take some of the spin away, not add to it; the
        // other test threads of this process may add a little.
        assert!(
            r[0].cpu_s > 0.05 && r[0].cpu_s < wall * 4.0,
            "{} s of CPU in {wall} s",
            r[0].cpu_s
        );
        // The lab's own time is this process's.
        let h = host.expect("/proc/stat and schedstat are readable on Linux");
        assert!((h.lab_s - r[0].cpu_s).abs() < 0.05, "{h:?} against {r:?}");
        // The probe ran at the start and every 100 ms of the 200 ms spin.
        assert!(h.probes >= 2, "{h:?}");
        assert!(
            h.probe_cpu_ms > 0.0 && h.probe_cpu_ms <= h.probe_cpu_max_ms,
            "{h:?}"
        );
        assert!(h.probe_wall_ms >= h.probe_cpu_ms * 0.9, "{h:?}");
        assert!(h.probe_sys_ms > 0.0, "{h:?}");
        // The spin ran in user space; the kernel's share stays within the process's CPU.
        assert!(r[0].sys_s <= r[0].cpu_s + 0.02, "{r:?}");
        assert!(h.steal_s >= 0.0 && r[0].wait_s >= 0.0);
        // The window spans the spin, and the shares are taken over it.
        assert!(
            h.window_s >= wall && h.window_s < wall + 1.0,
            "{h:?} in {wall} s"
        );
    }

    #[test]
    fn a_process_that_is_gone_is_left_out() {
        // PIDs above pid_max (at most 2^22) never exist.
        assert_eq!(process_cpu_s(u32::MAX), None);
        let meter = CpuMeter::start(&[("gone".into(), u32::MAX)]);
        assert!(meter.finish().0.is_empty());
    }
}
