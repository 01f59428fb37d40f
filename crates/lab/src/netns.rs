//! Network namespaces and the commands that configure them, with clean-up that runs on
//! success, on error and on Ctrl-C (the owner drops the [`Namespaces`] guard; processes are
//! killed first so each namespace can go).

use std::process::Command;

/// Errors setting up the testbed.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// A command failed.
    #[error("`{cmd}` failed: {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// What it printed.
        stderr: String,
    },
    /// A command could not start.
    #[error("cannot run `{cmd}`: {source}")]
    Spawn {
        /// The command line.
        cmd: String,
        /// Why.
        source: std::io::Error,
    },
    /// Other I/O.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Runs a command, failing with its stderr.
pub fn sh(args: &[&str]) -> Result<(), NetError> {
    let cmd = args.join(" ");
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|source| NetError::Spawn {
            cmd: cmd.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(NetError::Command {
            cmd,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Why the lab cannot run here, if it cannot: it needs root (CAP_NET_ADMIN and
/// CAP_SYS_ADMIN for namespaces), `ip` and `/dev/net/tun`.
pub fn check_privileges() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    #[allow(unsafe_code)]
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Err(
            "mpbond lab creates network namespaces and TUN devices and needs root: \
                    run it with sudo (or as root in a container with CAP_NET_ADMIN and \
                    CAP_SYS_ADMIN)"
                .into(),
        );
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Err("mpbond lab needs the `ip` command (apt-get install iproute2)".into());
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Err("mpbond lab needs /dev/net/tun (modprobe tun)".into());
    }
    Ok(())
}

/// Every namespace this process created and has not deleted yet, for [`cleanup_all`].
static ACTIVE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Deletes every namespace this process still has (killing what runs in them). Called from
/// the signal handler of `mpbond lab`, so Ctrl-C leaves nothing behind even mid-run.
pub fn cleanup_all() {
    let names: Vec<String> = ACTIVE
        .lock()
        .map(|mut v| v.drain(..).collect())
        .unwrap_or_default();
    for n in names.iter().rev() {
        delete(n);
    }
}

fn delete(n: &str) {
    // Whatever still runs in it dies with it: `ip netns pids` then kill.
    if let Ok(out) = Command::new("ip").args(["netns", "pids", n]).output() {
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            let _ = Command::new("kill").args(["-9", pid]).output();
        }
    }
    let _ = Command::new("ip").args(["netns", "del", n]).output();
}

/// A set of namespaces deleted on drop.
#[derive(Debug, Default)]
pub struct Namespaces {
    names: Vec<String>,
}

impl Namespaces {
    /// Creates namespace `name` with its loopback up and no TCP metrics cache (so one run
    /// cannot inherit the previous run's ssthresh). Forwarding and reverse-path filtering are
    /// set per device once the testbed's devices are in place (`topo`).
    pub fn add(&mut self, name: &str) -> Result<(), NetError> {
        sh(&["ip", "netns", "add", name])?;
        self.names.push(name.to_string());
        if let Ok(mut v) = ACTIVE.lock() {
            v.push(name.to_string());
        }
        sh(&["ip", "-n", name, "link", "set", "lo", "up"])?;
        sh(&[
            "ip",
            "netns",
            "exec",
            name,
            "sysctl",
            "-qw",
            "net.ipv4.tcp_no_metrics_save=1",
        ])?;
        Ok(())
    }

    /// Runs `ip ARGS` in namespace `ns`.
    pub fn ip(ns: &str, args: &[&str]) -> Result<(), NetError> {
        let mut v = vec!["ip", "-n", ns];
        v.extend_from_slice(args);
        sh(&v)
    }

    /// The namespaces, in creation order.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in self.names.drain(..).rev() {
            delete(&n);
            if let Ok(mut v) = ACTIVE.lock() {
                v.retain(|x| *x != n);
            }
        }
    }
}

/// A short prefix unique to this run, for namespace and interface names (interface names have
/// at most 15 bytes, so it is 5 characters).
pub fn run_prefix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mix = (std::process::id() as u64).wrapping_mul(0x9e37_79b9) ^ u64::from(nanos);
    format!("m{:04x}", mix & 0xffff)
}

/// Moves the calling thread into namespace `name`: sockets it creates afterwards live there.
/// Used by tests and by the lab's in-process clients; the thread should not be reused for
/// anything else.
pub fn enter(name: &str) -> Result<(), NetError> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(format!("/var/run/netns/{name}"))?;
    // SAFETY: setns with a namespace fd we hold open; affects only the calling thread.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(NetError::Io(std::io::Error::last_os_error()));
    }
    Ok(())
}
