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

/// On-CPU seconds of process `pid` so far (all its live threads), or `None` when it is gone
/// or `/proc` does not tell.
pub fn process_cpu_s(pid: u32) -> Option<f64> {
    let mut ns: u128 = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(t) = t else { continue };
        // A thread may exit between the listing and the read: skip it.
        let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) else {
            continue;
        };
        ns += s.split_whitespace().next()?.parse::<u128>().ok()?;
    }
    Some(ns as f64 / 1e9)
}

/// One daemon's CPU use over the workload.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct DaemonCpu {
    /// The device it runs on: `primary`, `helper1`, ... or `proxy`.
    pub device: String,
    /// On-CPU seconds from the workload's start to its end.
    pub cpu_s: f64,
}

/// CPU readings of named processes taken at the workload's start; [`Self::finish`] turns
/// them into each one's CPU seconds since.
pub struct CpuMeter {
    start: Vec<(String, u32, f64)>,
}

impl CpuMeter {
    /// Reads every `(device, pid)` now; processes `/proc` cannot read are left out.
    pub fn start(procs: &[(String, u32)]) -> CpuMeter {
        CpuMeter {
            start: procs
                .iter()
                .filter_map(|(d, pid)| Some((d.clone(), *pid, process_cpu_s(*pid)?)))
                .collect(),
        }
    }

    /// Each process's CPU seconds since [`Self::start`] (a process that died in between is
    /// left out rather than reported as 0).
    pub fn finish(self) -> Vec<DaemonCpu> {
        self.start
            .into_iter()
            .filter_map(|(device, pid, t0)| {
                Some(DaemonCpu {
                    device,
                    cpu_s: (process_cpu_s(pid)? - t0).max(0.0),
                })
            })
            .collect()
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
        let r = meter.finish();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].device, "self");
        // Scheduling on a shared machine may take some of the spin away, not add to it; the
        // other test threads of this process may add a little.
        assert!(
            r[0].cpu_s > 0.05 && r[0].cpu_s < wall * 4.0,
            "{} s of CPU in {wall} s",
            r[0].cpu_s
        );
    }

    #[test]
    fn a_process_that_is_gone_is_left_out() {
        // PIDs above pid_max (at most 2^22) never exist.
        assert_eq!(process_cpu_s(u32::MAX), None);
        let meter = CpuMeter::start(&[("gone".into(), u32::MAX)]);
        assert!(meter.finish().is_empty());
    }
}
